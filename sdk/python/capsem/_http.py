"""HTTP/1.1 over the supervisor's unix socket, with the standard library's
http.client."""

import http.client
import json
import os
import socket
import struct
import sys
from typing import Any, Mapping, Optional, Protocol, Union

from .errors import APIError, CapsemError, ForeignServer

# struct ucred, what SO_PEERCRED fills on Linux: pid, uid, gid.
_UCRED = struct.Struct("=iII")
# struct xucred on macOS: cr_version, cr_uid, cr_ngroups, cr_groups[16]
# (76 bytes); SOL_LOCAL 0, LOCAL_PEERCRED 1 (<sys/un.h>).
_XUCRED_SIZE, _SOL_LOCAL, _LOCAL_PEERCRED = 76, 0, 1


class _SockOpt(Protocol):
    """A socket's getsockopt: socket.socket's, and asyncio's transport socket's."""

    def getsockopt(self, level: int, optname: int, buflen: int) -> bytes: ...


def peer_uid(sock: _SockOpt) -> int:
    """The effective uid of the process at the other end of the unix socket sock."""
    if hasattr(socket, "SO_PEERCRED"):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
        return int(_UCRED.unpack(raw)[1])
    if sys.platform == "darwin":
        raw = sock.getsockopt(_SOL_LOCAL, getattr(socket, "LOCAL_PEERCRED", _LOCAL_PEERCRED), _XUCRED_SIZE)
        return int(struct.unpack_from("=II", raw)[1])
    raise CapsemError(f"reading a unix socket's peer credentials is implemented for Linux and macOS only, not {sys.platform}")


def connect(path: str, timeout: Optional[float] = None) -> socket.socket:
    """A socket connected to the supervisor at path, checked to be served
    by our own effective uid before a byte is sent (as the Go client's
    sandbox/api/peer.go does): the socket may sit in a directory other
    users can write to, and a socket of theirs there would get every
    command's argv, environment and files. A root client accepts only
    root."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        if timeout is not None:
            s.settimeout(timeout)
        s.connect(path)
        uid, want = peer_uid(s), os.geteuid()
    except BaseException:
        s.close()
        raise
    if uid != want:
        s.close()
        raise ForeignServer(path, uid, want)
    return s


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTPConnection whose transport is a unix socket."""

    def __init__(self, path: str, timeout: Optional[float] = None) -> None:
        super().__init__("capsem", timeout=timeout)
        self.unix_path = path

    def connect(self) -> None:
        self.sock = connect(self.unix_path, self.timeout)


def raise_for(resp: http.client.HTTPResponse) -> None:
    """Raises APIError for an error answer (reading its JSON body)."""
    if 200 <= resp.status < 300:
        return
    body = resp.read(64 << 10)
    try:
        message = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        message = f"{resp.status} {resp.reason}: {body[:200]!r}"
    raise APIError(resp.status, message)


def request(path_: str, method: str, url: str, body: Optional[Union[bytes, str]] = None,
            headers: Optional[Mapping[str, str]] = None, timeout: Optional[float] = None) -> Any:
    """One request on a fresh connection; returns the parsed JSON answer."""
    conn = UnixHTTPConnection(path_, timeout=timeout)
    try:
        conn.request(method, url, body=body, headers=dict(headers or {}))
        resp = conn.getresponse()
        raise_for(resp)
        data = resp.read()
        return json.loads(data) if data else None
    finally:
        conn.close()
