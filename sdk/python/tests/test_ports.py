"""Published ports from Python: publish() makes a guest server reachable on
a host port (a free one for 0), ports() lists it, unpublish() closes it."""

import socket
import time
import urllib.request

import pytest


def fetch(url, within=60):
    """The body at url, once the guest's server answers (a Python server
    takes seconds to start under TCG)."""
    deadline = time.monotonic() + within
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                return r.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_publish_unpublish(sb):
    sb.exec("echo served > /tmp/index.html && cd /tmp && (setsid python3 -m http.server 8000 </dev/null >/dev/null 2>&1 &)")
    p = sb.publish("0:8000")
    assert p["guest_port"] == 8000 and p["host_port"] > 0 and p["host_ip"] == "127.0.0.1", p
    assert p["published"] == "127.0.0.1:0:8000/tcp" and p["protocol"] == "tcp", p
    assert p in sb.ports()
    assert fetch("http://127.0.0.1:%d/index.html" % p["host_port"]) == b"served\n"
    assert [q["published"] for q in sb.status()["ports"]] == ["127.0.0.1:0:8000/tcp"]

    sb.unpublish(p["spec"])
    assert sb.ports() == []
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", p["host_port"]), timeout=5).close()
