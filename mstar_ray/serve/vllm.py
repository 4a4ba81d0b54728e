"""A model served by vLLM through Ray Serve's LLM support (``ray.serve.llm``), as thin as Serve allows: one
``LLMConfig`` (the model, its context, its GPUs as tensor parallelism, the replicas) and Serve LLM's own
OpenAI application, whose ``/v1`` routes the roles call like any other endpoint.

``ray.serve.llm`` cannot even be imported without vLLM, which only the GPU nodes install (the ``gpu`` extra:
it brings CUDA builds of torch, too heavy for the head or a laptop). So the application is built and
deployed by a Ray task that runs on a GPU node; it asks for a sliver of a GPU to land there and returns as
soon as Serve has the application, well before the replicas ask for whole GPUs.

Not run by this project's tests: no GPU is available where they run (docs/howto/served-models.md)."""

from __future__ import annotations

from typing import Any

import ray

from mstar_ray.serve.config import ServedModel

PLACEMENT_GPU = 0.01  # what the deploying task asks, only to run where vLLM is installed


def llm_config(model: ServedModel, options: dict[str, Any]) -> dict[str, Any]:
    """The ``LLMConfig`` fields: vLLM's own engine settings, Serve's replica settings. Serve LLM places each
    replica by its engine's GPUs (one per tensor-parallel rank), not by ``ray_actor_options``."""
    deployment = {key: value for key, value in options.items() if key != "ray_actor_options"}
    return {
        "model_loading_config": {"model_id": model.name, "model_source": model.model},
        "engine_kwargs": {"max_model_len": model.context_tokens, "tensor_parallel_size": int(model.resources.gpus)},
        "deployment_config": deployment,
    }


@ray.remote(num_cpus=0, num_gpus=PLACEMENT_GPU)
def _deploy_on_gpu_node(name: str, config: dict[str, Any]) -> None:
    from ray import serve
    from ray.serve.llm import LLMConfig, build_openai_app

    app = build_openai_app({"llm_configs": [LLMConfig(**config)]})
    serve.run_many([serve.RunTarget(target=app, name=name, route_prefix=f"/{name}")],
                   wait_for_ingress_deployment_creation=False, wait_for_applications_running=False)


def deploy(model: ServedModel, options: dict[str, Any], *, timeout_s: float) -> None:
    """Hand the application to Serve from a GPU node; raises what the task raised there (vLLM not installed
    on that node, a config Serve LLM refuses), or ``GetTimeoutError`` when no GPU node came in ``timeout_s``."""
    ray.get(_deploy_on_gpu_node.remote(model.name, llm_config(model, options)), timeout=timeout_s)
