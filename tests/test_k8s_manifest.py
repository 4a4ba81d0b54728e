"""k8s/rayjob.yaml, the KubeRay RayJob of docs/howto/kubernetes.md, holds together: its entrypoint searches on a
config of this repository joined to the job's cluster, every pod runs the image k8s/Dockerfile builds on the
Ray version the cluster configs pin, the head offers no evaluator slots, the workers offer the `evaluator`
resource and every actor the job starts fits a worker group (the driver's own start-up check), and every container lets the sandbox make its namespaces. (No KubeRay schema can be read offline
here; it was checked against KubeRay's v1 CRD once by hand, docs/howto/kubernetes.md says how.)"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import yaml

from mstar_ray.run_config import load_run_config

ROOT = Path(__file__).resolve().parents[1]


def _documents() -> list[dict]:
    return list(yaml.safe_load_all((ROOT / "k8s" / "rayjob.yaml").read_text()))


def _job() -> dict:
    (job,) = [d for d in _documents() if d["kind"] == "RayJob"]
    return job


def _containers(job: dict) -> list[dict]:
    cluster = job["spec"]["rayClusterSpec"]
    pods = [cluster["headGroupSpec"]["template"]] + [g["template"] for g in cluster["workerGroupSpecs"]]
    return [c for pod in pods for c in pod["spec"]["containers"]]


def test_the_job_is_a_kuberay_v1_rayjob_that_cleans_up():
    job = _job()
    assert job["apiVersion"] == "ray.io/v1" and job["metadata"]["name"]
    spec = job["spec"]
    assert spec["shutdownAfterJobFinishes"] is True and spec["backoffLimit"] == 0
    assert set(spec["rayClusterSpec"]) >= {"headGroupSpec", "workerGroupSpecs", "rayVersion"}


def test_the_entrypoint_searches_on_a_config_of_the_repo_on_the_jobs_cluster():
    commands = [shlex.split(part) for part in _job()["spec"]["entrypoint"].split("&&")]
    run = next(c for c in commands if c[:2] == ["mstar-ray", "run"])
    assert run[run.index("--address") + 1] == "auto"
    assert run[run.index("--run-dir") + 1].startswith("/runs/")  # the volume that outlives the job
    config = load_run_config(ROOT / run[2])  # the image's working directory is the checkout
    assert config.ray.address is None  # --address decides, not the config
    assert ["mstar-ray", "sandbox"] in commands  # the head proves it can sandbox before the search starts


def test_every_pod_runs_the_projects_image_on_the_pinned_ray():
    job = _job()
    pinned = re.search(r'ray\[default\]==([\d.]+)', (ROOT / "cluster.yaml").read_text()).group(1)
    assert job["spec"]["rayClusterSpec"]["rayVersion"] == pinned
    base = re.search(r"^FROM rayproject/ray:([\d.]+)-py(\d+)", (ROOT / "k8s" / "Dockerfile").read_text(), re.M)
    assert base.group(1) == pinned and base.group(2) == "311"
    images = {c["image"] for c in _containers(job)}
    assert len(images) == 1 and images.pop().startswith("mstar-ray:")


def test_the_head_holds_no_evaluator_and_the_workers_offer_the_evaluator_resource():
    cluster = _job()["spec"]["rayClusterSpec"]
    assert cluster["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    for group in cluster["workerGroupSpecs"]:
        resources = json.loads(json.loads(group["rayStartParams"]["resources"]))
        assert resources["evaluator"] >= 1 and group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
        cpus = int(group["template"]["spec"]["containers"][0]["resources"]["limits"]["cpu"])
        assert resources["evaluator"] <= cpus  # no more evaluator slots than cores to run their sandboxes


def test_every_container_lets_the_sandbox_make_its_namespaces_and_nothing_more():
    for container in _containers(_job()):
        context = container["securityContext"]
        assert context["seccompProfile"] == {"type": "Unconfined"}  # the sandbox filters each candidate itself
        assert context["allowPrivilegeEscalation"] is False and context["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["limits"]["cpu"] == container["resources"]["requests"]["cpu"]


def test_the_run_directory_volume_is_claimed():
    claims = {d["metadata"]["name"] for d in _documents() if d["kind"] == "PersistentVolumeClaim"}
    head = _job()["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert {v["persistentVolumeClaim"]["claimName"] for v in head["volumes"]} <= claims


def _group_shapes(cluster: dict) -> list:
    """What a pod of each group offers Ray (its rayStartParams, else its container's limits), and how many."""
    from mstar_ray.driver.node_types import NodeShape

    def offered(group: dict) -> dict[str, float]:
        params = group["rayStartParams"]
        limits = group["template"]["spec"]["containers"][0]["resources"]["limits"]
        resources = json.loads(json.loads(params["resources"])) if "resources" in params else {}
        return {"CPU": float(params.get("num-cpus", limits.get("cpu", 0))),
                "GPU": float(params.get("num-gpus", limits.get("nvidia.com/gpu", 0))), **resources}

    head = cluster["headGroupSpec"]
    return [NodeShape(name="head", resources=offered(head))] + [
        NodeShape(name=g["groupName"], resources=offered(g), max_count=g["maxReplicas"]) for g in cluster["workerGroupSpecs"]]


def test_every_actor_the_job_starts_fits_a_worker_group():
    """The requests the driver checks at start (mstar_ray.driver.cluster.actor_requests) against the groups, for
    the job's own config and for it with evaluators sent to the workers as docs/howto/kubernetes.md says."""
    from mstar_ray.driver.cluster import actor_requests
    from mstar_ray.driver.node_types import unmet

    job = _job()
    shapes = _group_shapes(job["spec"]["rayClusterSpec"])
    commands = [shlex.split(part) for part in job["spec"]["entrypoint"].split("&&")]
    run = next(c for c in commands if c[:2] == ["mstar-ray", "run"])
    config = load_run_config(ROOT / run[2])
    on_workers = config.model_copy(update={"ray": config.ray.model_copy(update={"evaluator_resources": {"evaluator": 1}})})
    for checked in (config, on_workers):
        assert {key: unmet(request, shapes) for key, request in actor_requests(checked).items()} == {
            key: None for key in actor_requests(checked)}
    asks_more = config.model_copy(update={"ray": config.ray.model_copy(update={"evaluator_resources": {"gpu_eval": 1}})})
    problems = [why for request in actor_requests(asks_more).values() if (why := unmet(request, shapes))]
    assert len(problems) == 1 and "no node type provides gpu_eval" in problems[0] and "evaluators" in problems[0]
