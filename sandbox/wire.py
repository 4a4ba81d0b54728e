"""Framing of the host <-> sandbox channel: 4-byte big-endian length, then one UTF-8 JSON object.

The channel is a dedicated socket, never stdout/stderr, so nothing a program prints can forge or break
a frame. The host reads with a size cap and a deadline (see ``mstar_ray.sandbox_host``).
"""

from __future__ import annotations

import json
import socket
import struct
from typing import Any

HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 8 * 1024 * 1024


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


def decode_body(body: bytes) -> dict[str, Any]:
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise FrameError(f"frame is not UTF-8 JSON: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise FrameError("frame is not a JSON object with an 'op' string")
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
