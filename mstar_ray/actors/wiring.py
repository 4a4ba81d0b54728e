"""What a process builds from the ``llm`` settings (the run's wiring): a client per role sharing the run's
cache and gateway, the task-agent backend and the embedder; and the endpoint check before a run.

It sits above ``llm``, ``embedding``, ``agent`` and ``tasks`` (it picks among them), beside the actors that use
it; the CLI's ``eval`` and the driver use it too. Nothing here imports Ray."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING
from typing import cast

from mstar_ray.agent.backend import AgentBackend
from mstar_ray.config_file import ConfigError
from mstar_ray.embedding.cached import CachedEmbedder
from mstar_ray.embedding.embedder import Embedder
from mstar_ray.llm.cache import CacheStore, MemoryCache
from mstar_ray.llm.endpoint import EndpointConfig
from mstar_ray.llm.governor import Gateway, Governor
from mstar_ray.llm.settings import EmbeddingConfig, LLMSettings
from mstar_ray.llm.usage import CallLog
from mstar_ray.results import EvalConcurrency

if TYPE_CHECKING:
    from mstar_ray.embedding.openai_embeddings import OpenAIEmbedder
    from mstar_ray.llm.client import LLMClient


def make_embedder(config: EmbeddingConfig, gateway: Gateway | None = None) -> Embedder:
    """The configured embedder; a remote one's requests go through ``gateway`` (limits, prices, budget)."""
    if config.kind == "hashing":
        from mstar_ray.embedding.hashing import HashingEmbedder

        return HashingEmbedder()
    if config.kind == "openai":
        from mstar_ray.embedding.openai_embeddings import OpenAIEmbedder

        if config.base_url is None or config.model is None:  # a config file's are checked; --embedder openai's are not
            raise ConfigError("embedding kind 'openai' needs base_url and model: set llm.embedding.base_url and "
                              "llm.embedding.model (--llm-config FILE)")
        return OpenAIEmbedder(
            base_url=config.base_url, model=config.model, api_key_env=config.api_key_env,
            timeout_s=config.timeout_s, batch_size=config.batch_size, gateway=gateway,
        )
    from mstar_ray.embedding.minilm import MiniLMEmbedder

    return MiniLMEmbedder(batch_size=min(config.batch_size, 64))


def _stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def probe_endpoints(settings: LLMSettings, say: Callable[[str], None] = _stderr) -> LLMSettings:
    """Fail before any evaluation when a configured endpoint is unreachable, refuses its key or stays busy
    (``mstar_ray.llm.probe``); the error names the role, the URL and the key variable. Returns the settings
    with each role's request timeout chosen from its endpoint's measured speed, and its in-flight limit from
    what the server says it serves at once (``mstar_ray.llm.parallelism``), where the config sets none; says
    what was chosen, and how to change it."""
    from mstar_ray.llm.endpoint import ChatEndpoint
    from mstar_ray.llm.parallelism import Parallelism, learn as learn_parallelism
    from mstar_ray.llm.probe import Speed, measure_speed, timeout_for, wait_until_ready

    ready: set[str] = set()
    speeds: dict[str, Speed | None] = {}  # by endpoint: measured once, for every role that needs it
    learned: dict[str, Parallelism] = {}  # likewise
    chosen = {}
    for role, config in settings.endpoints().items():
        if role == "toolkit" and settings.toolkit is None:
            continue  # the task agent's endpoint and timeout
        endpoint = ChatEndpoint(role, config)
        key = config.endpoint_key
        if key not in ready:
            wait_until_ready(endpoint, say)
            ready.add(key)
        if not config.concurrency_set:
            learned[key] = learned.get(key) or learn_parallelism(config)
            config = chosen[role] = config.with_in_flight(learned[key].limit, learned[key].source,
                                                          learned[key].clears_slot)
        say(in_flight_line(role, config))
        if config.timeout_s is not None:
            say(f"{endpoint.where()}: timeout {config.timeout_s:g} s per request (from the config)")
            continue
        if key not in speeds:
            speeds[key] = measure_speed(endpoint, say)
        speed = speeds[key]
        chosen[role] = config.model_copy(update={"timeout_s": timeout_for(config, speed)})
        measured = (f"{speed.generation_tps:.1f} tokens/s generated, {speed.prompt_tps:.0f} tokens/s prompt"
                    if speed else "speed not measured")
        say(f"{endpoint.where()}: {measured} -> timeout {chosen[role].timeout_s:g} s per request "
            f"(max_tokens {config.max_tokens})")
    if settings.embedding.kind == "openai":
        cast("OpenAIEmbedder", make_embedder(settings.embedding)).probe()  # kind openai: make_embedder's OpenAIEmbedder
    return settings.with_endpoints(chosen)


def in_flight_line(role: str, config: EndpointConfig) -> str:
    """The in-flight limit a role's endpoint runs with, why, and the key that changes it."""
    limit = "no limit" if config.max_concurrency is None else f"at most {config.max_concurrency} request(s) at once"
    why = config.in_flight_source or "the default"
    return (f"role {role!r}: {config.base_url}: {limit} ({why}); set llm.{role}.max_concurrency to change it")


def fitted_evaluation(evaluation: EvalConcurrency, settings: LLMSettings,
                      say: Callable[[str], None] = _stderr) -> EvalConcurrency:
    """The evaluation's steps in flight for the probed task endpoint (``EvalConcurrency.for_endpoint``), said in
    the run's first lines; the offline agent's evaluation runs serially whatever this says, and is not told."""
    if settings.task is None:
        return evaluation
    fitted = evaluation.for_endpoint(settings.task.max_concurrency)
    if "in_flight" in evaluation.model_fields_set:
        why = "from the config"
    elif settings.task.max_concurrency is None:
        why = "the task endpoint has no limit"
    elif fitted.in_flight == settings.task.max_concurrency:
        why = "what the task endpoint admits"
    else:
        why = f"the default; the task endpoint admits {settings.task.max_concurrency}, and the rest wait there"
    if "queries_ahead" in evaluation.model_fields_set:
        ahead = "from the config"
    elif fitted.queries_ahead:
        ahead = "the task endpoint admits them all at once"
    else:
        ahead = "the task endpoint admits fewer at once: its slots are the bottleneck whatever the order"
    say(f"evaluation.in_flight {fitted.in_flight}: steps of one evaluation waiting on the model at once ({why}); "
        f"the items' queries built while the writes run: {'yes' if fitted.queries_ahead else 'no'} ({ahead}); "
        "set evaluation.in_flight or evaluation.queries_ahead to change them")
    return fitted


class RoleClients:
    def __init__(self, settings: LLMSettings, *, cache: CacheStore | None = None, gateway: Gateway | None = None):
        self.settings = settings
        self.cache = cache if cache is not None else MemoryCache()
        self.gateway = gateway or Governor.for_settings(settings)
        self._clients: dict[str, LLMClient] = {}
        self._remote_embedders: list[OpenAIEmbedder] = []  # OpenAIEmbedders: their requests are priced calls, logged like a client's

    def client(self, role: str) -> LLMClient | None:
        """The role's ``LLMClient``, or ``None`` when the role is not configured; an ensemble's other reflectors
        are ``reflector:MODEL`` (``LLMSettings.endpoints``), whose calls are logged as the reflector's."""
        config = self.settings.endpoints().get(role)
        if config is None:
            return None
        if role not in self._clients:
            from mstar_ray.llm.client import LLMClient
            from mstar_ray.llm.endpoint import ChatEndpoint

            self._clients[role] = LLMClient(ChatEndpoint(role.split(":")[0], config), cache=self.cache, gateway=self.gateway)
        return self._clients[role]

    def drain_calls(self) -> list[CallLog]:
        """Every request the roles' clients and remote embedders made since the last drain (a client shared
        by two roles once)."""
        made: list[LLMClient | OpenAIEmbedder] = [*self._clients.values(), *self._remote_embedders]
        unique = {id(c): c for c in made}
        return [call for client in unique.values() for call in client.drain_calls()]

    def backend(self) -> AgentBackend:
        task = self.client("task")
        if task is None:
            from mstar_ray.agent.offline import OfflineBackend

            return OfflineBackend(meaning=self.embedder())  # it reads for meaning with the run's embedding model
        from mstar_ray.agent.llm_backend import LLMBackend

        return LLMBackend(task, self.client("toolkit"))

    def embedder(self) -> CachedEmbedder:
        inner = make_embedder(self.settings.embedding, self.gateway)
        if self.settings.embedding.remote:
            self._remote_embedders.append(cast("OpenAIEmbedder", inner))  # a remote kind: make_embedder's OpenAIEmbedder
        return CachedEmbedder(inner, self.cache)
