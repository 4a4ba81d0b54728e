"""``cluster.yaml`` on Ray's own autoscaler, on this machine: the config derived from it for Ray's fake node
provider (``fake_multinode``: the real autoscaler, launching local raylets instead of cloud machines), a cluster
started on that config, and (run as a script) the seconds from demand to a node and from idle to its release.

The derived config keeps what ``ray up`` would scale by: the node types' names, their resource names, which
type is the head, ``upscaling_speed`` and ``min_workers``; it scales the amounts down to fit a small machine
(``cpus_per_node`` CPUs per node, every other slot count by the same factor, at least one of each), caps each
type's ``max_workers``, swaps the provider, drops the node configs and setup commands, and shortens
``idle_timeout_minutes``. A change to cluster.yaml's node types changes what the autoscaler tests run on.

    .venv/bin/python scripts/fake_autoscaler.py [--nodes 2]

Never ``ray stop`` (other Rays run on this machine): the cluster is one ``ray start --head --block`` in its own
session and temp directory; its end kills that session and every process that runs in its temp directory (the
autoscaler's fake nodes are started by its monitor).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
RAY = str(Path(sys.executable).with_name("ray"))
# The fake provider names its head node's type so, whatever the config calls it.
FAKE_HEAD_TYPE = "ray.head.default"


def _scaled(resources: dict[str, float], cpus_per_node: int) -> dict[str, float]:
    cpus = resources.get("CPU", 0)
    factor = min(1.0, cpus_per_node / cpus) if cpus else 1.0
    return {name: (amount if amount == 0 else max(1, math.floor(amount * factor))) for name, amount in resources.items()}


def fake_cluster_config(cluster: dict, *, gcs_address: str, cpus_per_node: int = 2, max_workers: int = 2,
                        idle_timeout_minutes: float = 0.1) -> dict:
    """``cluster`` (a ``ray up`` config with node types) for Ray's fake node provider."""
    head = cluster["head_node_type"]
    types = {}
    for name, spec in cluster["available_node_types"].items():
        derived = {"resources": _scaled(spec.get("resources", {}), cpus_per_node), "node_config": {}}
        if name == head:
            derived["max_workers"] = 0
        else:
            derived["min_workers"] = spec.get("min_workers", 0)
            derived["max_workers"] = max(derived["min_workers"], min(spec.get("max_workers", max_workers), max_workers))
        types[FAKE_HEAD_TYPE if name == head else name] = derived
    return {
        "cluster_name": f"{cluster['cluster_name']}-fake",
        "max_workers": min(cluster.get("max_workers", 0), sum(t["max_workers"] for t in types.values())),
        "upscaling_speed": cluster.get("upscaling_speed", 1.0),
        "idle_timeout_minutes": idle_timeout_minutes,
        "provider": {"type": "fake_multinode", "gcs_address": gcs_address, "use_node_id_as_ip": True,
                     # as a cloud provider does: n nodes for a request of n (else one per request)
                     "launch_multiple": True,
                     "disable_node_updaters": True, "disable_launch_config_check": True},
        "auth": {"ssh_user": "ubuntu"},
        "available_node_types": types,
        "head_node_type": FAKE_HEAD_TYPE,
        "docker": {}, "file_mounts": {}, "cluster_synced_files": [], "file_mounts_sync_continuously": False,
        "rsync_exclude": [], "rsync_filter": [], "initialization_commands": [], "setup_commands": [],
        "head_setup_commands": [], "worker_setup_commands": [], "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
    }


def _listening(address: str) -> bool:
    """Whether ``address`` answers as the run's own check (``mstar-ray run --address``) asks it to."""
    from mstar_ray.driver.cluster import check_listening
    from mstar_ray.exit_codes import InfrastructureError

    try:
        check_listening(address)
    except InfrastructureError:
        return False
    return True


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


class FakeAutoscalingCluster:
    """``with FakeAutoscalingCluster(config_path) as cluster``: the head of ``config_path``'s fake cluster,
    with no worker nodes; ``cluster.address`` for ``ray.init`` (with ``cluster.env`` in the environment)."""

    def __init__(self, cluster_yaml: Path = ROOT / "cluster.yaml", **derive):
        self.source = yaml.safe_load(Path(cluster_yaml).read_text())
        self.derive = derive
        self.temp_dir = tempfile.mkdtemp(prefix="fas", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
        # No token authentication: a test process joins it after having imported Ray, which reads the mode once
        # at import (tests/ray_start_cluster.py's clusters are joined by subprocesses, which can be given a token).
        self.env = {"RAY_AUTH_MODE": "disabled"}
        self.head: subprocess.Popen | None = None
        self.log = Path(self.temp_dir) / "head.log"

    def __enter__(self) -> FakeAutoscalingCluster:
        # Twice at most: a port found free can be taken before the head binds it, and a head that printed that it
        # started may still not be listening (seen once in CI: "connection refused" at its address).
        for _ in range(2):
            failure = self._start_head()
            if failure is None:
                return self
            self._stop_head()
        self.__exit__()
        raise RuntimeError(f"the fake cluster's head did not start twice:\n{failure}")

    def _start_head(self) -> str | None:
        """Start the head; None once it runs and its GCS accepts connections, else what its log ends with."""
        from ray._private.services import get_node_ip_address

        ip = get_node_ip_address()
        port = _free_port()
        self.address = f"{ip}:{port}"
        self.config = fake_cluster_config(self.source, gcs_address=self.address, **self.derive)
        path = Path(self.temp_dir) / "autoscaling.yaml"
        path.write_text(yaml.safe_dump(self.config))
        head = self.source["available_node_types"][self.source["head_node_type"]]["resources"]
        resources = {k: v for k, v in head.items() if k not in ("CPU", "GPU")}
        command = [RAY, "start", "--head", "--block", "--port", str(port), "--autoscaling-config", str(path),
                   "--temp-dir", str(Path(self.temp_dir) / "t"), "--num-cpus", str(int(head.get("CPU", 0))),
                   "--resources", json.dumps(resources), "--include-dashboard", "false",
                   "--disable-usage-stats", "--ray-client-server-port", str(_free_port())]
        # The autoscaler looks every second, and gives up on a node silent for 15 s (30 by default): a cloud's
        # provider reports a reclaimed spot machine as gone at once, the fake one only when the autoscaler terminates
        # it. Not less: the fake provider starts a node while holding its lock (seconds on a busy machine), and the
        # nodes' reports can wait meanwhile (at 5 s one run started a fourth node where three were due).
        env = {**os.environ, **self.env, "RAY_FAKE_CLUSTER": "1", "AUTOSCALER_UPDATE_INTERVAL_S": "1",
               "AUTOSCALER_HEARTBEAT_TIMEOUT_S": "15",
               # and the GCS declares a node dead after 3 missed health checks a second apart (not 5 of 3 s)
               "RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
               "RAY_health_check_failure_threshold": "3"}
        with self.log.open("w") as sink:
            self.head = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 180
        while "Ray runtime started" not in self.log.read_text(errors="replace") or not _listening(self.address):
            if self.head.poll() is not None or time.monotonic() > deadline:
                return self.log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
        return None

    def monitor_log(self) -> str:
        """The autoscaler's own log (what it decided, and why)."""
        found = sorted(Path(self.temp_dir).glob("t/session_*/logs/monitor.log"))
        return found[-1].read_text(errors="replace") if found else ""

    def __exit__(self, *_exc) -> None:
        self._stop_head()
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def _stop_head(self) -> None:
        if self.head is not None:
            for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self.head.pid, sig)
                except ProcessLookupError:
                    break
                deadline = time.monotonic() + grace
                while time.monotonic() < deadline and self.head.poll() is None:
                    time.sleep(0.2)
        for pid in processes_under(self.temp_dir):  # fake nodes the monitor started, if any outlived it
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def processes_under(marker: str) -> list[int]:
    """Processes whose command line names ``marker`` (a temp directory of ours: nobody else's process does)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def worker_nodes() -> list[dict]:
    """The alive nodes the autoscaler started (``ray.nodes()``; the fake provider's head has a fixed id)."""
    import ray
    from ray.autoscaler._private.fake_multi_node.node_provider import FAKE_HEAD_NODE_ID

    return [n for n in ray.nodes() if n["Alive"] and n["NodeID"] != FAKE_HEAD_NODE_ID]


def kill_node(temp_dir: str, node_id: str) -> None:
    """SIGKILL a node's raylet, as a spot reclaim ends a machine (its workers die with it)."""
    raylets = [pid for pid in processes_under(temp_dir)
               if f"--node_id={node_id}" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")]
    if not raylets:
        raise RuntimeError(f"no raylet of node {node_id}")
    for pid in raylets:
        os.kill(pid, signal.SIGKILL)


def _wait(condition, timeout_s: float = 300) -> float:
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"waited {timeout_s:.0f} s")
        time.sleep(0.1)
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--evaluators", type=int, default=4, help="actors of {CPU: 1, evaluator: 1} to ask for")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--idle-minutes", type=float, default=0.1, help="idle_timeout_minutes of the derived config")
    args = parser.parse_args()
    import statistics

    import ray

    @ray.remote(num_cpus=1, resources={"evaluator": 1})
    class Evaluator:
        def node(self) -> str:
            return ray.get_runtime_context().get_node_id()

    figures: dict[str, list[float]] = {"demand -> first node up": [], "demand -> every actor placed": [],
                                       "idle -> every node released": []}
    with FakeAutoscalingCluster(idle_timeout_minutes=args.idle_minutes) as cluster:
        os.environ.update(cluster.env)
        ray.init(address=cluster.address, log_to_driver=False)
        for _ in range(args.rounds):
            started = time.monotonic()
            actors = [Evaluator.remote() for _ in range(args.evaluators)]
            figures["demand -> first node up"].append(_wait(lambda: worker_nodes()))
            nodes = set(ray.get([a.node.remote() for a in actors]))
            figures["demand -> every actor placed"].append(time.monotonic() - started)
            for actor in actors:
                ray.kill(actor)
            figures["idle -> every node released"].append(_wait(lambda: not worker_nodes()))
            print(f"round: {len(nodes)} nodes", flush=True)
        ray.shutdown()
    print(f"fake provider, cluster.yaml's node types, {args.evaluators} evaluators, idle_timeout_minutes "
          f"{args.idle_minutes:g}, autoscaler update every 1 s; median of {args.rounds} rounds (min-max):")
    for what, seconds in figures.items():
        print(f"  {what:32s} {statistics.median(seconds):6.1f} s  ({min(seconds):.1f}-{max(seconds):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
