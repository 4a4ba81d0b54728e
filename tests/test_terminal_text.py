"""Nothing a candidate writes reaches a terminal raw: its exception messages, tracebacks, logs, violation
reasons and (through the logs) commit messages are printed with every control character spelled out, by
``eval``, the live progress line and ``status`` (``test_inspect`` runs ``status`` on a hostile commit message)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

from mstar_ray.driver.progress import Progress, ProgressState
from mstar_ray.state.search_state import SearchState
from mstar_ray.terminal import printable

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "hostile"
ESC, BEL, CSI1 = "\x1b", "\x07", "\x9b"
# What must never be printed raw: every C0 control but newline and tab, DEL, every C1 control, the
# bidirectional overrides and isolates, the line separators, a lone surrogate.
UNSAFE = ([chr(c) for c in range(0x20) if c not in (0x0A, 0x09)] + [chr(c) for c in range(0x7F, 0xA0)]
          + ["\u202e", "\u2066", "\u200f", "\u2028", "\ud800"])


def raw_controls(text: str) -> list[str]:
    return sorted({c for c in text if c in UNSAFE})


def test_printable_spells_out_every_control_and_keeps_lines_where_asked():
    text = "".join(UNSAFE) + "line\n\ttab"
    assert raw_controls(printable(text)) == []
    assert printable(text).endswith("line\n\ttab") and "\\x1b" in printable(text) and "\\ud800" in printable(text)
    assert "\n" not in printable(text, lines=False) and "\t" not in printable(text, lines=False)
    assert printable("café · naïve → ok") == "café · naïve → ok"  # printable text is left alone
    printable("x\ud800").encode("utf-8")  # a lone surrogate no longer makes print raise


def test_eval_of_a_program_sending_escape_sequences_prints_none_of_them():
    command = [sys.executable, "-m", "mstar_ray.cli", "eval", str(HOSTILE / "terminal_escapes.py"),
               "--task", "synthetic", "--limit", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 1, done.stderr[-2000:]
    # The violation and the write error are reported, their text visible but inert.
    assert "VIOLATION during read: [recursion] RecursionError: \\x1b]0;pwned\\x07" in done.stdout
    assert "write errors: 1 (first: " in done.stdout and "\\x1b]52;c;" in done.stdout
    assert raw_controls(done.stdout) == [] and raw_controls(done.stderr) == []
    as_json = subprocess.run(command + ["--json"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert raw_controls(as_json.stdout) == [] and as_json.stdout.isascii()
    report = json.loads(as_json.stdout)  # still the program's own text once decoded
    assert ESC + "]52;c;" in report["violation"]["message"] and CSI1 in report["violation"]["message"]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_live_line_and_its_messages_escape_candidate_text():
    payload = f"{ESC}]0;pwned{BEL}{ESC}[2K\rfinal program 0123 1.000{CSI1}31m\u202e"
    for stream in (Terminal(), io.StringIO()):
        progress = Progress(stream, interval_s=0.0)
        progress.message(f"c0ffee broke the contract during read: [recursion] {payload}\nsecond line")
        progress.update(ProgressState(phase=payload), SearchState(), force=True)
        progress.close(ProgressState(phase=payload), SearchState())
        # Only the progress line's own redraw (\r ESC[2K) may be raw.
        shown = stream.getvalue().replace("\r\x1b[2K", "")
        assert raw_controls(shown) == [], stream
        assert "\\x1b]0;pwned\\x07" in shown and "\nsecond line" in shown
