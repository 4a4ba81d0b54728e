"""What a sandbox may send the host, as strict schemas: one model per frame, bounded in types and sizes.

Everything a candidate process sends after its program loaded is the program's to forge, so the host
decodes a frame with a nesting limit (``sandbox.wire``), validates it here, and treats anything else as
a ``protocol`` violation of that candidate: never as an exception of its own. ``layers`` comes once,
from code that runs before the program; each call ends with one ``done``; ``llm`` and ``embed`` each
get one reply; ``violation`` is a notice from the audit hook.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from sandbox import wire

# The most lists and objects an honest frame holds (a done frame's logs and the like).
MAX_CONTAINERS = 16

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


class DoneFrame(_Frame):
    op: Literal["done"]
    call: CallNumber
    ok: bool
    value: Any = None  # checked per call: read() must give a str
    kind: RunnerKind | None = None
    message: Text = ""
    traceback: Text = ""
    logs: list[LogLine] = Field(default_factory=list, max_length=200)


class LLMFrame(_Frame):
    op: Literal["llm"]
    call: CallNumber
    prompt: str  # its size is a budget of the call (``SandboxLimits.llm_prompt_max_chars``)


class EmbedFrame(_Frame):
    op: Literal["embed"]
    call: CallNumber
    texts: list[str] = Field(max_length=wire.EMBED_TEXTS_PER_REQUEST)


class ViolationFrame(_Frame):
    op: Literal["violation"]
    call: CallNumber | None
    event: Short
    detail: Text


Frame = Annotated[LayersFrame | DoneFrame | LLMFrame | EmbedFrame | ViolationFrame, Field(discriminator="op")]
_FRAME = TypeAdapter(Frame)


class ProtocolError(ValueError):
    """A frame that breaks the protocol: the candidate's fault, recorded as a ``protocol`` violation."""


def parse_frame(body: bytes) -> LayersFrame | DoneFrame | LLMFrame | EmbedFrame | ViolationFrame:
    """Decode and validate one frame body; ``ProtocolError`` (with a short reason) for anything else."""
    try:
        message = wire.decode_body(body, max_containers=MAX_CONTAINERS)
    except wire.FrameError as exc:
        raise ProtocolError(str(exc)) from None
    try:
        return _FRAME.validate_python(message)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:3])
        raise ProtocolError(f"malformed {str(message.get('op'))[:40]!r} frame: {problems}") from None
