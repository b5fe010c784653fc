"""Asking: under [network] unknown = "ask" a name the policy does not name
is held while whoever listens is asked. The doctor's upstream puts its
policy in that mode for one request (/ask) and, asked to, answers through
the sandbox API's questions endpoints, as `capsem ask`, the Python client
and `capsem ui` do: an answered "once" lets a curl through; with nobody
listening the name is refused at once."""

import contextlib
import ssl
import subprocess
import time
import urllib.parse
import urllib.request

from conftest import dns_query, host_events, required_env, wait_for

NXDOMAIN = 3


@contextlib.contextmanager
def asking(host, name, answer):
    """The doctor's policy asks about name while the block runs; with
    answer other than "none", the host answers name's question with it.
    Yields the stream of the host's lines (after "asking")."""
    url = f"https://{host}/ask?" + urllib.parse.urlencode({"name": name, "answer": answer})
    req = urllib.request.Request(url, headers={"User-Agent": "capsem-doctor"})
    r = urllib.request.urlopen(req, timeout=60, context=ssl.create_default_context())
    try:
        first = r.readline().decode().strip()
        assert first == "asking", f"/ask said {first!r}"
        yield r
    finally:
        r.close()


def test_unanswered_ask_is_refused_at_once(doctor_host):
    asked = required_env("CAPSEM_DOCTOR_ASKED")
    with asking(doctor_host, asked, "none"):
        t0 = time.monotonic()
        rcode, ips, _ = dns_query(asked)
        took = time.monotonic() - t0
    assert rcode == NXDOMAIN and not ips, (rcode, ips)
    assert took < 1.0, f"with nobody listening the query waited {took:.2f} s; it must be refused at once"
    evs = wait_for(lambda: [e for e in host_events(doctor_host, "dns") if e["qname"] == asked and e["reason"] == "ask-unanswered"])
    assert evs, "no ask-unanswered DNS event"


def test_ask_answered_through_the_api_lets_curl_through(doctor_host):
    asked = required_env("CAPSEM_DOCTOR_ASKED")
    with asking(doctor_host, asked, "once") as stream:
        p = subprocess.run(["curl", "-sS", "--max-time", "40", f"https://{asked}/hello"], capture_output=True, text=True)
        answered = stream.readline().decode().strip()
    assert answered.startswith("answered "), f"the host's client said {answered!r}"
    assert p.returncode == 0 and p.stdout == "capsem-doctor-ok", (p.returncode, p.stdout, p.stderr)
    evs = wait_for(lambda: [e for e in host_events(doctor_host, "dns") if e["qname"] == asked and e["reason"] == "asked-allowed"])
    assert evs, "no asked-allowed DNS event"
    # The request over, the doctor's own policy refuses what it does not name again.
    rcode, ips, _ = dns_query(asked)
    assert rcode == NXDOMAIN and not ips, (rcode, ips)
