"""The frames of a streamed exec (docs/API.md, sandbox/api/frame.go): an
8-byte header — type, three zero bytes, the payload's length as a big-endian
uint32 — then the payload, at most 1 MiB."""

import struct
from typing import BinaryIO, Tuple

STDIN = 0
STDOUT = 1
STDERR = 2
EXIT = 3
STDIN_CLOSE = 4
SIGNAL = 5
RESIZE = 6

HEADER = struct.Struct(">B3xI")
MAX_PAYLOAD = 1 << 20


def encode(typ: int, payload: bytes = b"") -> bytes:
    """The frames carrying payload (split when longer than MAX_PAYLOAD)."""
    if not payload:
        return HEADER.pack(typ, 0)
    out = []
    for i in range(0, len(payload), MAX_PAYLOAD):
        chunk = payload[i : i + MAX_PAYLOAD]
        out.append(HEADER.pack(typ, len(chunk)) + chunk)
    return b"".join(out)


def header(raw: bytes) -> Tuple[int, int]:
    """A frame's header, checked: (type, payload length)."""
    if raw[1:4] != b"\0\0\0":
        raise ValueError(f"bad frame header {raw.hex()}")
    typ, n = HEADER.unpack(raw)
    if n > MAX_PAYLOAD:
        raise ValueError(f"frame of {n} bytes, over 1 MiB")
    return typ, n


def read_exact(f: BinaryIO, n: int) -> bytes:
    """n bytes from the binary file f, or EOFError when it ends first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = f.read(n - len(buf))
        if not chunk:
            raise EOFError("the exec's connection ended before its exit")
        buf += chunk
    return bytes(buf)


def read(f: BinaryIO) -> Tuple[int, bytes]:
    """One frame from f, as (type, payload)."""
    typ, n = header(read_exact(f, HEADER.size))
    return typ, read_exact(f, n) if n else b""
