"""What a sandbox process may use: the limits the program's process, its readers and its Chroma process run
under, from the run config's ``sandbox`` section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from mstar_ray.sandbox_host import jail
from mstar_ray.sandbox_host.jail import Layer


class SandboxLimits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    call_timeout_s: float = Field(60.0, gt=0, description="wall deadline of one write/read (and of loading)")
    llm_calls_per_call: int = Field(1, ge=0, description="toolkit LLM calls allowed in one write/read")
    llm_prompt_max_chars: int = Field(32_000, gt=0, description="longest prompt one toolkit LLM call may send")
    embed_texts_per_call: int = Field(2048, ge=0, description="texts the host embeds for one write/read")
    embed_chars_per_call: int = Field(2_000_000, ge=0, description="characters the host embeds for one write/read")
    toolkit_cache_mb: int = Field(32, ge=0, description="what one evaluation's toolkit calls may add to the run's "
                                  "cache (embeddings and LLM replies, in the candidate's own part); past it they are "
                                  "answered but not stored")
    toolkit_requests_per_call: int = Field(512, ge=1, description="toolkit requests (embed, LLM, Chroma) one write/read "
                                           "may send, whatever each holds: an empty request costs a round trip too")
    queued_max_s: float = Field(600.0, ge=0, description="time one write/read's toolkit requests may spend queued "
                                "for shared endpoints (slots, rate limits, back-off) without counting against its "
                                "deadline: others' load is not the program's time; past it the wait counts")
    read_max_chars: int = Field(3000, gt=0, description="longest context a read() may return (the contract)")
    memory_mb: int = Field(2048, ge=256, description="address-space limit of the sandbox process")
    cpu_seconds: int = Field(600, gt=0, description="CPU-time limit of the whole sandbox process")
    file_size_mb: int = Field(64, gt=0, description="largest file the program may write (RLIMIT_FSIZE)")
    max_open_files: int = Field(256, ge=32, description="open file descriptors (RLIMIT_NOFILE)")
    max_tasks: int = Field(512, ge=32, description="threads and processes the sandbox may hold at once (RLIMIT_NPROC "
                           "in its own user namespace); reaching it is a violation")
    disk_mb: int = Field(256, ge=1, description="size of the candidate's folder (its own tmpfs)")
    disk_inodes: int = Field(10_000, ge=64, description="files and folders the candidate's folder may hold")
    require: list[Layer] = Field(
        default_factory=lambda: list(jail.LAYERS),
        description="layers without which the sandbox refuses to run a program; leave one out to run without it "
        "on purpose (the machine cannot give it)")
