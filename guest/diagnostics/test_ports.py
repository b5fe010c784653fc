"""A way in, seen from inside: the guest port the doctor published
(--publish 0:PORT) is reached from the host and recorded as an inbound flow;
a port it did not publish is reached by no way a host process has (the
same port on the host's loopback, the guest's own address)."""

import socket
import threading
import uuid

from conftest import host_events, https_get, required_env, wait_for


class serve:
    """A server on 0.0.0.0:port that writes token and a newline to each
    connection, until the with block ends. Closing a listening socket does
    not end an accept blocked on it in another thread (the socket would go
    on listening: test_sandbox's test_nothing_listens_on_tcp saw it), so
    the end shuts it down first, which does."""

    def __init__(self, port, token):
        self.s = socket.socket()
        self.s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.s.bind(("0.0.0.0", port))
        self.s.listen(8)
        self.token = token.encode() + b"\n"
        self.t = threading.Thread(target=self.loop, daemon=True)
        self.t.start()

    def loop(self):
        while True:
            try:
                c, _ = self.s.accept()
            except OSError:
                return
            with c:
                c.sendall(self.token)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        try:
            self.s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.s.close()
        self.t.join(timeout=5)
        assert not self.t.is_alive(), "the test server's accept did not end"


def test_published_port_reached_from_host(doctor_host):
    port = int(required_env("CAPSEM_DOCTOR_PUBLISHED"))
    token = "published-" + uuid.uuid4().hex[:12]
    with serve(port, token):
        status, body = https_get(doctor_host, f"/reach?guest_port={port}")
        assert status == 200 and body.decode() == "reached " + token, body
        inbound = wait_for(lambda: [
            e for e in host_events(doctor_host, "net")
            if e.get("direction") == "inbound" and e.get("port") == port and e.get("reason") == "published"
        ])
        assert inbound, "the host reached the published port, but recorded no inbound flow"


def test_unpublished_port_unreachable(doctor_host):
    port = int(required_env("CAPSEM_DOCTOR_UNPUBLISHED"))
    token = "unpublished-" + uuid.uuid4().hex[:12]
    with serve(port, token):
        status, body = https_get(doctor_host, f"/reach?guest_port={port}")
        assert status == 200 and body.startswith(b"unreachable"), body
