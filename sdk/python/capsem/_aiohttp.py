"""HTTP/1.1 over the supervisor's unix socket for capsem.aio: asyncio
streams, one request per connection (as the blocking client does), bodies
by Content-Length, chunked or to the connection's end. Only what the
sandbox API's answers use; no dependency beyond the standard library."""

import asyncio
import json
import os
from typing import Any, AsyncIterator, Dict, Mapping, Optional, Tuple, Union

from . import _protocol as p
from ._http import peer_uid
from .errors import APIError, CapsemError, ForeignServer

# The longest header line or chunk-size line read; the API's are short.
_MAX_LINE = 64 << 10

Body = Union[bytes, AsyncIterator[bytes], None]


async def connect(path: str) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to the supervisor at path, checked to be served by our
    own effective uid before a byte is sent (see _http.connect)."""
    reader, writer = await asyncio.open_unix_connection(path, limit=_MAX_LINE)
    try:
        uid, want = peer_uid(writer.get_extra_info("socket")), os.geteuid()
    except BaseException:
        writer.close()
        raise
    if uid != want:
        writer.close()
        raise ForeignServer(path, uid, want)
    return reader, writer


class Response:
    """An answer's status, headers and body, read as it comes."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, status_line: str,
                 headers: Dict[str, str]) -> None:
        self._r, self._w = reader, writer
        self.status_line = status_line.strip()
        self.status = p.status_code(status_line)
        self.headers = headers
        te = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in te
        cl = headers.get("content-length")
        self._left: Optional[int] = None if self._chunked or cl is None else int(cl)
        self._chunk_left = 0
        self._done = self._left == 0
        self._buf = b""

    async def read1(self, n: int = 256 << 10) -> bytes:
        """Up to n bytes of the body as they come; b"" at its end."""
        if self._buf:
            out, self._buf = self._buf[:n], self._buf[n:]
            return out
        if self._done:
            return b""
        if self._chunked:
            if self._chunk_left == 0:
                size_line = await self._r.readline()
                if not size_line.endswith(b"\n"):
                    raise CapsemError("the sandbox's answer ended inside a chunk header")
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await self._r.readline()).strip():  # trailers
                        pass
                    self._done = True
                    return b""
                self._chunk_left = size
            data = await self._r.read(min(n, self._chunk_left))
            if not data:
                raise CapsemError("the sandbox's answer ended inside a chunk")
            self._chunk_left -= len(data)
            if self._chunk_left == 0:
                await self._r.readexactly(2)  # the chunk's CRLF
            return data
        want = n if self._left is None else min(n, self._left)
        data = await self._r.read(want)
        if self._left is not None:
            if not data:
                raise CapsemError(f"the sandbox's answer ended {self._left} bytes short")
            self._left -= len(data)
            self._done = self._left == 0
        elif not data:
            self._done = True
        return data

    async def read(self, limit: int = -1) -> bytes:
        """The body, or its first limit bytes."""
        out = bytearray()
        while limit < 0 or len(out) < limit:
            chunk = await self.read1(256 << 10 if limit < 0 else limit - len(out))
            if not chunk:
                break
            out += chunk
        return bytes(out)

    async def readline(self) -> bytes:
        """One line of the body, with its newline; b"" at the end."""
        line = bytearray()
        while True:
            chunk = await self.read1(64 << 10)
            if not chunk:
                return bytes(line)
            i = chunk.find(b"\n")
            if i >= 0:
                line += chunk[: i + 1]
                self._buf = chunk[i + 1 :] + self._buf
                return bytes(line)
            line += chunk

    async def raise_for(self) -> None:
        """Raises APIError for an error answer (reading its JSON body)."""
        if 200 <= self.status < 300:
            return
        body = await self.read(64 << 10)
        self.close()
        raise APIError(self.status, p.error_message(self.status_line, body))

    def close(self) -> None:
        self._w.close()


async def read_head(reader: asyncio.StreamReader) -> Tuple[str, Dict[str, str]]:
    """An answer's status line and headers (names lower-cased)."""
    status = (await reader.readline()).decode("latin-1")
    if not status:
        raise CapsemError("the sandbox closed the connection without answering")
    headers: Dict[str, str] = {}
    while True:
        line = (await reader.readline()).decode("latin-1").strip()
        if not line:
            return status, headers
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()


async def send(writer: asyncio.StreamWriter, method: str, url: str, body: Body = None,
               headers: Optional[Mapping[str, str]] = None, length: Optional[int] = None) -> None:
    """Writes a request: bytes with their Content-Length, an async
    iterator of bytes chunked (or with length, as Content-Length)."""
    h = {"Host": "capsem", **(headers or {})}
    if isinstance(body, bytes):
        h["Content-Length"] = str(len(body))
    elif body is not None:
        if length is None:
            h["Transfer-Encoding"] = "chunked"
        else:
            h["Content-Length"] = str(length)
    elif method in ("POST", "PUT"):
        h["Content-Length"] = "0"
    head = f"{method} {url} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items()) + "\r\n"
    writer.write(head.encode("latin-1"))
    if isinstance(body, bytes):
        writer.write(body)
    elif body is not None:
        async for chunk in body:
            if not chunk:
                continue
            writer.write((b"%x\r\n" % len(chunk)) + chunk + b"\r\n" if length is None else chunk)
            await writer.drain()
        if length is None:
            writer.write(b"0\r\n\r\n")
    await writer.drain()


async def open_request(path: str, method: str, url: str, body: Body = None,
                       headers: Optional[Mapping[str, str]] = None, length: Optional[int] = None) -> Response:
    """Sends a request on a fresh connection and returns its answer, whose
    body is still to be read (close it when done)."""
    reader, writer = await connect(path)
    try:
        await send(writer, method, url, body, headers, length)
        status, hdrs = await read_head(reader)
    except BaseException:
        writer.close()
        raise
    return Response(reader, writer, status, hdrs)


async def request(path: str, method: str, url: str, body: Optional[bytes] = None,
                  headers: Optional[Mapping[str, str]] = None) -> Any:
    """One request; returns the parsed JSON answer."""
    resp = await open_request(path, method, url, body, headers)
    try:
        await resp.raise_for()
        data = await resp.read()
        return json.loads(data) if data else None
    finally:
        resp.close()
