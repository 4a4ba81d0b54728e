"""A real headless Chromium (Debian's package, which .ci/run installs) driven over the DevTools protocol: open a
page, collect every console error, uncaught exception and network request, and evaluate JavaScript in it."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import websocket

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--no-default-browser-check",
         "--disable-dev-shm-usage", "--remote-debugging-port=0", "--remote-allow-origins=*"]


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class PageVisit:
    errors: list[str] = field(default_factory=list)  # console errors, exceptions, failed loads
    requests: list[str] = field(default_factory=list)  # every URL the page asked for
    values: dict = field(default_factory=dict)  # name -> the value of an expression evaluated after load


class Browser:
    def __init__(self, binary: str, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self.profile = tempfile.mkdtemp(prefix="chromium-profile-")
        self.process = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        url = self._devtools_url()
        self.socket = websocket.create_connection(url, timeout=timeout_s, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict] = []

    def _devtools_url(self) -> str:
        deadline = time.monotonic() + self.timeout_s
        assert self.process.stderr is not None
        seen = []
        while time.monotonic() < deadline:
            line = self.process.stderr.readline()
            if not line and self.process.poll() is not None:
                break
            seen.append(line)
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                return found.group(1)
        raise RuntimeError("chromium did not open its DevTools port:\n" + "".join(seen[-20:]))

    def send(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self.next_id += 1
        message = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.socket.send(json.dumps(message))
        while True:
            reply = json.loads(self.socket.recv())
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str) -> dict:
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            event = json.loads(self.socket.recv())
            if event.get("method") == method:
                return event
            self.events.append(event)
        raise TimeoutError(method)

    def open(self, target: Path | str, width: int = 1200, height: int = 900) -> str:
        """A new tab showing a file or a URL, loaded; its session id."""
        url = target.resolve().as_uri() if isinstance(target, Path) else target
        tab = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": tab, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_for("Page.loadEventFired")
        return session

    def evaluate(self, session: str, expression: str, errors: list[str] | None = None):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True},
                           session=session)
        if "exceptionDetails" in result and errors is not None:
            errors.append(f"{expression[:60]}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_until(self, session: str, expression: str, timeout_s: float | None = None):
        """Evaluate ``expression`` until it is truthy (the page changed on its own); its value, or None."""
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while time.monotonic() < deadline:
            value = self.evaluate(session, expression)
            if value:
                return value
            time.sleep(0.25)
        return None

    def screenshot(self, session: str, out: Path, full_page: bool = True) -> None:
        params: dict = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
            params.update(captureBeyondViewport=True, clip={"x": 0, "y": 0, "width": size["width"],
                                                            "height": size["height"], "scale": 1})
        data = self.send("Page.captureScreenshot", params, session=session)["data"]
        out.write_bytes(base64.b64decode(data))

    def collect(self, visit: PageVisit | None = None) -> PageVisit:
        """The console errors, exceptions and requests seen so far, into ``visit``."""
        visit = visit or PageVisit()
        for event in self.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                visit.errors.append(f"console: {params.get('args')}")
            elif method == "Runtime.exceptionThrown":
                visit.errors.append(f"exception: {params.get('exceptionDetails')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                visit.errors.append(f"log: {params['entry'].get('text')}")
            elif method == "Network.requestWillBeSent":
                visit.requests.append(params["request"]["url"])
            elif method == "Network.loadingFailed":
                visit.errors.append(f"failed load: {params.get('errorText')}")
        self.events.clear()
        return visit

    def visit(self, path: Path | str, expressions: dict[str, str]) -> PageVisit:
        session = self.open(path)
        visit = PageVisit()
        for name, expression in expressions.items():
            visit.values[name] = self.evaluate(session, expression, visit.errors)
        return self.collect(visit)

    def close(self) -> None:
        try:
            self.socket.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            shutil.rmtree(self.profile, ignore_errors=True)


def open_browser() -> Browser:
    """A started Chromium; skipped when it is not installed, except under CI=true, where that fails."""
    import pytest

    binary = chromium()
    if binary is None:
        reason = "chromium not installed (apt-get install -y chromium; .ci/run installs it)"
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(reason + " (CI=true: the browser tests must not be skipped)", pytrace=False)
        pytest.skip(reason)
    return Browser(binary)
