"""capsem-doctor: shared helpers for the in-guest diagnostic suite.

Everything here is skipped unless the suite runs inside a capsem guest
(CAPSEM_DOCTOR=1 and PID 1 is capsem-agent, which runs as /init). The host's
contract arrives as environment variables: CAPSEM_DOCTOR_HOST (an allowed
name with a local HTTPS upstream behind capsem's MITM) and
CAPSEM_DOCTOR_DENIED (a name the policy does not allow).

Under `capsem doctor --sandbox NAME` (CAPSEM_DOCTOR_MODE=sandbox) the suite
runs in a user's long-lived sandbox, under its own policy, without the
doctor's upstream or host file: the tests that need those skip and say so;
the rest (the walls, the guest's hardening, the runtimes) must pass.
"""

import json
import os
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

import pytest

# The suite lives in the shared workspace: keep compiled files out of it
# (they would show up on the host and in the file events).
sys.dont_write_bytecode = True

WORKSPACE = "/workspace"
GATEWAY = "198.18.0.1"
GUEST_NET = "198.18.0."
FAKE_DNS_PREFIX = "198.19."


def pid1_argv():
    """PID 1's argv, as a list of str."""
    with open("/proc/1/cmdline", "rb") as f:
        raw = f.read()
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def in_capsem_guest():
    """(True, "") inside a capsem guest, else (False, why)."""
    if os.environ.get("CAPSEM_DOCTOR") != "1":
        return False, "not a capsem doctor run (CAPSEM_DOCTOR is not 1)"
    try:
        argv = pid1_argv()
    except OSError as e:
        return False, f"cannot read /proc/1/cmdline: {e}"
    if not argv or not (argv[0] == "/init" or os.path.basename(argv[0]) == "capsem-agent"):
        return False, f"PID 1 is {argv[:1]}, not capsem-agent (/init)"
    return True, ""


def pytest_collection_modifyitems(config, items):
    ok, why = in_capsem_guest()
    if ok:
        return
    skip = pytest.mark.skip(reason=f"capsem-doctor runs only inside a capsem guest: {why}")
    for item in items:
        item.add_marker(skip)


def run(cmd, timeout=10, **kw):
    """Runs cmd (a str through bash, or an argv list) and returns the
    CompletedProcess with text stdout and stderr. Never raises on a non-zero
    exit; raises subprocess.TimeoutExpired after timeout seconds."""
    shell = isinstance(cmd, str)
    if "input" not in kw:
        kw.setdefault("stdin", subprocess.DEVNULL)
    return subprocess.run(
        cmd,
        shell=shell,
        executable="/bin/bash" if shell else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def describe(p):
    """A CompletedProcess, for assertion messages."""
    return f"exit {p.returncode}\nstdout: {p.stdout[-2000:]!r}\nstderr: {p.stderr[-2000:]!r}"


def in_user_sandbox():
    """True under `capsem doctor --sandbox NAME`."""
    return os.environ.get("CAPSEM_DOCTOR_MODE") == "sandbox"


def needs_doctor_guest(what):
    """Skips the test in a user's sandbox: it needs the doctor's own guest
    (its policy, its upstream, its workspace), which `capsem doctor` boots."""
    if in_user_sandbox():
        pytest.skip(f"needs {what}, which only `capsem doctor`'s own guest has")


def required_env(name):
    """The variable the host must set; a missing one fails the test (the
    sandbox and network tests must never skip in a capsem guest), except in
    a user's sandbox, which has no doctor upstream: there it skips."""
    v = os.environ.get(name, "")
    if not v:
        needs_doctor_guest(f"{name} (the doctor's upstream)")
        pytest.fail(f"{name} is not set: run the suite with `capsem doctor`, which sets it")
    return v


@pytest.fixture(name="run")
def run_fixture():
    return run


@pytest.fixture
def out_dir():
    """A fresh directory under /tmp, removed after the test."""
    d = tempfile.mkdtemp(prefix="capsem-doctor-", dir="/tmp")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def ws_dir():
    """A fresh directory in the shared workspace, as (guest path, path
    relative to the workspace); removed after the test."""
    rel = f"capsem-doctor-scratch-{uuid.uuid4().hex[:12]}"
    path = os.path.join(WORKSPACE, rel)
    os.mkdir(path)
    yield path, rel
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def doctor_host():
    return required_env("CAPSEM_DOCTOR_HOST")


@pytest.fixture(scope="session")
def denied_name():
    return required_env("CAPSEM_DOCTOR_DENIED")


def https_get(host, path, timeout=20, context=None):
    """GET https://host/path with python's default TLS verification; returns
    (status, body bytes), also for HTTP error statuses."""
    ctx = context or ssl.create_default_context()
    req = urllib.request.Request(f"https://{host}{path}", headers={"User-Agent": "capsem-doctor"})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def host_events(host, kind):
    """The events of kind ("net", "dns", "mcp_call", ...) the host's store has
    recorded so far, as the doctor's upstream serves them (/events)."""
    status, body = https_get(host, "/events?kind=" + kind)
    assert status == 200, f"/events?kind={kind}: HTTP {status}: {body[:200]!r}"
    return json.loads(body)


def workspace_file_on_host(host, rel):
    """The host's view of a workspace file: (status, body)."""
    return https_get(host, "/workspace-file?path=" + urllib.parse.quote(rel))


def fs_events(host):
    """The workspace file events the host's store has recorded so far."""
    status, body = https_get(host, "/fs-events")
    assert status == 200, f"/fs-events: HTTP {status}: {body[:200]!r}"
    return json.loads(body)


def wait_for(pred, timeout=15.0, interval=0.2):
    """Polls pred until it returns a truthy value or timeout passes; returns
    the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() >= deadline:
            return v
        time.sleep(interval)


def tcp_connect_error(host, port, timeout=5.0):
    """Tries a TCP connection; returns None if it was established, else the
    error (a refused, reset or timed-out connection)."""
    try:
        s = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        return e
    s.close()
    return None


def dns_query(qname, qtype=1, server=GATEWAY, port=53, timeout=3.0):
    """Sends one DNS query over UDP and returns (rcode, [answer IPv4 strings
    for A records], answer count), or raises socket.timeout."""
    qid = int.from_bytes(os.urandom(2), "big")
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in qname.rstrip(".").split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\0" + struct.pack(">HH", qtype, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(q, (server, port))
        while True:
            data, _ = s.recvfrom(4096)
            if len(data) >= 12 and struct.unpack(">H", data[:2])[0] == qid:
                break
    finally:
        s.close()
    flags, qd, an = struct.unpack(">HHH", data[2:8])
    rcode = flags & 0xF
    off = 12
    for _ in range(qd):
        off = _skip_name(data, off) + 4
    ips = []
    for _ in range(an):
        off = _skip_name(data, off)
        rtype, _cls, _ttl, rdlen = struct.unpack(">HHIH", data[off : off + 10])
        off += 10
        if rtype == 1 and rdlen == 4:
            ips.append(socket.inet_ntoa(data[off : off + 4]))
        off += rdlen
    return rcode, ips, an


def _skip_name(data, off):
    while True:
        n = data[off]
        if n == 0:
            return off + 1
        if n & 0xC0 == 0xC0:
            return off + 2
        off += 1 + n


def mounts():
    """/proc/mounts as a list of (source, target, fstype, options set)."""
    out = []
    with open("/proc/mounts") as f:
        for line in f:
            src, tgt, fstype, opts = line.split()[:4]
            out.append((src, tgt.replace("\\040", " "), fstype, set(opts.split(","))))
    return out


def mount_at(target):
    """The last (topmost) mount at target, or None."""
    found = None
    for m in mounts():
        if m[1] == target:
            found = m
    return found
