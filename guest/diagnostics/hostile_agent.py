"""What guest root can do to the control channel: speak on the agent's port.

The agent (`capsem-agent serve`) holds the virtio-serial port to the host; a
virtio port opens once, but root can duplicate the agent's descriptor with
pidfd_getfd(2) and write frames of its own between the agent's. These
helpers do that, for capsem-doctor's test_injection.py and for the host's
own tests (tests/walls_run_test.go copies this file into the workspace and
runs it as a script):

    python3 hostile_agent.py forge                 # a forged exec event and a back-dated file event
    python3 hostile_agent.py ping-flood SECONDS    # Pings without end, the agent stopped meanwhile
    python3 hostile_agent.py malformed             # a frame that does not decode

The frame layout is guest/proto's (frame.go): length uint32 (5 + body),
type uint8, session id uint32, body; integers big-endian, bodies JSON.
"""

import ctypes
import json
import os
import select
import signal
import struct
import sys
import time

# guest/proto/messages.go: the values are part of the protocol.
TYPE_FILE_EVENT = 15
TYPE_EXEC_EVENT = 16
TYPE_PING = 17
TYPE_EXIT = 12

SYS_PIDFD_GETFD = 438

# The time a forged file event claims: 2000-01-01T00:00:00Z.
BACKDATED_NS = 946684800 * 10**9
FORGED_PATH = "forged-by-guest-root.txt"
FORGED_ARGV = ["forged-by-guest-root"]


def frame(typ, sid, body):
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    return struct.pack(">IBI", 5 + len(body), typ, sid) + body


def agent_pid():
    """The pid of `capsem-agent serve`, which holds the control port."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if len(argv) > 1 and argv[0].endswith(b"capsem-agent") and argv[1] == b"serve":
            return int(name)
    raise RuntimeError("no capsem-agent serve process")


def port_fd(pid):
    """The agent's descriptor number of the control port."""
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if "vport" in target or "hvc" in target:
            return int(fd)
    raise RuntimeError(f"the agent ({pid}) holds no virtio port")


def steal_port():
    """(agent pid, our duplicate of its control-port descriptor)."""
    pid = agent_pid()
    target = port_fd(pid)
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(pid)
    fd = libc.syscall(SYS_PIDFD_GETFD, pidfd, target, 0)
    os.close(pidfd)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "pidfd_getfd")
    return pid, fd


def write_all(fd, data):
    # The agent's runtime made the descriptor non-blocking (the open file
    # is shared): wait for room. A virtio port takes at most 32 KiB a write.
    poll = select.poll()
    poll.register(fd, select.POLLOUT)
    while data:
        try:
            n = os.write(fd, data[:32 << 10])
        except BlockingIOError:
            poll.poll(1000)
            continue
        data = data[n:]


def with_agent_stopped(fn):
    """Run fn(fd) with the agent stopped, so that no frame of ours lands
    inside one of its own."""
    pid, fd = steal_port()
    os.kill(pid, signal.SIGSTOP)
    try:
        return fn(fd)
    finally:
        os.kill(pid, signal.SIGCONT)
        os.close(fd)


def forge():
    """An ExecEvent for a session the host never opened (and one for
    session 1 claiming another command), and a FileEvent dated 2000."""
    def send(fd):
        write_all(fd, b"".join([
            frame(TYPE_EXEC_EVENT, 999, {"argv": FORGED_ARGV, "start": BACKDATED_NS, "duration": 1, "exit_code": 0}),
            frame(TYPE_EXEC_EVENT, 1, {"argv": FORGED_ARGV, "start": BACKDATED_NS, "duration": 1, "exit_code": 0}),
            frame(TYPE_FILE_EVENT, 0, {"action": "created", "path": FORGED_PATH, "time": BACKDATED_NS}),
        ]))
    with_agent_stopped(send)


def ping_flood(seconds):
    """Pings as fast as the port takes them, while the agent (the only
    reader of the host's Pongs) is stopped. Returns the pings sent."""
    batch = b"".join(frame(TYPE_PING, 0, {"seq": i}) for i in range(1000))

    def send(fd):
        n, end = 0, time.monotonic() + seconds
        while time.monotonic() < end:
            write_all(fd, batch)
            n += 1000
        return n
    return with_agent_stopped(send)


def malformed():
    """An Exit frame whose JSON body does not decode: a protocol violation."""
    with_agent_stopped(lambda fd: write_all(fd, frame(TYPE_EXIT, 1, b"{")))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    if what == "forge":
        forge()
        print("forged")
    elif what == "ping-flood":
        print("pings", ping_flood(float(sys.argv[2])))
    elif what == "malformed":
        malformed()
        print("sent")
    else:
        sys.exit("usage: hostile_agent.py forge | ping-flood SECONDS | malformed")
