"""The client's memory bounds against a fake supervisor on a real unix
socket (no sandbox needed: the logic is the client's): exec() keeps at most
MAX_BUFFERED of each stream and says when it cut, as the Go API's buffered
exec does; get_file() without a file object refuses a file over it, having
read no more than that; streaming has no bound."""

import io
import json
import os
import shutil
import socket
import tempfile
import threading

import pytest

import capsem
from capsem import _frames

MiB = 1 << 20


class FakeSupervisor:
    """Accepts connections on a socket in a private directory and hands
    each, with the request's head, to answer(conn, head)."""

    def __init__(self, answer):
        self.dir = tempfile.mkdtemp(prefix="capsem-fake-")
        self.path = os.path.join(self.dir, "api.sock")
        self.ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.ln.bind(self.path)
        self.ln.listen(8)
        self.answer = answer
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.ln.accept()
            except OSError:
                return
            head = b""
            while b"\r\n\r\n" not in head:
                b = c.recv(65536)
                if not b:
                    break
                head += b
            try:
                self.answer(c, head)
            except OSError:
                pass  # the client hung up, as it may
            finally:
                c.close()

    def close(self):
        self.ln.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def fake():
    made = []

    def make(answer):
        f = FakeSupervisor(answer)
        made.append(f)
        sb = capsem.Sandbox("fake", capsem="/bin/false")
        sb._sock = f.path
        return sb

    yield make
    for f in made:
        f.close()


def exec_answer(n_out, n_err):
    def answer(c, head):
        c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: capsem-exec\r\n\r\n")
        for typ, n in ((_frames.STDOUT, n_out), (_frames.STDERR, n_err)):
            for i in range(0, n, MiB):
                c.sendall(_frames.encode(typ, bytes([typ + 48]) * min(MiB, n - i)))
        c.sendall(_frames.encode(_frames.EXIT, json.dumps({"exit_code": 0}).encode()))
    return answer


@pytest.mark.parametrize("n_out,n_err,cut,why", [
    (capsem.MAX_BUFFERED, capsem.MAX_BUFFERED, False, "exactly the cap is kept whole"),
    (capsem.MAX_BUFFERED + 1, 10, True, "one byte over on stdout is cut"),
    (10, 3 * capsem.MAX_BUFFERED, True, "stderr is capped on its own"),
])
def test_exec_keeps_at_most_the_cap(fake, n_out, n_err, cut, why):
    r = fake(exec_answer(n_out, n_err)).exec(["yes"])
    assert r.exit_code == 0, why
    assert len(r.stdout) == min(n_out, capsem.MAX_BUFFERED), why
    assert len(r.stderr) == min(n_err, capsem.MAX_BUFFERED), why
    assert r.stdout == b"1" * len(r.stdout) and r.stderr == b"2" * len(r.stderr), why
    assert r.truncated == cut, why


def test_exec_stream_is_unbounded(fake):
    n = 0
    with fake(exec_answer(3 * capsem.MAX_BUFFERED, 0)).exec_stream(["yes"]) as s:
        for _, chunk in s:
            n += len(chunk)
    assert n == 3 * capsem.MAX_BUFFERED and s.exit["exit_code"] == 0


class Sent:
    n = 0


def file_answer(size, length=True, sent=None):
    def answer(c, head):
        hdr = b"HTTP/1.1 200 OK\r\nConnection: close\r\n"
        if length:
            hdr += b"Content-Length: %d\r\n" % size
        c.sendall(hdr + b"\r\n")
        for i in range(0, size, MiB):
            c.sendall(b"f" * min(MiB, size - i))
            if sent:
                sent.n = i + min(MiB, size - i)
    return answer


@pytest.mark.parametrize("size,length,why", [
    (capsem.MAX_BUFFERED + 1, True, "its Content-Length says it is over: refused before a byte is read"),
    (4 * capsem.MAX_BUFFERED, False, "no length: read up to the cap and one byte, then refused"),
])
def test_get_file_in_memory_refuses_past_the_cap(fake, size, length, why):
    sent = Sent()
    sb = fake(file_answer(size, length, sent))
    with pytest.raises(capsem.TooLarge, match="file object"):
        sb.get_file("/big")
    assert sent.n < size, f"{why}: the client read all {size} bytes"


@pytest.mark.parametrize("length", [True, False])
def test_get_file_at_the_cap_and_streamed(fake, length):
    assert len(fake(file_answer(capsem.MAX_BUFFERED, length)).get_file("/f")) == capsem.MAX_BUFFERED
    buf = io.BytesIO()
    n = fake(file_answer(3 * capsem.MAX_BUFFERED, length)).get_file("/f", buf)
    assert n == len(buf.getvalue()) == 3 * capsem.MAX_BUFFERED
