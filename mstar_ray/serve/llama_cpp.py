"""llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``) as a Ray Serve deployment: each
replica starts one server process on a loopback port of its node and forwards every request Serve routes to
it. Serve does the rest: placement, the HTTP proxy, routing between replicas, health checks, restarts.

Every answer carries the replica's id and node (``REPLICA_HEADER``, ``NODE_HEADER``), so each call in the
run's ``llm_calls`` log says which replica served it. Model requests pass one at a time through a ``SlotGuard``
(the server has one slot), so no candidate can time another's prompts through the server's prompt reuse."""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import httpx
import ray
from ray import serve
from starlette.requests import Request
from starlette.responses import Response

from mstar_ray.llm.endpoint import CALLER_HEADER, NODE_HEADER, REPLICA_HEADER
from mstar_ray.serve.config import ServedModel
from mstar_ray.serve.model_file import gguf_file
from mstar_ray.serve.slot_guard import SlotGuard

READY_TIMEOUT_S = 300.0
PORT_TRIES = 3
# Headers of the forwarded request or answer that this hop or Serve's proxy sets itself.
_OWN_HEADERS = {"content-length", "transfer-encoding", "connection", "keep-alive", "date", "server", "x-request-id"}
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """Runs in the server process before exec: the kernel kills it when the replica's process dies, so a
    replica killed outright (``ray.kill``, a lost worker) leaves no server holding a core and its memory."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]  # an AF_INET socket's name: (host, port)
        return port


class LlamaCppReplica:
    """One llama.cpp server process, proxied. Built by ``deployment()`` with the model's options."""

    def __init__(self, model: ServedModel):
        started = time.monotonic()
        self.model = model
        self.gguf = gguf_file(model.model)  # on this node: the path or package must be here too
        self.replica_id = serve.get_replica_context().replica_id.unique_id
        # Named for the replica: the server's log, for the error of a server that cannot start; gone with the replica.
        self._folder = tempfile.mkdtemp(prefix=f"mstar-serve-{model.name}-{self.replica_id}-")
        self.log_path = Path(self._folder) / "llama_cpp.log"
        self.process: subprocess.Popen[bytes] | None = None
        for attempt in range(PORT_TRIES):
            self.port = _free_port()
            try:
                self._start()
                break
            except _PortTaken:
                if attempt == PORT_TRIES - 1:
                    raise RuntimeError(f"llama.cpp could not bind a port in {PORT_TRIES} tries:\n{self._log_tail()}")
        self.client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{self.port}", timeout=None)
        self.slot = SlotGuard(self.client, model.name)
        self.node_id = ray.get_runtime_context().get_node_id()
        self.ready_s = time.monotonic() - started

    def _start(self) -> None:
        m = self.model
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf), "--model_alias", m.name,
                   "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(m.context_tokens),
                   "--n_threads", str(m.n_threads), "--logits_all", "false"]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            cwd=self._folder, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            code = self.process.poll()
            if code is not None:
                tail = self._log_tail()
                if "address already in use" in tail.lower():
                    raise _PortTaken()
                raise RuntimeError(f"llama.cpp server for {m.name!r} ({self.gguf}) exited with code {code}:\n{tail}")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/v1/models", timeout=2.0).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self._stop()
        raise TimeoutError(f"llama.cpp server for {m.name!r} not ready after {READY_TIMEOUT_S:g} s:\n{self._log_tail()}")

    def _log_tail(self, chars: int = 2000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:] if self.log_path.exists() else "(no log)"

    async def __call__(self, request: Request) -> Response:
        path = request.url.path
        prefix = request.scope.get("root_path", "")
        if prefix and path.startswith(prefix):
            path = path[len(prefix):]
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _OWN_HEADERS | {"host", CALLER_HEADER}}
        # Model requests take the slot in turn; the model list and the like pass beside them.
        slot = self.slot.turn(request.headers.get(CALLER_HEADER)) if path.endswith("completions") else nullcontext()
        async with slot:
            upstream = await self.client.request(request.method, path or "/", params=request.query_params,
                                                 content=await request.body(), headers=headers)
        answer = {k: v for k, v in upstream.headers.items() if k.lower() not in _OWN_HEADERS}
        answer[REPLICA_HEADER], answer[NODE_HEADER] = self.replica_id, self.node_id
        return Response(content=upstream.content, status_code=upstream.status_code, headers=answer)

    def check_health(self) -> None:
        """Serve restarts a replica whose server died or stopped accepting connections. Not a model request:
        a one-slot server busy with a long generation answers nothing else until it is done."""
        code = self.process.poll() if self.process else -1
        if code is not None:
            raise RuntimeError(f"the llama.cpp server exited with code {code}:\n{self._log_tail()}")
        with socket.create_connection(("127.0.0.1", self.port), timeout=5.0):
            pass

    def _stop(self) -> None:
        process: subprocess.Popen[bytes] | None = getattr(self, "process", None)  # none if __init__ raised first
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def __del__(self) -> None:
        # Serve calls it when it stops a replica (the run's end, a scale-down, a restart after a failed check);
        # also on a replica whose __init__ raised, whose error already holds the log's tail.
        self._stop()
        if hasattr(self, "_folder"):
            shutil.rmtree(self._folder, ignore_errors=True)


class _PortTaken(Exception):
    """Another process took the port between choosing it and the server binding it."""


def deployment(model: ServedModel, options: dict[str, Any]) -> serve.Application:
    """The Serve application of ``model``: ``LlamaCppReplica`` with the deployment ``options`` (replicas,
    resources, health checks) chosen by ``mstar_ray.serve.deploy``."""
    app: serve.Application = serve.deployment(LlamaCppReplica, name=model.deployment_name, **options).bind(model)  # type: ignore[attr-defined]  # Serve's overloads omit a class given with options
    return app
