"""What a sandbox may send the host, as strict schemas: one model per frame, bounded in types and sizes.

Everything a candidate process sends after its program loaded is the program's to forge, so the host
decodes a frame with a nesting limit (``sandbox.wire``), validates it here, and treats anything else as
a ``protocol`` violation of that candidate: never as an exception of its own. ``layers`` comes once,
from code that runs before the program; each call ends with one ``done``; ``llm``, ``embed`` and ``chroma``
each get one reply; ``violation`` is a notice from the audit hook. ``stored`` comes only from the program's
Chroma process, once per relayed ``chroma`` request.

This is the one place where the host turns bytes from a candidate into values it uses: every string is
bounded and encodable as UTF-8 (JSON can carry a lone surrogate such as ``"\\ud800"``, which no encoder,
tokenizer or log writer downstream accepts), every container bounded in size and depth, and a ``done``
frame's value has the type its call gives (``done_value``). Nothing past here needs to distrust its types.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from mstar_ray.sandbox import wire

# The most lists and objects an honest frame holds (a done frame's logs and the like).
MAX_CONTAINERS = 16

# The longest string any frame may carry: a frame's whole size (a toolkit prompt and embedding texts are
# limited further by the call's budget, a read by ``SandboxLimits.read_max_chars``).
Long = Annotated[str, StringConstraints(max_length=wire.MAX_FRAME_BYTES)]
Short = Annotated[str, StringConstraints(max_length=200)]
Text = Annotated[str, StringConstraints(max_length=8000)]
LogLine = Annotated[str, StringConstraints(max_length=500)]
CallNumber = Annotated[int, Field(ge=1, le=2**31)]
# The kinds the runner itself reports; a done frame claiming any other is forged.
RunnerKind = Literal["exception", "recursion", "memory", "forbidden", "contract", "bad_input", "protocol", "thread",
                     "tasks", "disk", "file_size"]


class _Frame(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class LayersFrame(_Frame):
    op: Literal["layers"]
    layers: list[Short] = Field(max_length=64)
    missing: dict[Short, Text] = Field(max_length=32)


class Loaded(_Frame):
    loaded: bool


class DoneFrame(_Frame):
    op: Literal["done"]
    call: CallNumber
    ok: bool
    value: Long | Loaded | None = None  # per call: ``done_value``
    kind: RunnerKind | None = None
    message: Text = ""
    traceback: Text = ""
    logs: list[LogLine] = Field(default_factory=list, max_length=200)


class LLMFrame(_Frame):
    op: Literal["llm"]
    call: CallNumber
    prompt: Long  # its size is a budget of the call (``SandboxLimits.llm_prompt_max_chars``)


class EmbedFrame(_Frame):
    op: Literal["embed"]
    call: CallNumber
    texts: list[Long] = Field(max_length=wire.EMBED_TEXTS_PER_REQUEST)


class ChromaFrame(_Frame):
    """A call of ``toolkit.chroma``, relayed as it is to the program's Chroma process: the host never decodes it."""

    op: Literal["chroma"]
    call: CallNumber
    payload: Long


class StoredFrame(_Frame):
    """The Chroma process's answer to one relayed call, relayed as it is to the process that made it."""

    op: Literal["stored"]
    call: CallNumber
    payload: Long


class ViolationFrame(_Frame):
    op: Literal["violation"]
    call: CallNumber | None
    event: Short
    detail: Text


AnyFrame = LayersFrame | DoneFrame | LLMFrame | EmbedFrame | ChromaFrame | StoredFrame | ViolationFrame
_FRAME: TypeAdapter[AnyFrame] = TypeAdapter(Annotated[AnyFrame, Field(discriminator="op")])


class ProtocolError(ValueError):
    """A frame that breaks the protocol: the candidate's fault, recorded as a ``protocol`` violation."""


def parse_frame(body: bytes) -> AnyFrame:
    """Decode and validate one frame body; ``ProtocolError`` (with a short reason) for anything else."""
    try:
        message = wire.decode_body(body, max_containers=MAX_CONTAINERS)
    except wire.FrameError as exc:
        raise ProtocolError(str(exc)) from None
    _refuse_unencodable(message)
    try:
        return _FRAME.validate_python(message)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise ProtocolError(f"malformed {str(message.get('op'))[:40]!r} frame: {problems}") from None


def _refuse_unencodable(message: dict[str, Any]) -> None:
    """Every string of a decoded frame, keys included, must encode as UTF-8: the decoder turns a ``\\ud800``
    escape into a lone surrogate, which the host's encoders refuse. Iterative: a frame's depth is bounded, but
    this must not depend on it."""
    stack: list[Any] = [message]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ProtocolError(f"{str(message.get('op'))[:40]!r} frame holds a string that is not valid "
                                    f"Unicode ({exc.reason} at {exc.start})") from None


def done_value(frame: DoneFrame, what: str) -> str | None:
    """What a successful call gives the host: read()'s string; nothing for load, write and feedback."""
    if what == "read":
        if not isinstance(frame.value, str):
            kind = "nothing" if frame.value is None else "an object"
            raise ProtocolError(f"read() answered with {kind}, not a string")
        return frame.value
    return None
