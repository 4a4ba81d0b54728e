"""``mstar-ray serve RUN_DIR``: the run as a web page that follows its logs as they grow (``page.live_page``; the
page polls ``api/run`` and redraws when the snapshot's version changed), for a live run or a finished one.

Reading only: the server never writes to the run directory. On a loopback address anyone on this machine may
read it, as they may read the run directory (a request naming another host is refused, so a web page elsewhere
cannot reach it through DNS rebinding); bound to any other address every request needs the token, given once in
the URL and then kept in a cookie. Candidate text reaches the browser only as JSON, drawn as text
(``assets/views.js``), and the page's Content-Security-Policy allows no script but its own files.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import socket
import threading
import time
from http import HTTPStatus
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

from mstar_ray.exit_codes import InputError
from mstar_ray.inspect import page, snapshot
from mstar_ray.runlog.reader import LogFormatError
from mstar_ray.runlog import layout

COOKIE = "mstar_ray_token"
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
STATIC = {"/plotly.min.js": "text/javascript", "/views.js": "text/javascript", "/live.js": "text/javascript",
          "/page.css": "text/css"}


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Snapshots:
    """The run as the page shows it, read again only when its logs changed, and then at most once per
    ``max(MIN_GAP_S, 3 x the last read)``: many open pages cost one read of the logs, and a page served from the
    driver's own process (``run --serve``) never takes more than a quarter of it, however long the run. What is in
    flight is read on every request (one small file)."""

    MIN_GAP_S = 2.0

    def __init__(self, run_dir: Path):
        self.run_dir, self.lock = run_dir, threading.Lock()
        self.key: str | None = None
        self.data: dict[str, Any] | None = None
        self.next_read = 0.0
        self.builds = 0  # how many times the logs were read (tests count them)

    def current(self, since: str | None = None) -> bytes:
        """The snapshot as JSON; only its version when that is ``since`` (the page already shows it)."""
        with self.lock:
            if not (self.run_dir / layout.CONFIG).is_file():
                return json.dumps({"error": f"waiting for the run to start in {self.run_dir}"}).encode()
            key = snapshot.version(self.run_dir)
            if key != self.key and (self.data is None or time.monotonic() >= self.next_read):
                started = time.monotonic()
                try:
                    self.data = snapshot.run_snapshot(self.run_dir)
                except (InputError, LogFormatError, OSError, ValueError) as exc:
                    # the page says so and keeps polling; the next change is read again
                    return json.dumps({"error": f"cannot read {self.run_dir}: {exc}"}).encode()
                took = time.monotonic() - started
                self.key, self.builds = key, self.builds + 1
                self.next_read = time.monotonic() + max(self.MIN_GAP_S, 3 * took)
            assert self.data is not None
            shown = snapshot.live(self.run_dir, self.data)
            if since is not None and since == shown["version"]:
                return json.dumps({"version": since, "unchanged": True}).encode()
            return json.dumps(shown).encode()


class PageServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, run_dir: Path, host: str, port: int, token: str | None):
        self.run_dir, self.token = run_dir, token
        self.snapshots = Snapshots(run_dir)
        super().__init__((host, port), Handler)

    @property
    def url(self) -> str:
        host, port = cast(tuple[str, int], self.server_address[:2])  # an AF_INET(6) socket's name: a str host
        if host in ("0.0.0.0", "::"):  # every address of this machine: a browser elsewhere reaches it by its name
            host = socket.gethostname()
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/" + (f"?token={self.token}" if self.token else "")


class Handler(BaseHTTPRequestHandler):
    server: PageServer
    server_version = "mstar-ray"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 -- the base class's name
        pass  # a page polling every two seconds would fill the terminal of `run --serve`

    def _send(self, status: int, body: bytes, kind: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        headers = {"Content-Type": kind, "Content-Length": str(len(body)), "Cache-Control": "no-store",
                   "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
                   **(extra or {})}
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self, status: int, why: str) -> None:
        self._send(status, why.encode(), "text/plain; charset=utf-8")

    def _allowed(self, query: dict[str, list[str]]) -> tuple[bool, dict[str, str]]:
        """Whether the request may read the run, and a cookie to set (the token arrived in the URL)."""
        token = self.server.token
        if token is None:
            host = (self.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]")
            return is_loopback(host), {}
        given = query.get("token", [None])[0]
        if given is not None and hmac.compare_digest(given.encode(), token.encode()):
            return True, {"Set-Cookie": f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"}
        cookie = SimpleCookie(self.headers.get("Cookie") or "").get(COOKIE)
        return cookie is not None and hmac.compare_digest(cookie.value.encode(), token.encode()), {}

    def do_GET(self) -> None:  # noqa: N802 -- the base class's name
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        allowed, cookie = self._allowed(query)
        if not allowed:
            self._refuse(HTTPStatus.FORBIDDEN, "this page needs the token printed by mstar-ray serve (?token=...)"
                         if self.server.token else "refused: a loopback server answers requests for its own address only")
            return
        path = parts.path
        if path == "/":
            self._send(HTTPStatus.OK, page.live_page(self.server.run_dir).encode(), "text/html; charset=utf-8", cookie)
        elif path in STATIC:
            body = page.plotly_js() if path == "/plotly.min.js" else page.asset(path[1:])
            self._send(HTTPStatus.OK, body, STATIC[path] + "; charset=utf-8")
        elif path == "/api/run":
            self._send(HTTPStatus.OK, self.server.snapshots.current(query.get("since", [None])[0]), "application/json")
        elif path == "/api/change":
            found = snapshot.change(self.server.run_dir, query.get("id", [""])[0])
            if found is None:
                self._refuse(HTTPStatus.NOT_FOUND, "no such program in this run")
            else:
                self._send(HTTPStatus.OK, json.dumps(found).encode(), "application/json")
        elif path == "/favicon.ico":
            self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
        else:
            self._refuse(HTTPStatus.NOT_FOUND, "not found")


def token_for(host: str, token: str | None) -> str | None:
    """The token a request must bring: the one given, else on loopback none, elsewhere one drawn at random."""
    if token or is_loopback(host):
        return token or None
    return secrets.token_urlsafe(24)


def start(run_dir: Path, host: str = "127.0.0.1", port: int = 8765, token: str | None = None) -> PageServer:
    """A server answering on its own thread (``shutdown()`` stops it)."""
    server = PageServer(run_dir, host, port, token_for(host, token))
    threading.Thread(target=server.serve_forever, name="mstar-ray-page", daemon=True).start()
    return server
