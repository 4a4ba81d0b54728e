"""A scripted OpenAI-compatible HTTP server for the behaviours a real llama.cpp server cannot be made to
show on demand: 429 storms with Retry-After, error statuses, a fixed latency, and a record of how many
requests were in flight at once. The client under test is real; only the far end is scripted."""

from __future__ import annotations

import http.server
import json
import socket
import struct
import threading
import time
from collections import deque

from mstar_ray.llm.endpoint import CALLER_HEADER


# A scripted "failure" that answers nothing: the connection is dropped with a reset (RST) mid-request, as
# when the process holding it dies.
RESET = 0


class _Listening(http.server.ThreadingHTTPServer):
    # The standard library's backlog is 5: a burst of a few dozen connections (an evaluation's requests in flight)
    # overflowed it and clients saw resets, where a served model's server (uvicorn: 2048) queues them.
    request_queue_size = 1024


class ScriptedServer:
    """``reply_for(messages)``, if given, answers every chat request from its own messages (a deterministic
    model: the same request gets the same reply whatever order requests come in); ``latency_for(messages)``
    likewise sets each request's latency (replies then come back out of order). A reply may be a list of
    tool calls, ``[{"name": ..., "arguments": {...}}]``, answered as the OpenAI tools API does (each request's
    ``tools`` are kept in ``tools``). ``meet``: the first ``meet`` requests are held until all of them are in
    flight at once (or ``meet_timeout_s`` passes, below a client's 60 s timeout), so overlap is shown whatever
    the machine's load, not hoped for from a latency."""

    def __init__(self, *, latency_s: float = 0.0, reply: str = '{"answer": "ok"}', reply_for=None, latency_for=None,
                 context_chars: int | None = None, get_json: dict[str, object] | None = None, meet: int = 0,
                 meet_timeout_s: float = 50.0):
        self.latency_s = latency_s
        self._meeting = threading.Barrier(meet, timeout=meet_timeout_s) if meet else None
        self.met = False  # the first ``meet`` requests were all in flight at once
        self.reply = reply
        self.reply_for = reply_for
        self.latency_for = latency_for
        # A chat request whose messages hold more characters is refused as llama.cpp refuses a prompt beyond its
        # context: HTTP 400.
        self.context_chars = context_chars
        # What a GET of each path answers (e.g. llama.cpp's "/props"); any other GET gets the model list.
        self.get_json = dict(get_json or {})
        self.gets: list[str] = []  # the path of every GET
        self.failures: deque[tuple[int, dict[str, str]]] = deque()  # served first, one per request
        self.replies: deque[str] = deque()  # chat replies in order; then ``reply`` for ever
        self.prompts: list[list[dict]] = []  # the messages of every chat request
        self.tools: list[list[dict] | None] = []  # the tools each chat request offered
        self.callers: list[str | None] = []  # the candidate each chat request named (CALLER_HEADER), if any
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.started_at: list[float] = []
        self._lock = threading.Lock()
        self._httpd = _Listening(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def fail_next(self, count: int, status: int = 429, headers: dict[str, str] | None = None) -> None:
        for _ in range(count):
            self.failures.append((status, headers or {}))

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, body: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                with server._lock:
                    server.gets.append(self.path)
                if self.path in server.get_json:
                    self._send(200, server.get_json[self.path])
                    return
                self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                request = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests += 1
                    meeting = server._meeting
                    if meeting is not None and server.requests > meeting.parties:
                        meeting = None
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    server.started_at.append(time.monotonic())
                    failure = server.failures.popleft() if server.failures else None
                    size = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
                    if failure is None and server.context_chars is not None and size > server.context_chars:
                        failure = (400, {})
                    latency = server.latency_s
                    if failure is None and "messages" in request:
                        server.prompts.append(request["messages"])
                        server.tools.append(request.get("tools"))
                        server.callers.append(self.headers.get(CALLER_HEADER))
                        content = server.replies.popleft() if server.replies else server.reply
                        if server.reply_for is not None:
                            content = server.reply_for(request["messages"])
                        if server.latency_for is not None:
                            latency = server.latency_for(request["messages"])
                try:
                    if meeting is not None:
                        try:
                            meeting.wait()
                            server.met = True
                        except threading.BrokenBarrierError:  # they never overlapped: ``met`` stays False
                            pass
                    time.sleep(latency)
                finally:
                    # counted out before the reply is written: a client holding its reply may send its next
                    # request before this thread would get back to the lock
                    with server._lock:
                        server.in_flight -= 1
                if failure is not None and failure[0] == RESET:
                    self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True
                    self.connection.close()
                elif failure is not None:
                    status, headers = failure
                    message = "the request exceeds the available context size" if status == 400 else f"scripted {status}"
                    self._send(status, {"error": {"message": message, "type": "scripted"}}, headers)
                elif self.path.endswith("/embeddings"):
                    inputs = request["input"] if isinstance(request["input"], list) else [request["input"]]
                    data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, 0.5]}
                            for i, t in enumerate(inputs)]
                    tokens = sum(len(t.split()) for t in inputs)
                    self._send(200, {"object": "list", "data": data, "model": request.get("model"),
                                     "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})
                else:
                    message = {"role": "assistant", "content": content}
                    if isinstance(content, list):  # tool calls
                        message = {"role": "assistant", "content": None, "tool_calls": [
                            {"id": f"call_{server.requests}_{i}", "type": "function",
                             "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
                            for i, c in enumerate(content)]}
                    self._send(200, {
                        "id": "c1", "object": "chat.completion", "created": 0, "model": request.get("model"),
                        "choices": [{"index": 0, "finish_reason": "tool_calls" if isinstance(content, list) else "stop",
                                     "message": message}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    })

        return Handler
