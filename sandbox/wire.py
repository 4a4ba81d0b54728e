"""Framing of the host <-> sandbox channel: 4-byte big-endian length, then one UTF-8 JSON object.

The channel is a dedicated socket, never stdout/stderr, so nothing a program prints can forge or break
a frame. The host reads with a size cap and a deadline (see ``mstar_ray.sandbox_host.process``).
"""

from __future__ import annotations

import json
import re
import socket
import struct
from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 8 * 1024 * 1024
# No honest frame nests deeper than a few levels; the JSON decoder recurses once per level.
MAX_DEPTH = 32
# Texts in one embedding request: the toolkit batches by this, so that the reply's vectors fit a frame.
EMBED_TEXTS_PER_REQUEST = 128


class ChannelClosed(EOFError):
    """The other end closed the channel (or died)."""


class FrameError(ValueError):
    """A frame that is too large or not a JSON object: the peer is broken or hostile."""


def encode(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {len(body)} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    return HEADER.pack(len(body)) + body


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(encode(message))


# Everything up to and including the next list or object opened outside a string: runs of other bytes and
# whole strings (an unclosed one runs to the end), all possessive, so a match costs the bytes it spans and a
# failed one never backtracks. The scan below anchors each match where the last one ended, so the engine
# never retries from inside a string: linear in the frame, where a pattern that only matched closed strings
# took quadratic time on a frame of unclosed strings or escaped quotes.
_TO_NEXT_CONTAINER = re.compile(rb'(?:[^"\[{]++|"(?:[^"\\]++|\\[\s\S]?)*+(?:"|\Z))*+[\[{]')


def containers(body: bytes, limit: int | None = None) -> int:
    """How many lists and objects a JSON text opens, strings aside (counted no further than ``limit`` + 1):
    an upper bound on its depth that is counted at C speed, in linear time, before a decoder that recurses
    once per level ever sees it."""
    count, at = 0, 0
    while limit is None or count <= limit:
        found = _TO_NEXT_CONTAINER.match(body, at)
        if found is None:
            break
        count, at = count + 1, found.end()
    return count


def depth(value: Any) -> int:
    """How deeply lists and objects nest in a decoded value (without recursion)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        for child in children:
            if isinstance(child, (dict, list)):
                stack.append((child, level + 1))
        deepest = max(deepest, level if isinstance(item, (dict, list)) else 0)
    return deepest


def decode_body(body: bytes, max_containers: int | None = None) -> dict[str, Any]:
    """One frame's JSON object. Any failure, a nesting too deep for the decoder among them, is a
    ``FrameError``: a hostile peer must not be able to raise anything else in its reader. A reader that
    knows how many lists and objects an honest frame holds passes ``max_containers``."""
    rough = body.count(b"[") + body.count(b"{")
    if max_containers is not None and rough > max_containers and containers(body, max_containers) > max_containers:
        raise FrameError(f"frame holds more than {max_containers} lists and objects")
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise FrameError(f"frame is not UTF-8 JSON within the nesting limit: {type(exc).__name__}") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise FrameError("frame is not a JSON object with an 'op' string")
    if depth(message) > MAX_DEPTH:
        raise FrameError(f"frame nests deeper than {MAX_DEPTH} levels")
    return message


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < n:
        chunk = sock.recv(n - len(chunks))
        if not chunk:
            raise ChannelClosed("channel closed")
        chunks += chunk
    return bytes(chunks)


def recv(sock: socket.socket) -> dict[str, Any]:
    """Blocking read of one frame (used inside the sandbox, where the host is trusted)."""
    (length,) = HEADER.unpack(recv_exact(sock, HEADER.size))
    if length > MAX_FRAME_BYTES:
        raise FrameError(f"frame of {length} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")
    return decode_body(recv_exact(sock, length))
