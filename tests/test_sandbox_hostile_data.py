"""Every value that crosses from a sandbox is validated at one boundary (``sandbox_host.frames``) before the host
uses it: a string no encoder takes, on any route, is that candidate's ``protocol`` violation and never reaches the
embedder, the toolkit LLM or the outcome; and the host's own handling of a frame is linear and inside the call's
deadline, at the largest frame the channel carries."""

from __future__ import annotations


import pytest

from mstar_ray.sandbox_host.frames import MAX_CONTAINERS, ProtocolError, parse_frame
from mstar_ray.sandbox_host.sandbox_limits import SandboxLimits
from mstar_ray.sandbox import wire
from tests.sandbox_support import FakeEmbed, FakeLLM, Victim, Watch, read

ROUTES = ["embed", "llm", "value", "low_surrogate", "logs", "message", "traceback", "violation", "key"]


@pytest.fixture(scope="module")
def watch(tmp_path_factory: pytest.TempPathFactory):
    victim = Victim()
    outside = tmp_path_factory.mktemp("outside")
    (outside / "planted.txt").write_text("planted")
    observer = Watch(outside, victim)
    yield observer
    observer.close()
    victim.stop()


def encodable(outcome) -> bool:
    texts = [outcome.message, outcome.traceback, *outcome.logs, outcome.value if isinstance(outcome.value, str) else ""]
    try:
        for text in texts:
            text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


@pytest.mark.parametrize("route", ROUTES)
def test_a_lone_surrogate_on_any_route_is_the_candidates_protocol_violation(watch, route):
    llm, embed = FakeLLM(), FakeEmbed()
    _, outcome, after = watch.run("unencodable_strings", [read(route), read("pair")], llm=llm, embed=embed)
    assert outcome.kind == "protocol" and outcome.violation, outcome.describe()
    assert "not valid Unicode" in outcome.message
    assert encodable(outcome)
    assert llm.requests == [] and embed.texts == 0  # refused before any host work on it
    assert after.kind == "protocol"  # the process is gone; later calls say why


def test_a_string_returned_by_read_that_cannot_be_encoded_never_reaches_the_host(watch):
    _, outcome = watch.run("unencodable_strings", [read("returned")])
    assert not outcome.ok and encodable(outcome)


def test_a_valid_surrogate_pair_is_text_like_any_other(watch):
    _, outcome = watch.run("unencodable_strings", [read("pair")])
    assert outcome.ok and outcome.value == "smile \U0001F600"


# The shapes that made the host's frame handling super-linear, as frames of about ``n`` bytes.
ADVERSARIAL_BODIES = {
    "unclosed quotes": lambda n: b'{"op": "done", "x": ' + b"[" * 20 + b'"' * n + b"]}",
    "escaped quotes": lambda n: b'{"op": "done", "x": ["' + b'\\"' * (n // 2) + b"[]}",
    # main's string pattern: 119 s on 60 KB of this (the brackets make the host count them outside strings)
    "brackets, then escaped quotes": lambda n: b'{"op": "done", "x": ' + b"[" * 20 + b'"' + b'\\"' * (n // 2) + b"}",
    "escaped quotes, then brackets": lambda n: b'{"op": "done", "x": "' + b'\\"' * (n // 2) + b'"' + b"[" * 20 + b"}",
    "as many brackets as allowed, then escaped quotes": lambda n: (b'{"op": "done", "x": ' + b"[" * 15 + b'"'
                                                                   + b'\\"' * (n // 2) + b'"' + b"]" * 15 + b"}"),
    "escapes and brackets": lambda n: b'{"op": "done", "x": ' + b'["\\' * (n // 3) + b"}",
    "many small strings": lambda n: b'{"op": "done", "x": [' + b'"a",' * (n // 4) + b'"a"]' + b"[" * 20 + b"}",
    "brackets in one string": lambda n: b'{"op": "done", "value": "' + b"[{" * (n // 2) + b'"}',
}


class CountingPattern:
    """The container scan's pattern, counting its matches and the bytes they span: its quantifiers are
    possessive, so a match costs the bytes it spans and a failed one never backtracks (``sandbox.wire``)."""

    def __init__(self, pattern):
        self.pattern, self.calls, self.spanned = pattern, 0, 0

    def match(self, body: bytes, at: int):
        self.calls += 1
        found = self.pattern.match(body, at)
        self.spanned += (found.end() if found else len(body)) - at
        return found


@pytest.mark.parametrize("shape", list(ADVERSARIAL_BODIES))
def test_the_largest_adversarial_frames_are_refused_in_one_pass(shape, monkeypatch: pytest.MonkeyPatch):
    """Linear, counted: at the largest frame the channel carries, the host's scan makes a bounded number of
    matches that together span the frame at most once (a quadratic scan re-reads it from inside each string;
    the string pattern it replaced took 44 s on 120 KB). The times are ``scripts/bench_host_bounds.py``'s."""
    counting = CountingPattern(wire._TO_NEXT_CONTAINER)
    monkeypatch.setattr(wire, "_TO_NEXT_CONTAINER", counting)
    body = ADVERSARIAL_BODIES[shape](wire.MAX_FRAME_BYTES - 100)
    assert len(body) <= wire.MAX_FRAME_BYTES
    with pytest.raises(ProtocolError):
        parse_frame(body)
    assert counting.calls <= MAX_CONTAINERS + 2 and counting.spanned <= len(body)
    if body.count(b"[") + body.count(b"{") > MAX_CONTAINERS:  # the others go straight to the C decoder
        assert counting.calls > 0


def test_the_call_deadline_covers_the_hosts_handling_of_a_frame(watch):
    """A frame of 8 MB of escaped quotes: refused, as a bad frame or at the call's deadline (the host's decoding
    counts against the call), where the old pattern would have taken days; the test above counts the decoding's
    work on these shapes, and the watch sees the candidate's process gone."""
    limits = SandboxLimits(call_timeout_s=5.0, require=[])
    for shape in ("escaped_quotes", "unclosed_quotes", "escapes_and_brackets"):
        _, outcome, after = watch.run("slow_frames", [read(shape), read("x")], limits)
        assert outcome.kind in ("protocol", "timeout") and outcome.violation, outcome.describe()
        assert outcome.kind == "protocol" or "within 5 s" in outcome.message, outcome.describe()
        assert after.kind == outcome.kind
