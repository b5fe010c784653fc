"""HTTP/3: QUIC from the guest to an allowed name is intercepted and decided
like every HTTPS request; every other QUIC is refused at once.

The guest image has no HTTP/3 client, so `capsem doctor` puts capsem itself
in the suite's directory and these tests run its hidden `capsem h3-get`
(quic-go's http3 over a connected UDP socket, as chromium's QUIC is), which
prints what happened as JSON. The doctor's upstream speaks no HTTP/3: the
MITM's upstream probe falls back to TCP, so these tests see HTTP/3 between
the guest and capsem only.
"""

import json
import os

import pytest

from conftest import GATEWAY, describe, host_events, needs_doctor_guest, run, wait_for


def h3_get(url, *flags, timeout=40):
    """Runs `capsem h3-get FLAGS URL` in the guest; returns its JSON result."""
    needs_doctor_guest("the HTTP/3 client capsem doctor puts in the workspace")
    exe = os.environ.get("CAPSEM_DOCTOR_H3GET")
    if not exe:
        pytest.skip(os.environ.get("CAPSEM_DOCTOR_H3GET_MISSING", "CAPSEM_DOCTOR_H3GET is not set"))
    p = run([exe, "h3-get", *flags, url], timeout=timeout)
    lines = p.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        pytest.fail("capsem h3-get printed no result:\n" + describe(p))


def test_http3_request_through_the_mitm(doctor_host):
    r = h3_get(f"https://{doctor_host}/hello")
    assert r["Status"] == 200 and r["Proto"] == "HTTP/3.0", r
    assert r["Body"] == "capsem-doctor-ok", r


def test_http3_request_is_recorded_as_http3(doctor_host):
    r = h3_get(f"https://{doctor_host}/hello")
    assert r["Status"] == 200, r

    def recorded():
        return [e for e in host_events(doctor_host, "net")
                if e.get("url_path") == "/hello" and e.get("http_version") == "HTTP/3"]

    evs = wait_for(recorded)
    assert evs and evs[0]["decision"] == "allowed" and evs[0]["transport"] == "udp", evs


def test_http3_denied_path_gets_capsem_403(doctor_host):
    r = h3_get(f"https://{doctor_host}/admin/anything")
    assert r["Status"] == 403 and r["Proto"] == "HTTP/3.0", r
    assert "capsem" in r["Body"].lower() and "admin page" not in r["Body"], r


def test_http3_sni_for_another_name_is_refused_at_once(doctor_host, denied_name):
    # The allowed name's address, another name in the handshake: domain
    # fronting over QUIC. Refused with ICMP port unreachable, not timed out.
    r = h3_get(f"https://{doctor_host}/hello", "--sni", denied_name, "--timeout", "10s")
    assert r["Status"] == 0 and r["Refused"], r
    assert r["Millis"] < 3000, r


@pytest.mark.parametrize("addr", ["1.1.1.1:443", f"{GATEWAY}:443"])
def test_http3_to_an_address_capsem_did_not_hand_out_is_refused(doctor_host, addr):
    r = h3_get(f"https://{doctor_host}/hello", "--addr", addr, "--timeout", "10s")
    assert r["Status"] == 0 and r["Refused"] and r["Millis"] < 3000, r


def test_http3_zero_rtt_is_never_accepted(doctor_host):
    # A second connection dialled early with the first's ticket: 0-RTT data
    # is replayable, so capsem allows none; the request waits for the
    # handshake and is still answered.
    r = h3_get(f"https://{doctor_host}/hello", "--resume")
    again = r.get("Again") or {}
    assert r["Status"] == 200 and again.get("Status") == 200, r
    assert not again.get("Used0RTT"), r


def test_http3_migration_to_another_port_is_not_followed(doctor_host):
    r = h3_get(f"https://{doctor_host}/hello", "--migrate")
    assert r["Status"] == 200 and r.get("PathErr"), f"the new path was validated: {r}"
    assert (r.get("Again") or {}).get("Status") == 200, f"the first path stopped working: {r}"
