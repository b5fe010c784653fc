"""The client talks only to a supervisor of its own uid. A socket served by
another user's process — one who made the shared fallback directory
(/tmp, $XDG_RUNTIME_DIR) first and put their socket where ours would be —
gets not one byte: no request line, no argv, environment or file body;
the client raises ForeignServer naming the uid. The same fake server run as
our own uid is talked to, which shows it counts what it gets."""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import capsem

# A fake supervisor: answers every request with a status and prints
# "conn N", the bytes each connection sent, once that connection ends.
SERVER = r'''
import os, socket, sys
path = sys.argv[1]
ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
ln.bind(path)
os.chmod(path, 0o777)
ln.listen(16)
print("ready", flush=True)
body = b'{"name": "fake", "state": "running"}'
while True:
    c, _ = ln.accept()
    c.settimeout(5)
    got = b""
    try:
        while b"\r\n\r\n" not in got:
            b = c.recv(4096)
            if not b:
                break
            got += b
        if got:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                      b"Connection: close\r\n\r\n%s" % (len(body), body))
    except OSError:
        pass
    c.close()
    print("conn", len(got), flush=True)
'''

OTHER = 65534


@pytest.fixture(params=["ours", "another user's"])
def server(request):
    uid = os.geteuid() if request.param == "ours" else OTHER
    if uid == OTHER and os.geteuid() != 0:
        pytest.skip("needs root: the fake supervisor runs as uid 65534")
    top = tempfile.mkdtemp(prefix="capsem-peer-")
    os.chmod(top, 0o755)
    d = os.path.join(top, "s")
    os.mkdir(d, 0o700)
    os.chown(d, uid, uid)
    sock = os.path.join(d, "api.sock")
    # The interpreter itself, not a venv's link to it: another user may
    # not reach into this user's venv (a 0700 temporary directory).
    p = subprocess.Popen([os.path.realpath(sys.executable), "-c", SERVER, sock], stdout=subprocess.PIPE, text=True, cwd="/",
                         user=uid if uid != os.geteuid() else None, group=uid if uid != os.geteuid() else None)
    try:
        assert p.stdout.readline().strip() == "ready", "the fake supervisor did not start"
        yield uid, sock, p.stdout
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(top, ignore_errors=True)


def test_only_our_uid_gets_a_byte(server):
    uid, sock, out = server
    sb = capsem.Sandbox("fake", capsem="/bin/false")
    sb._sock = sock
    calls = [
        sb.status,
        lambda: sb.exec(["echo", "the-argv"], env={"TOKEN": "the-env"}),
        lambda: sb.put_file("/root/f", b"the file's body"),
        lambda: sb.get_file("/root/f"),
    ]
    for call in calls:
        if uid == OTHER:
            with pytest.raises(capsem.ForeignServer, match=f"uid {OTHER}") as e:
                call()
            assert e.value.uid == OTHER
        else:
            try:
                call()
            except capsem.ForeignServer:
                raise
            except (capsem.CapsemError, OSError):
                pass  # the fake answers no exec, nor waits for a body: what counts is that it was asked
    got = [int(out.readline().split()[1]) for _ in calls]
    if uid == OTHER:
        assert got == [0] * len(calls), f"the socket of uid {OTHER} received {got} bytes"
    else:
        assert all(n > 0 for n in got), got
