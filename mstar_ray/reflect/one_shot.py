"""The one-shot LLM reflector (``search.reflector: llm``): one prompt, one reply in the configured edit format,
and, when the child fails its checks, a repair turn with the full error, at most ``max_repairs`` times."""

from __future__ import annotations

from typing import ClassVar
from typing import Any

from mstar_ray.llm.errors import RequestRefused
from mstar_ray.llm.errors import EndpointError
from mstar_ray.llm.client import LLMClient
from mstar_ray.llm.settings import ReflectorConfig
from mstar_ray.program_id import program_id
from mstar_ray.reflect.base import ReflectorSetup
from mstar_ray.reflect.base import Reflecting
from mstar_ray.reflect.edit_formats import EditFormat, read_edit, resolve_format
from mstar_ray.reflect.ensemble import ModelEnsemble
from mstar_ray.reflect.function_edit import EditError
from mstar_ray.reflect.guidance import read_rewrite, rewrite_messages
from mstar_ray.reflect.prompt import CHARS_PER_TOKEN, reflection_messages, repair_messages
from mstar_ray.reflect.reflector import Child, Discard, SmokeTest, check_child, commit_message
from mstar_ray.reflect.reply import ReplyError
from mstar_ray.reflect.request import ReflectionRequest
from mstar_ray.reflect.v4a import PatchError


class LLMReflector:
    name: ClassVar[str] = "llm"
    needs_model: ClassVar[bool] = True
    fixes_runtime: ClassVar[bool] = True

    @classmethod
    def make(cls, setup: ReflectorSetup) -> Reflecting:
        """One reflector per configured model; an ensemble's answers each request with the model it names."""
        configs = setup.settings.reflectors()
        made: dict[str, Reflecting] = {}
        for i, config in enumerate(configs):
            role = "reflector" if i == 0 else f"reflector:{config.model}"
            client = setup.client(role)
            if client is None or config.model is None:  # the config's validation gives every reflector both
                raise EndpointError(f"the {role!r} endpoint has no model or no client in this process")
            made[config.model] = cls._one(setup, config, client)
        return next(iter(made.values())) if len(made) == 1 else ModelEnsemble(made)

    @classmethod
    def _one(cls, setup: ReflectorSetup, config: ReflectorConfig, client: LLMClient) -> LLMReflector:
        return cls(client, edit_format=resolve_format(config.edit_format, client.model),
                   context_tokens=config.context_tokens, max_repairs=setup.max_repairs)

    def __init__(self, client: LLMClient, *, edit_format: EditFormat = "v4a", context_tokens: int | None = None,
                 max_repairs: int = 3):
        self.client = client
        self.edit_format = edit_format
        self.context_tokens = context_tokens
        self.max_repairs = max_repairs

    def _prompt_budget(self, reserved_chars: int = 0) -> int | None:
        """Prompt tokens left in the model's context once its reply (and a repair turn's extra text)
        are set aside; None when the context is not configured."""
        if self.context_tokens is None:
            return None
        return self.context_tokens - self.client.endpoint.config.max_tokens - int(reserved_chars / CHARS_PER_TOKEN)

    def _opening(self, request: ReflectionRequest) -> list[dict[str, Any]]:
        """The first attempt's messages (a kind that reads more before it answers extends them)."""
        return reflection_messages(request, self.edit_format, self._prompt_budget())

    def _repair_base(self, request: ReflectionRequest, opening: list[dict[str, Any]], reserved_chars: int) -> list[dict[str, Any]]:
        """What a repair turn is built on: the original request, not the whole conversation, which a small
        context cannot hold."""
        return reflection_messages(request, self.edit_format, self._prompt_budget(reserved_chars))

    def _ask(self, messages: list[dict[str, Any]], step: str) -> str:
        return self.client.complete(messages, step=step).text

    def reflect(self, request: ReflectionRequest, smoke: SmokeTest) -> Child | Discard:
        try:
            messages = opening = self._opening(request)
        except RequestRefused as refused:
            return Discard(parent=request.parent_id, reason=str(refused), attempts=1, errors=[str(refused)])
        limit = self.max_repairs + 1
        errors: list[str] = []
        for attempt in range(1, limit + 1):
            step = "reflect" if attempt == 1 else "repair"
            # The reply's length is the reflector endpoint's max_tokens: a patch needs room, set it per model.
            try:
                reply = self._ask(messages, step)
            except RequestRefused as refused:
                # e.g. a prompt longer than a small model's context: this parent cannot be reflected on here
                return Discard(parent=request.parent_id, reason=str(refused), attempts=attempt, errors=[*errors, str(refused)])
            try:
                edit = read_edit(request.parent_source, reply, self.edit_format)
                error = check_child(request.parent_source, edit.source, request, smoke, edit.unchanged)
            except (ReplyError, PatchError, EditError) as exc:
                error = str(exc)
            if error is None:
                return Child(
                    id=program_id(edit.source), source=edit.source, parent=request.parent_id, origin="reflection",
                    commit_message=commit_message(edit.commit_message, request.parent_source, edit.source),
                    iteration=request.iteration, patch=edit.text, edit_format=edit.edit_format, attempts=attempt, errors=errors, tolerances=edit.tolerances,
                )
            errors.append(error)
            # The repair turn carries this attempt's reply and error (so it never repeats a cached request)
            # on the original request, not the whole conversation, which a small context cannot hold.
            base = self._repair_base(request, opening, len(reply) + len(error) + 200)
            messages = repair_messages(base, reply, error, attempt, limit, self.edit_format)
        return Discard(parent=request.parent_id, reason=f"no valid child after {limit} attempts", attempts=limit, errors=errors)

    def rewrite_guidance(self, request: ReflectionRequest) -> str | None:
        if request.rewrite is None:  # not a meta-step's request: there is no instruction to rewrite
            return None
        try:
            reply = self.client.complete(rewrite_messages(request.rewrite), step="guidance").text
        except RequestRefused:
            return None
        return read_rewrite(reply)

