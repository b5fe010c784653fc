"""A way in, seen from inside: the guest port the doctor published
(--publish 0:PORT) is reached from the host and recorded as an inbound flow;
a port it did not publish is reached by no way a host process has (the
same port on the host's loopback, the guest's own address)."""

import socket
import threading
import uuid

from conftest import host_events, https_get, required_env, wait_for


def serve(port, token):
    """A server on 0.0.0.0:port that writes token and a newline to each
    connection; close the returned socket to stop it."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(8)

    def loop():
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            with c:
                c.sendall(token.encode() + b"\n")

    threading.Thread(target=loop, daemon=True).start()
    return s


def test_published_port_reached_from_host(doctor_host):
    port = int(required_env("CAPSEM_DOCTOR_PUBLISHED"))
    token = "published-" + uuid.uuid4().hex[:12]
    s = serve(port, token)
    try:
        status, body = https_get(doctor_host, f"/reach?guest_port={port}")
        assert status == 200 and body.decode() == "reached " + token, body
        inbound = wait_for(lambda: [
            e for e in host_events(doctor_host, "net")
            if e.get("direction") == "inbound" and e.get("port") == port and e.get("reason") == "published"
        ])
        assert inbound, "the host reached the published port, but recorded no inbound flow"
    finally:
        s.close()


def test_unpublished_port_unreachable(doctor_host):
    port = int(required_env("CAPSEM_DOCTOR_UNPUBLISHED"))
    token = "unpublished-" + uuid.uuid4().hex[:12]
    s = serve(port, token)
    try:
        status, body = https_get(doctor_host, f"/reach?guest_port={port}")
        assert status == 200 and body.startswith(b"unreachable"), body
    finally:
        s.close()
