"""Work counted, not timed: the Python lines a call executes (``sys.settrace`` line events), the same on an idle
machine and a busy one. What runs in C (a regular expression's scan, ``json``) is not counted: a test that needs
it bounded counts what it can see of it (matches made, bytes spanned), and ``scripts/`` benchmarks time it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def lines_run(call: Callable[[], Any]) -> int:
    """How many Python lines ``call()`` executes in this thread (threads it starts are not counted)."""
    count = 0

    def trace(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return trace

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(previous)
    return count
