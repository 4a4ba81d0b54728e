"""A real Ray cluster on this machine, as a user starts one: a head and worker nodes each started with
``ray start`` (separate raylets, loopback only), torn down by the processes this module started.

Other Ray clusters run on the same machine (other tests, other users), so every port is chosen free and
the cluster keeps its session files in its own temp directory, one per node; ``ray stop`` is never called (it stops
every Ray on the machine). Each node is ``ray start --block`` in its own session: killing that session's
process group ends the node's GCS, raylet, dashboard and workers, and nothing else.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
HOST = "127.0.0.1"


def free_ports(count: int) -> list[int]:
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind((HOST, 0))
        sockets.append(sock)
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


def free_port_range(width: int, taken: list[int]) -> int:
    """The first port of ``width`` consecutive ports that are free now and overlap no range in ``taken``
    (for a node's worker processes, which bind them only later)."""
    for start in range(20000 + os.getpid() % 200 * 100, 60000, 997):
        if any(abs(start - other) < width for other in taken):
            continue
        try:
            probes = []
            for port in range(start, start + width):
                sock = socket.socket()
                probes.append(sock)
                sock.bind((HOST, port))
            return start
        except OSError:
            continue
        finally:
            for sock in probes:
                sock.close()
    raise RuntimeError("no free port range")


class RayStartCluster:
    """``with RayStartCluster(nodes=[...]) as cluster``: ``cluster.address`` (GCS, for ``ray.init``) and
    ``cluster.dashboard`` (``http://...``, for ``ray job submit``)."""

    def __init__(self, head: dict, workers: list[dict], env: dict[str, str] | None = None):
        self.head_spec, self.worker_specs = head, workers
        self.temp_dir = tempfile.mkdtemp(prefix="rsc", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
        # The cluster's own token (token authentication, as Ray's security guide asks for a cluster): every
        # `ray` command and the job's driver find it by RAY_AUTH_TOKEN_PATH, never the user's ~/.ray.
        self.token = Path(self.temp_dir) / "auth_token"
        self.token.write_text(secrets.token_hex(32))
        self.token.chmod(0o600)
        self.env = {**os.environ, **(env or {}), "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(self.token)}
        self.nodes: list[subprocess.Popen] = []
        self.worker_ranges: list[int] = []
        self.logs: list[Path] = []

    def _start(self, spec: dict, head: bool) -> None:
        gcs, manager, objects, client, agent_grpc, agent_http, runtime_env, metrics, dashboard = free_ports(9)
        # Each node its own temp dir, as on machines of their own: nodes sharing one share the session's
        # runtime_resources, and a node setting up a job's working_dir replaces the copy (Ray unpacks it with
        # overwrite) that the job's driver on another node has for its working directory.
        node_dir = Path(self.temp_dir) / f"n{len(self.nodes)}"
        node_dir.mkdir(exist_ok=True)
        command = [RAY, "start", "--block", "--node-ip-address", HOST, "--temp-dir", str(node_dir),
                   "--num-cpus", str(spec.get("num_cpus", 1)), "--resources", json.dumps(spec.get("resources", {})),
                   "--node-manager-port", str(manager), "--object-manager-port", str(objects),
                   "--dashboard-agent-grpc-port", str(agent_grpc), "--dashboard-agent-listen-port", str(agent_http),
                   "--runtime-env-agent-port", str(runtime_env), "--metrics-export-port", str(metrics),
                   "--min-worker-port", str(first := free_port_range(40, self.worker_ranges)),
                   "--max-worker-port", str(first + 39),
                   "--disable-usage-stats"]
        if head:
            self.gcs_port, self.dashboard_port = gcs, dashboard
            command += ["--head", "--port", str(gcs), "--ray-client-server-port", str(client),
                        "--dashboard-host", HOST, "--dashboard-port", str(dashboard), "--include-dashboard", "true"]
        else:
            command += ["--address", self.address]
        self.worker_ranges.append(first)
        log = Path(self.temp_dir) / f"ray-start-{len(self.nodes)}.log"
        self.logs.append(log)
        with log.open("w") as sink:
            self.nodes.append(subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=self.env,
                                               start_new_session=True))

    @property
    def address(self) -> str:
        return f"{HOST}:{self.gcs_port}"

    @property
    def dashboard(self) -> str:
        return f"http://{HOST}:{self.dashboard_port}"

    def __enter__(self) -> RayStartCluster:
        try:
            self._start_until_up(self.head_spec, head=True)
            for spec in self.worker_specs:
                self._start_until_up(spec, head=False)
            self._wait(self._job_server_answers, "the job server")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start_until_up(self, spec: dict, head: bool, attempts: int = 3) -> None:
        """`ray start` gives a node's raylet 30 s to register (fixed in Ray): on a loaded machine it can miss
        that and exit, so a node that exits before it is up is started again, on fresh ports."""
        for attempt in range(attempts):
            self._start(spec, head)
            node, log = self.nodes[-1], self.logs[-1]
            deadline = time.monotonic() + 180
            while node.poll() is None and not self._started(len(self.nodes) - 1) and time.monotonic() < deadline:
                time.sleep(0.5)
            if self._started(len(self.nodes) - 1) and node.poll() is None:
                return
            _end_session(self.nodes.pop())
            self.logs.pop()
            if attempt == attempts - 1:
                raise RuntimeError(f"`ray start` did not bring the node up ({attempts} attempts):\n"
                                   f"{log.read_text()[-3000:]}")

    def _started(self, index: int) -> bool:
        """`ray start` says so once the node's raylet is registered with the head (asking `ray status` costs a
        Python start-up each time, which on a loaded machine outlasts the node's own start)."""
        return "Ray runtime started" in self.logs[index].read_text(errors="replace")

    def _job_server_answers(self) -> bool:
        request = urllib.request.Request(f"{self.dashboard}/api/version",
                                         headers={"Authorization": f"Bearer {self.token.read_text()}"})
        try:
            with urllib.request.urlopen(request, timeout=10) as reply:
                return reply.status == 200
        except OSError:
            return False

    def _wait(self, ready, what: str, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node, log in zip(self.nodes, self.logs):
                if node.poll() is not None:
                    raise RuntimeError(f"`ray start` exited ({node.returncode}) waiting for {what}:\n{log.read_text()[-3000:]}")
            if ready():
                return
            time.sleep(0.5)
        raise TimeoutError(f"waited {timeout:.0f} s for {what}")

    def job(self, *args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
        """``ray job ARGS`` against this cluster's job server (run in ``cwd``: ``--working-dir .`` is that)."""
        return subprocess.run([RAY, "job", *args[:1], "--address", self.dashboard, *args[1:]], capture_output=True,
                              text=True, env=self.env, cwd=cwd, timeout=timeout)

    def __exit__(self, *_exc) -> None:
        for node in reversed(self.nodes):  # workers first, then the head
            _end_session(node)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _end_session(node: subprocess.Popen) -> None:
    """SIGTERM the node's process group (``ray start --block`` then stops what it started), SIGKILL what is left."""
    for sig, grace in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(node.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            node.poll()  # reap the leader: a zombie would keep the group alive
            try:
                os.killpg(node.pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
