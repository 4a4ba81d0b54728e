"""Which model serves which role, with its limits, prices and the run's budget: the ``llm`` section of a
config. No role configured means the offline task agent (no network, no key)."""

from __future__ import annotations

from typing import Literal
from typing import get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from mstar_ray.llm.endpoint import EndpointConfig
from mstar_ray.llm.ledger import Budget, Price
from mstar_ray.llm.limits import EndpointLimit

ROLES = ("task", "toolkit", "reflector", "judge")
EmbedderKind = Literal["minilm", "openai", "hashing"]  # built by actors.wiring.make_embedder
EMBEDDER_KINDS: tuple[str, ...] = get_args(EmbedderKind)


class EmbeddingConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: EmbedderKind = Field(
        "minilm", description="minilm: all-MiniLM-L6-v2 on this machine; openai: a /v1/embeddings endpoint; "
        "hashing: lexical feature hashing (no model)")
    base_url: str | None = Field(None, description="openai: base URL of the /v1/embeddings endpoint")
    model: str | None = Field(None, description="openai: the embedding model's name there")
    api_key_env: str | None = Field(None, description="openai: NAME of the environment variable holding the key")
    timeout_s: float = Field(60.0, gt=0, description="openai: seconds per request")
    batch_size: int = Field(64, gt=0, description="texts per embedding request or MiniLM batch")
    max_concurrency: int | None = Field(None, gt=0, description="openai: requests in flight at once, across the run")
    requests_per_minute: int | None = Field(None, gt=0, description="openai: requests started per minute, across the run")

    @model_validator(mode="after")
    def _endpoint_given(self) -> EmbeddingConfig:
        if self.kind == "openai" and not (self.base_url and self.model):
            raise ValueError("kind 'openai' needs base_url and model")
        return self

    @property
    def remote(self) -> bool:
        """Embeddings from an endpoint: its requests are admitted, priced and budgeted like chat calls."""
        return self.kind == "openai"

    @property
    def endpoint_key(self) -> str:
        return f"{(self.base_url or '').rstrip('/')}#{self.model}"


class ReflectorConfig(EndpointConfig):
    """The reflector's endpoint, with what its model can handle: small self-hosted models cannot write V4A
    patches and have short contexts."""

    edit_format: Literal["auto", "v4a", "function", "file"] = Field(
        "auto", description="how the model writes its change: v4a patch, whole functions, or the whole file; "
        "auto: function for small models (a size of 3B or less in the model name), else v4a")
    context_tokens: int | None = Field(
        None, gt=0, description="the model's context window; the reflection prompt leaves out failure cases "
        "and history until prompt and reply fit")
    # search.reflector: llm-reader, which reads the run through tools before it answers (mstar_ray.reflect.reading)
    max_turns: int = Field(6, ge=1, description="llm-reader: tool-calling turns before the model must answer")
    max_read_tokens: int = Field(60000, gt=0, description="llm-reader: prompt + completion tokens its reading "
                                 "turns may take, per reflection")
    max_read_s: float = Field(600.0, gt=0, description="llm-reader: seconds its reading turns may take, per reflection")
    tool_result_chars: int = Field(4000, gt=0, description="llm-reader: characters of one tool's answer")


class LLMSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    task: EndpointConfig | None = Field(None, description="the task agent; none: the offline backend")
    toolkit: EndpointConfig | None = Field(None, description="memory programs' llm_completion; default: task")
    reflector: ReflectorConfig | list[ReflectorConfig] | None = Field(
        None, description="the reflector's endpoint; or a list of them (an ensemble: each reflection picks one by the "
        "improvement its children brought per dollar, mstar_ray.reflect.ensemble; every model priced in prices)")
    ensemble_exploration: float = Field(1.0, ge=0, description="an ensemble's exploration: the weight of the bandit's "
                                        "bonus for a model with few judged reflections (0: always the best so far)")
    judge: EndpointConfig | None = Field(None, description="LLM-judge scoring; none: token F1 only, and a rubric "
                                         "task's criteria judged by the offline stand-in grader (for CI only)")
    embedding: EmbeddingConfig = EmbeddingConfig()
    prices: dict[str, Price] = Field(default_factory=dict, description="by model name")
    budget: Budget = Budget()
    max_in_flight: int | None = Field(None, gt=0, description="requests in flight to all endpoints together, across "
                                      "the whole run (beside each role's max_concurrency); null: only theirs")

    @model_validator(mode="after")
    def _ensemble_distinct_and_priced(self) -> LLMSettings:
        models = [c.model for c in self.reflectors()]
        if isinstance(self.reflector, list):
            if not models:
                raise ValueError("reflector is an empty list: give one endpoint, or several")
            repeated = sorted({m for m in models if m is not None and models.count(m) > 1})
            if repeated or None in models:
                raise ValueError("reflector: each endpoint of the list needs a model name of its own"
                                 + (f" ({', '.join(map(str, repeated))} repeated)" if repeated else ""))
            unpriced = [m for m in models if m is not None and m not in self.prices] if len(models) > 1 else []
            if unpriced:
                raise ValueError(f"reflector lists several models, chosen by improvement per dollar, but prices has no "
                                 f"entry for {', '.join(unpriced)}")
        return self

    @model_validator(mode="after")
    def _priced_when_budgeted(self) -> LLMSettings:
        if self.toolkit is not None and self.task is None:
            raise ValueError("toolkit is set but task is not: the offline task agent answers toolkit calls itself")
        if self.budget.max_usd is not None:
            models = {c.model for c in self.endpoints().values()} | ({self.embedding.model} if self.embedding.remote else set())
            unpriced = sorted(m for m in models - set(self.prices) if m is not None)
            if unpriced:
                raise ValueError(f"budget.max_usd is set but prices has no entry for model(s) {', '.join(unpriced)}")
        return self

    def reflectors(self) -> list[ReflectorConfig]:
        """The reflector's endpoints: none, one, or an ensemble's, in the order configured."""
        if self.reflector is None:
            return []
        return list(self.reflector) if isinstance(self.reflector, list) else [self.reflector]

    def _configured(self) -> dict[str, EndpointConfig]:
        """Every endpoint configured, by role; an ensemble's second and later reflectors as ``reflector:MODEL``."""
        found = {role: getattr(self, role) for role in ROLES if role != "reflector" and getattr(self, role) is not None}
        for index, config in enumerate(self.reflectors()):
            found["reflector" if index == 0 else f"reflector:{config.model}"] = config
        return found

    def endpoints(self) -> dict[str, EndpointConfig]:
        """Configured roles; the toolkit falls back to the task agent's endpoint."""
        found = self._configured()
        if "task" in found and "toolkit" not in found:
            found["toolkit"] = found["task"]
        return found

    def with_endpoints(self, configs: dict[str, EndpointConfig]) -> LLMSettings:
        """These settings with the endpoints ``configs`` names (by ``endpoints()``'s keys) replaced."""
        update: dict[str, EndpointConfig | list[EndpointConfig]] = {
            role: config for role, config in configs.items() if role in ROLES and role != "reflector"}
        if self.reflector is not None and any(role.split(":")[0] == "reflector" for role in configs):
            listed = [configs.get(key, config) for key, config in self._configured().items()
                      if key.split(":")[0] == "reflector"]
            update["reflector"] = listed if isinstance(self.reflector, list) else listed[0]
        return self.model_copy(update=update)

    def served(self) -> dict[str, str]:
        """The served model each endpoint names (``served: NAME``), by ``endpoints()``'s key as configured."""
        return {role: config.served for role, config in self._configured().items() if config.served is not None}

    def at_served(self, urls: dict[str, str], parallel: dict[str, int] | None = None) -> LLMSettings:
        """These settings with every served role calling where its model was deployed (``urls`` by name), with
        as many requests at once as its replicas take together (``parallel`` by name, where known) unless the
        role's config sets its own limit."""
        parallel = parallel or {}
        configured = self._configured()
        return self.with_endpoints({role: configured[role].at(urls[name], parallel.get(name))
                                    for role, name in self.served().items()})

    def limits(self) -> dict[str, EndpointLimit]:
        """One limit per endpoint (server and model), the strictest any role (or the embeddings) asks for."""
        remote = [self.embedding] if self.embedding.remote else []
        merged: dict[str, EndpointLimit] = {}
        configs: list[EndpointConfig | EmbeddingConfig] = [*self.endpoints().values(), *remote]
        for config in configs:
            limit = EndpointLimit(max_concurrency=config.max_concurrency, requests_per_minute=config.requests_per_minute)
            key = config.endpoint_key
            merged[key] = merged[key].tighter(limit) if key in merged else limit
        return merged
