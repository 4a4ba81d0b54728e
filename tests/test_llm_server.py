"""Real-LLM tests against a local llama.cpp server running SmolLM2-135M-Instruct (see tests/llm_server.py)."""

from __future__ import annotations

import json

import openai
import pytest

from tests.llm_server import LlamaServer

pytestmark = pytest.mark.slow


def client(server: LlamaServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0, timeout=60)


def test_chat_completion_returns_text(llm_server: LlamaServer) -> None:
    response = client(llm_server).chat.completions.create(
        model=llm_server.model,
        messages=[{"role": "user", "content": "Say hello in one short sentence."}],
        max_tokens=16,
        temperature=0,
    )
    text = response.choices[0].message.content
    assert isinstance(text, str)
    assert text.strip()


def test_json_mode_returns_an_object(llm_server: LlamaServer) -> None:
    response = client(llm_server).chat.completions.create(
        model=llm_server.model,
        messages=[
            {"role": "system", "content": "You reply with a JSON object only."},
            {
                "role": "user",
                "content": 'Alice spoke on 3 May 2023. Return a JSON object with keys "speaker" and "date".',
            },
        ],
        response_format={"type": "json_object"},
        max_tokens=64,
        temperature=0,
    )
    text = response.choices[0].message.content
    assert isinstance(text, str)
    parsed = json.loads(text)
    assert isinstance(parsed, dict)
    assert {"speaker", "date"} & parsed.keys(), parsed
