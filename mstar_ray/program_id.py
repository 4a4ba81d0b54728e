"""A candidate's identity is its content: the same source is the same candidate, on any machine, in any
run, after any resume."""

from __future__ import annotations

import hashlib


def program_id(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:16]
