"""One OpenAI-compatible chat endpoint per role, with its key taken from a named environment variable.

Retries (exponential backoff with jitter on 429, 5xx, timeouts and connection errors, honouring
Retry-After) are the ``openai`` client's own, configured by ``max_retries``; every request carries an
explicit ``max_tokens`` because an unbounded JSON-mode reply runs to the context limit.
"""

from __future__ import annotations

import os
import time
from typing import Any

import openai
from pydantic import BaseModel, ConfigDict, Field

from mstar_ray.llm.errors import EndpointError


class EndpointConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str = Field(description="e.g. https://api.openai.com/v1 or http://127.0.0.1:8080/v1")
    model: str
    api_key_env: str | None = Field(None, description="name of the environment variable holding the key; none for keyless servers")
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(256, gt=0)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0)
    json_mode: bool = Field(True, description="send response_format=json_object for structured steps")


class Completion(BaseModel):
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0


class ChatEndpoint:
    def __init__(self, role: str, config: EndpointConfig):
        self.role = role
        self.config = config
        key = "not-needed"
        if config.api_key_env:
            key = os.environ.get(config.api_key_env, "")
            if not key:
                raise EndpointError(
                    f"role {role!r}: the environment variable {config.api_key_env} (the key for "
                    f"{config.base_url}) is not set"
                )
        self._client = openai.OpenAI(
            base_url=config.base_url, api_key=key, timeout=config.timeout_s, max_retries=config.max_retries
        )

    def _where(self) -> str:
        key = f" (key from ${self.config.api_key_env})" if self.config.api_key_env else " (no key)"
        return f"role {self.role!r}: {self.config.base_url} model {self.config.model!r}{key}"

    def probe(self) -> None:
        """One cheap request before any evaluation, so a dead or unauthorised endpoint stops the run early."""
        try:
            self._client.with_options(max_retries=0, timeout=min(self.config.timeout_s, 15.0)).models.list()
        except openai.AuthenticationError as exc:
            raise EndpointError(f"{self._where()} refused the key: {exc}") from None
        except (openai.APIConnectionError, openai.APITimeoutError) as exc:
            raise EndpointError(f"{self._where()} is unreachable: {exc}") from None
        except openai.APIStatusError as exc:
            raise EndpointError(f"{self._where()} answered HTTP {exc.status_code}: {exc}") from None

    def complete(self, messages: list[dict[str, str]], *, json_mode: bool = False, max_tokens: int | None = None) -> Completion:
        request: dict[str, Any] = {
            "model": self.config.model,
            "messages": messages,
            "temperature": self.config.temperature,
            "max_tokens": max_tokens or self.config.max_tokens,
        }
        if json_mode and self.config.json_mode:
            request["response_format"] = {"type": "json_object"}
        started = time.monotonic()
        try:
            response = self._client.chat.completions.create(**request)
        except openai.APIError as exc:
            raise EndpointError(f"{self._where()} failed after {self.config.max_retries} retries: {exc}") from None
        usage = response.usage
        return Completion(
            text=(response.choices[0].message.content or "") if response.choices else "",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            seconds=time.monotonic() - started,
        )
