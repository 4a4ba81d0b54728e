"""The C library, for the system calls Python 3.11 has no wrapper for (unshare, mount, prctl, capset,
Landlock, seccomp). Only trusted code calls it, before a program is loaded."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def check(result: int, what: str) -> None:
    """Raise the C library's error as an OSError naming the call, unless ``result`` is 0."""
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
