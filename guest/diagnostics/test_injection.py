"""Injection: what guest root tries against the host, checked from the host's side.

Each test tries one attack from inside the guest — on the workspace, the
control channel, the MITM, the record, fake DNS — and asks the host (the
doctor's upstream: /workspace-stat, /events) what it saw. The attacks on the
control channel speak on the agent's own port (hostile_agent.py).
"""

import json
import os
import socket
import ssl
import stat
import struct
import urllib.parse
import uuid

import pytest

import hostile_agent
from conftest import GATEWAY, dns_query, host_events, https_get, required_env, run, wait_for


def host_stat(host, rel):
    status, body = https_get(host, "/workspace-stat?path=" + urllib.parse.quote(rel))
    assert status == 200, f"/workspace-stat {rel}: HTTP {status}: {body[:200]!r}"
    return json.loads(body)


def test_planted_setuid_file_is_not_setuid_on_host(doctor_host, ws_dir):
    path, rel = ws_dir
    s = os.path.join(path, "s")
    r = run(f"cp /bin/dash {s} && chown 0:0 {s} && chmod 6755 {s} && mknod {path}/dev c 1 3")
    assert r.returncode == 0, r.stderr
    assert os.stat(s).st_mode & 0o6000 == 0o6000, "the guest should see the mode it set (kept in xattrs)"
    st = host_stat(doctor_host, rel + "/s")
    assert st["mode"] & 0o7000 == 0, f"setuid/setgid reached the host: mode {oct(st['mode'])}"
    assert st["uid"] != 0 and st["gid"] != 0, f"the guest's chown 0:0 reached the host: {st}"
    dev = host_stat(doctor_host, rel + "/dev")
    assert stat.S_ISREG(dev["mode"]), f"mknod made a {oct(dev['mode'])} on the host, not a plain file"


def test_forged_agent_reports_are_not_recorded_as_written(doctor_host):
    hostile_agent.forge()
    fs = wait_for(lambda: [e for e in host_events(doctor_host, "fs") if e["path"] == hostile_agent.FORGED_PATH])
    assert len(fs) == 1, "the forged file event is not on record at all"
    assert fs[0]["time"][:4] != "2000", f"the back-dated file event is stored with the guest's time: {fs[0]}"
    assert (fs[0].get("guest_time") or "").startswith("2000-01-01"), f"the guest's claim is not kept beside: {fs[0]}"
    forged = [e for e in host_events(doctor_host, "exec") if e.get("argv") == hostile_agent.FORGED_ARGV]
    assert forged == [], f"a forged exec event is on record: {forged}"


def _tls(host):
    ctx = ssl.create_default_context()
    s = socket.create_connection((host, 443), timeout=15)
    return ctx.wrap_socket(s, server_hostname=host)


def _read_head(f):
    status = f.readline().decode(errors="replace")
    headers = {}
    while True:
        line = f.readline().decode(errors="replace").strip()
        if not line:
            break
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


def test_h2c_upgrade_gets_no_tunnel(doctor_host):
    c = _tls(doctor_host)
    try:
        f = c.makefile("rb")
        c.sendall((f"GET /upgrade HTTP/1.1\r\nHost: {doctor_host}\r\nConnection: Upgrade, HTTP2-Settings\r\n"
                   "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n").encode())
        status, headers = _read_head(f)
        assert " 101 " not in status, f"capsem passed an h2c upgrade through: {status.strip()}"
        body = f.read(int(headers.get("content-length", "0")))
        assert b"tunnel" not in body
        # The refused /admin/ on the same connection: capsem's 403, never
        # the upstream's tunnel.
        c.sendall(f"GET /admin/x HTTP/1.1\r\nHost: {doctor_host}\r\n\r\n".encode())
        status, headers = _read_head(f)
        body = f.read(int(headers.get("content-length", "0")))
    except (ConnectionError, socket.timeout) as e:
        pytest.fail(f"the connection broke instead of answering: {e}")
    finally:
        c.close()
    assert b"tunnel answered" not in body, "a request after the upgrade reached the upstream unpoliced"
    assert " 403 " in status and headers.get("x-capsem-blocked"), f"/admin/x after the upgrade: {status.strip()} {body[:200]!r}"


def _raw_query(labels):
    qid = int.from_bytes(os.urandom(2), "big")
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in labels:
        q += bytes([len(label)]) + label
    q += b"\0" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(3)
    try:
        s.sendto(q, (GATEWAY, 53))
        return s.recvfrom(4096)[0]
    finally:
        s.close()


def test_escape_laden_query_name_is_recorded_escaped(doctor_host):
    marker = f"capsem-escape-probe-{uuid.uuid4().hex[:8]}"
    reply = _raw_query([b"\x1b]0;pwned\x07", b"\x1b[8m", b"row\nforged", marker.encode(), b"test"])
    assert reply[3] & 0xF == 3, "an escape-laden name was not refused with NXDOMAIN"
    evs = wait_for(lambda: [e for e in host_events(doctor_host, "dns") if marker in e.get("qname", "")])
    assert evs, "the query is not on record"
    q = evs[0]["qname"]
    raw = [c for c in q if ord(c) < 0x20 or ord(c) == 0x7F]
    assert not raw, f"control characters stored raw in the query name: {q!r}"
    assert "\\" in q, f"the control characters vanished instead of being escaped: {q!r}"


def test_wildcard_burst_leaves_allowed_name_resolvable(doctor_host):
    wild = required_env("CAPSEM_DOCTOR_WILD")
    cap = int(required_env("CAPSEM_DOCTOR_WILD_CAP"))
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(5)
    try:
        answered = 0
        # Distinct random names, more than the per-session cap, sent in
        # flights of 32 (not one round trip each: slow under TCG).
        names = [f"{uuid.uuid4().hex[:12]}.{wild}" for _ in range(cap + 64)]
        for i in range(0, len(names), 32):
            flight = names[i:i + 32]
            for n, name in enumerate(flight):
                q = struct.pack(">HHHHHH", n, 0x0100, 1, 0, 0, 0)
                for label in name.split("."):
                    q += bytes([len(label)]) + label.encode()
                q += b"\0" + struct.pack(">HH", 1, 1)
                s.sendto(q, (GATEWAY, 53))
            for _ in flight:
                data, _ = s.recvfrom(4096)
                if data[3] & 0xF == 0 and struct.unpack(">H", data[6:8])[0] > 0:
                    answered += 1
    finally:
        s.close()
    assert answered <= cap, f"{answered} distinct wildcard names got addresses; the cap is {cap}"
    rcode, ips, _ = dns_query(doctor_host)
    assert rcode == 0 and ips, f"after the burst the allowed name {doctor_host} no longer resolves (rcode {rcode})"
    status, body = https_get(doctor_host, "/hello")
    assert status == 200 and body == b"capsem-doctor-ok"
    capped = [e for e in host_events(doctor_host, "dns") if "cap" in e.get("reason", "")]
    assert capped, "hitting the wildcard-name cap left no event"
