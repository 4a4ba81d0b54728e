"""One OpenAI-compatible chat endpoint per role, with its key taken from a named environment variable.

``ChatEndpoint.send`` makes exactly one attempt; retries, the run-wide limits, the cache and the cost
ledger wrap it in ``mstar_ray.llm.client``. Every request carries an explicit ``max_tokens`` because an
unbounded JSON-mode reply runs to the context limit.
"""

from __future__ import annotations

import os
import time
from typing import Any
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from mstar_ray.llm.errors import EndpointError
from mstar_ray.llm.retry import parse_retry_after

if TYPE_CHECKING:  # imported where used: loading openai costs every process that never calls a model
    import openai


# Requests in flight to one endpoint where the config does not say: what a hosted API takes from one user
# without queueing or 429s; and for a server on this machine (a loopback address), one: a llama.cpp server
# has one slot unless started with more, and requests beyond its slots only queue in it or time out.
DEFAULT_MAX_CONCURRENCY = 16
LOCAL_MAX_CONCURRENCY = 1
_LOOPBACK = ("localhost", "127.", "[::1]", "0.0.0.0")
# A request's timeout where neither the config nor a start-up measurement chose one (a client made directly).
UNMEASURED_TIMEOUT_S = 60.0
# One attempt of the start-up check: a server that accepts the connection but says nothing for this long
# is busy (a single-slot llama.cpp server finishing an earlier request), and is asked again.
PING_S = 15.0
# A model the run serves itself (``mstar_ray.serve``) says in every answer which replica, on which node, wrote
# it; the call's record keeps the replica.
REPLICA_HEADER = "x-mstar-replica"
NODE_HEADER = "x-mstar-node"
# A candidate's toolkit request names the candidate (its program id), so a replica the run serves can keep one
# candidate from timing another's prompts through the server's prompt reuse (``mstar_ray.serve.slot_guard``).
CALLER_HEADER = "x-mstar-caller"
# A completion request that leaves a llama.cpp slot in a state nobody chose: a newline, one token out, greedy.
# Sent before a candidate's request that follows anyone else's, where the server reuses the last prompt's state.
SLOT_CLEAR = {"prompt": "\n", "max_tokens": 1, "temperature": 0.0}


def clears_before(caller: str | None, holder: str | None) -> bool:
    """Whether a slot whose state ``holder`` left (None: the host, a clear, or nobody known) must get
    ``SLOT_CLEAR`` before ``caller``'s request (None: the host's, never held up)."""
    return caller is not None and caller != holder


class EndpointConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str | None = Field(None, description="e.g. https://api.openai.com/v1 or http://127.0.0.1:8080/v1")
    model: str | None = Field(None, description="the model name the endpoint serves; with served, that model's name")
    served: str | None = Field(None, description="instead of base_url: a model of the run config's serve section, "
                               "deployed by the run (mstar_ray.serve)")
    api_key_env: str | None = Field(None, description="name of the environment variable holding the key; none for keyless servers")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="sampling temperature of every request")
    max_tokens: int = Field(256, gt=0, description="completion tokens per request")
    timeout_s: float | None = Field(
        None, gt=0, description="seconds per request; unset: chosen at start-up from the endpoint's measured speed "
        "and max_tokens (mstar_ray.llm.probe), or 60 s where nothing was measured")
    busy_wait_s: float = Field(300.0, ge=0, description="at start-up, how long to wait for a server that accepts "
                               "connections but does not answer yet (busy with an earlier request)")
    max_retries: int = Field(4, ge=0, description="retries of a failed request, with back-off")
    json_mode: bool = Field(True, description="send response_format=json_object for structured steps")
    max_concurrency: int | None = Field(
        DEFAULT_MAX_CONCURRENCY, gt=0, description="requests in flight at once to this endpoint, across the whole run "
        "(every evaluator and reflector on every node); unset: what the server says it serves at once, learned at "
        "start-up (a llama.cpp server's slots, a vLLM or SGLang server's batch, the replicas of a model the run "
        "serves: mstar_ray.llm.parallelism), else 16, or 1 for a server on this machine that does not say; null: "
        "no limit")
    requests_per_minute: int | None = Field(None, gt=0, description="requests started per minute, across the whole run")

    @model_validator(mode="before")
    @classmethod
    def _one_address(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        if data.get("served") is not None:
            if data.get("base_url") is not None:
                raise ValueError("give base_url or served, not both")
            if data.get("model") not in (None, data["served"]):
                raise ValueError(f"a served role asks for the model by the name it is served under: leave model out "
                                 f"(or set it to {data['served']!r})")
            return {**data, "model": data["served"]}
        if data.get("base_url") is None:
            raise ValueError("give base_url (an endpoint) or served (a model of the serve section)")
        if data.get("model") is None:
            raise ValueError("model is required with base_url")
        return data

    # Where the in-flight limit came from when the config did not set it (learned from the server, or the run's
    # served replicas); None while nothing was learned.
    _in_flight_source: str | None = PrivateAttr(None)
    # Learned: the server reuses the last prompt's state for the next request, whoever sends it, and serves one
    # request at a time, which the run's limit of one keeps in order (``mstar_ray.llm.parallelism``).
    _clears_slot: bool = PrivateAttr(False)

    @model_validator(mode="after")
    def _local_default(self) -> EndpointConfig:
        # Set without marking the field as given: a value the user wrote is kept, a default may be learned.
        if not self.concurrency_set and self.base_url is not None and on_this_machine(self.base_url):
            object.__setattr__(self, "max_concurrency", LOCAL_MAX_CONCURRENCY)
        return self

    @property
    def concurrency_set(self) -> bool:
        """True when the config gave ``max_concurrency`` (or it was learned already): nothing overrides it then."""
        return "max_concurrency" in self.model_fields_set

    @property
    def in_flight_source(self) -> str | None:
        """Why ``max_concurrency`` is what it is, when it was learned or set; None for an unlearned default."""
        if self._in_flight_source is not None:
            return self._in_flight_source
        return "set in the config" if self.concurrency_set else None

    @property
    def clears_slot(self) -> bool:
        """Whether a candidate's request is preceded by ``SLOT_CLEAR`` when the last request was another's."""
        return self._clears_slot

    def with_in_flight(self, limit: int | None, source: str, clears_slot: bool = False) -> EndpointConfig:
        """This config with a learned in-flight limit, unless the config set one (the user's value is kept:
        then the order of requests at a one-slot server is not the run's to keep, and no slot is cleared)."""
        if self.concurrency_set:
            return self
        learned = self.model_copy(update={"max_concurrency": limit})
        learned._in_flight_source = source
        learned._clears_slot = clears_slot and limit == 1
        return learned

    def at(self, base_url: str, parallel: int | None = None) -> EndpointConfig:
        """This role's settings, calling ``base_url`` (where its served model was deployed), with ``parallel``
        requests at once (what its replicas take together) unless the config set a limit."""
        moved = self.model_copy(update={"base_url": base_url, "served": None})
        if parallel is None:
            return moved
        return moved.with_in_flight(parallel, f"the run's served replicas take {parallel} at once")

    @property
    def request_timeout_s(self) -> float:
        return self.timeout_s if self.timeout_s is not None else UNMEASURED_TIMEOUT_S

    @property
    def endpoint_key(self) -> str:
        """Roles that share a server and model share its limits."""
        where = self.base_url.rstrip("/") if self.base_url else f"served:{self.served}"
        return f"{where}#{self.model}"


def on_this_machine(base_url: str) -> bool:
    host = base_url.split("://", 1)[-1].split("/", 1)[0].rsplit("@", 1)[-1]
    return host.startswith(_LOOPBACK)


class ToolCall(BaseModel):
    """A function the model asked to call (the OpenAI tools API): its call id, name and JSON arguments."""

    id: str
    name: str
    arguments: str = "{}"


class Completion(BaseModel):
    text: str
    tool_calls: list[ToolCall] = []  # asked only by a request that offered tools
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    cached: bool = False
    retries: int = 0
    served_by: str | None = None  # the replica that answered (REPLICA_HEADER), for a model the run serves


class CallFailure(Exception):
    """One failed attempt, classified for the retry loop."""

    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None, status: int | None = None,
                 timed_out: bool = False):
        super().__init__(message)
        self.retryable = retryable
        self.timed_out = timed_out
        self.retry_after = retry_after
        self.status = status


class ChatEndpoint:
    def __init__(self, role: str, config: EndpointConfig):
        self.role = role
        self.config = config
        if config.base_url is None:
            raise EndpointError(f"role {role!r} names the served model {config.served!r}, which only a run deploys "
                                "(mstar-ray run with a serve section); give base_url to call an endpoint directly")
        key = "not-needed"
        if config.api_key_env:
            key = os.environ.get(config.api_key_env, "")
            if not key:
                raise EndpointError(
                    f"role {role!r}: the environment variable {config.api_key_env} (the key for "
                    f"{config.base_url}) is not set"
                )
        # Imported here, not at the top: openai takes about a second to import, and every Ray worker and CLI
        # process imports this module whether or not it ever calls a model.
        import openai

        self._client = openai.OpenAI(base_url=config.base_url, api_key=key, timeout=config.request_timeout_s, max_retries=0)

    def where(self) -> str:
        key = f" (key from ${self.config.api_key_env})" if self.config.api_key_env else " (no key)"
        return f"role {self.role!r}: {self.config.base_url} model {self.config.model!r}{key}"

    def ping(self, timeout_s: float = PING_S) -> bool:
        """One cheap request (the model list): True when it is answered, False when the server accepts the
        connection but answers nothing within ``timeout_s`` (busy). Raises ``EndpointError`` saying which
        when it cannot be used: nothing listens there (refused), the host is not found or not reached,
        the key is refused, or an HTTP error."""
        import openai  # loaded by __init__ already: see there

        try:
            self._client.with_options(timeout=timeout_s).models.list()
        except openai.AuthenticationError as exc:
            raise EndpointError(f"{self.where()} refused the key: {exc}") from None
        except openai.APITimeoutError as exc:
            if type(exc.__cause__).__name__ == "ConnectTimeout":  # the HTTP library openai uses, by name
                raise EndpointError(f"{self.where()} is unreachable: no connection within {timeout_s:g} s "
                                    "(a wrong or filtered address?)") from None
            return False
        except openai.APIConnectionError as exc:
            raise EndpointError(f"{self.where()} is unreachable: {_connection_problem(exc)}") from None
        except openai.APIStatusError as exc:
            raise EndpointError(f"{self.where()} answered HTTP {exc.status_code}: {exc}") from None
        return True

    def payload(self, messages: list[dict[str, Any]], *, json_mode: bool = False, max_tokens: int | None = None,
                tools: list[dict[str, Any]] | None = None, tool_choice: str | None = None) -> dict[str, Any]:
        """The full request body: what is sent, and what the cache is keyed by; ``tools``: functions the model
        may call (the OpenAI tools API)."""
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": max_tokens or self.config.max_tokens,
        }
        if json_mode and self.config.json_mode:
            body["response_format"] = {"type": "json_object"}
        if tools:
            body["tools"] = tools
            if tool_choice is not None:  # "none": answer now, with the tools' results in the conversation
                body["tool_choice"] = tool_choice
        return body

    def clear_slot(self) -> None:
        """Sends ``SLOT_CLEAR``. Raises ``CallFailure`` (retryable) when it is not answered."""
        import openai  # loaded by __init__ already: see there

        try:
            self._client.completions.create(model=self.config.model or "", **SLOT_CLEAR)  # type: ignore[call-overload]  # the body's keys are the call's
        except openai.APIError as exc:
            raise CallFailure(f"clearing the server's slot failed: {str(exc)[:300]}", retryable=True) from None

    def send(self, body: dict[str, Any], *, timeout_s: float | None = None, caller: str | None = None) -> Completion:
        """Exactly one attempt (within ``timeout_s``, else the config's), on behalf of the candidate ``caller``
        (None: the host). Raises ``CallFailure`` saying whether a retry may help."""
        import openai  # loaded by __init__ already: see there

        timeout = timeout_s or self.config.request_timeout_s
        started = time.monotonic()
        try:
            raw = self._client.with_options(timeout=timeout).chat.completions.with_raw_response.create(
                **body, extra_headers={CALLER_HEADER: caller} if caller else None)
            response = raw.parse()
        except openai.APITimeoutError:
            raise CallFailure(f"timed out after {timeout:g} s", retryable=True, timed_out=True) from None
        except openai.APIConnectionError as exc:
            raise CallFailure(f"connection failed ({exc.__cause__ or exc})", retryable=True) from None
        except openai.APIStatusError as exc:
            status = exc.status_code
            retryable = status in (408, 409, 429) or status >= 500
            raise CallFailure(
                f"HTTP {status}: {_server_message(exc)[:300]}", retryable=retryable,
                retry_after=parse_retry_after(exc.response.headers), status=status,
            ) from None
        except openai.APIError as exc:
            raise CallFailure(f"bad reply: {str(exc)[:300]}", retryable=False) from None
        usage = response.usage
        message = response.choices[0].message if response.choices else None
        return Completion(
            text=(message.content or "") if message else "",
            tool_calls=[ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "{}")
                        for c in (message.tool_calls or []) if getattr(c, "function", None)] if message else [],
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            seconds=time.monotonic() - started,
            served_by=raw.headers.get(REPLICA_HEADER),
        )


def _connection_problem(exc: openai.APIConnectionError) -> str:
    """Refused (nothing listens at that port), a name that does not resolve, or the error as it is."""
    cause = exc.__cause__
    text = str(cause or exc)
    connect = type(cause).__name__ == "ConnectError"
    if connect and "refused" in text.lower():
        return f"connection refused, nothing listens there (is the server started?): {text}"
    if connect and ("name" in text.lower() or "resolution" in text.lower()):
        return f"the host name does not resolve: {text}"
    return text


def _server_message(exc: openai.APIStatusError) -> str:
    """The server's own words (``{"error": {"message": ...}}``) rather than the client's wrapper text."""
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(exc)
