"""HTTP/1.1 over the supervisor's unix socket, with the standard library's
http.client."""

import http.client
import json
import socket

from .errors import APIError


class UnixHTTPConnection(http.client.HTTPConnection):
    """An HTTPConnection whose transport is a unix socket."""

    def __init__(self, path, timeout=None):
        super().__init__("capsem", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not None:
            s.settimeout(self.timeout)
        s.connect(self.unix_path)
        self.sock = s


def raise_for(resp):
    """Raises APIError for an error answer (reading its JSON body)."""
    if 200 <= resp.status < 300:
        return
    body = resp.read(64 << 10)
    try:
        message = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        message = f"{resp.status} {resp.reason}: {body[:200]!r}"
    raise APIError(resp.status, message)


def request(path_, method, url, body=None, headers=None, timeout=None):
    """One request on a fresh connection; returns the parsed JSON answer."""
    conn = UnixHTTPConnection(path_, timeout=timeout)
    try:
        conn.request(method, url, body=body, headers=headers or {})
        resp = conn.getresponse()
        raise_for(resp)
        data = resp.read()
        return json.loads(data) if data else None
    finally:
        conn.close()
