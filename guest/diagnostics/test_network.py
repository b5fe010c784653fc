"""The network rules, seen from inside: HTTPS to an allowed name works with
capsem's CA; everything else — other ports, direct IPs, denied names,
outside resolvers, DNS over TLS, stray UDP, ICMP, denied requests — is
refused. No test needs the real internet: capsem answers everything."""

import base64
import hashlib
import os
import re
import socket
import ssl
import subprocess

import pytest

from conftest import FAKE_DNS_PREFIX, GATEWAY, describe, dns_query, https_get, run, tcp_connect_error

CAPSEM_CA = "/usr/local/share/ca-certificates/capsem.crt"
NXDOMAIN = 3


def pem_bodies(path):
    """The base64 bodies (joined lines) of the certificates in a PEM file."""
    with open(path) as f:
        text = f.read()
    return {
        "".join(m.split())
        for m in re.findall(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", text, re.S)
    }


@pytest.fixture(scope="module")
def capsem_ca():
    bodies = pem_bodies(CAPSEM_CA)
    assert len(bodies) == 1, f"{CAPSEM_CA} holds {len(bodies)} certificates"
    return bodies.pop()


@pytest.fixture(scope="module")
def host_ip(doctor_host):
    return socket.gethostbyname(doctor_host)


# --- the CA -------------------------------------------------------------------


def test_capsem_ca_is_a_ca_certificate():
    p = run(f"openssl x509 -in {CAPSEM_CA} -noout -subject -ext basicConstraints")
    assert p.returncode == 0, describe(p)
    assert "CA:TRUE" in p.stdout, p.stdout


def test_capsem_ca_in_system_store(capsem_ca):
    assert capsem_ca in pem_bodies("/etc/ssl/certs/ca-certificates.crt")


def test_capsem_ca_in_certifi(capsem_ca):
    import certifi

    assert capsem_ca in pem_bodies(certifi.where()), certifi.where()


def test_capsem_ca_in_certifi_cacert_pem(capsem_ca):
    import certifi

    path = os.path.join(os.path.dirname(certifi.__file__), "cacert.pem")
    assert capsem_ca in pem_bodies(path), path


def test_capsem_ca_in_pip_vendored_certifi(capsem_ca):
    from pip._vendor import certifi

    assert capsem_ca in pem_bodies(certifi.where()), certifi.where()


@pytest.mark.parametrize("var", ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "CURL_CA_BUNDLE"])
def test_ca_env_var_names_a_bundle_with_capsem_ca(var, capsem_ca):
    path = os.environ.get(var)
    assert path, f"{var} is not set"
    assert capsem_ca in pem_bodies(path), f"{var}={path} does not hold capsem's CA"


# --- HTTPS to the allowed host ------------------------------------------------


def test_allowed_name_resolves_into_fake_dns_pool(host_ip):
    assert host_ip.startswith(FAKE_DNS_PREFIX), host_ip


def test_allowed_name_has_no_ipv6_records(doctor_host):
    rcode, _, an = dns_query(doctor_host, qtype=28)  # AAAA
    assert (rcode, an) == (0, 0)


def test_curl_https_without_k(doctor_host):
    p = run(["curl", "-sS", "--fail", "--max-time", "20", f"https://{doctor_host}/hello"], timeout=30)
    assert p.returncode == 0, describe(p)
    assert p.stdout == "capsem-doctor-ok"


def test_curl_https_http2(doctor_host):
    p = run(
        ["curl", "-sS", "--http2", "-o", "/dev/null", "-w", "%{http_code} %{http_version}", f"https://{doctor_host}/hello"],
        timeout=30,
    )
    assert p.returncode == 0, describe(p)
    assert p.stdout == "200 2"


def test_python_urllib_https(doctor_host):
    assert https_get(doctor_host, "/hello") == (200, b"capsem-doctor-ok")


def test_python_requests_https(doctor_host):
    import requests

    r = requests.get(f"https://{doctor_host}/hello", timeout=20)
    assert (r.status_code, r.text) == (200, "capsem-doctor-ok")


def test_node_fetch_https(doctor_host):
    js = f"fetch('https://{doctor_host}/hello').then(r => r.text().then(t => console.log(r.status, t))).catch(e => {{ console.error(e); process.exit(1) }})"
    p = run(["node", "-e", js], timeout=60)
    assert p.returncode == 0, describe(p)
    assert p.stdout.strip() == "200 capsem-doctor-ok"


def test_https_leaf_is_issued_by_capsem_ca(doctor_host):
    ctx = ssl.create_default_context(cafile=CAPSEM_CA)  # capsem's CA alone
    with socket.create_connection((doctor_host, 443), timeout=20) as raw:
        with ctx.wrap_socket(raw, server_hostname=doctor_host) as s:
            cert = s.getpeercert()
    issuer = dict(x[0] for x in cert["issuer"])
    assert "capsem" in (issuer.get("organizationName", "") + issuer.get("commonName", "")).lower(), issuer


def test_https_fails_without_capsem_ca(doctor_host, capsem_ca):
    # Trusting only some other CA, the MITM's leaf must not verify: proof
    # that clients verify at all, and that the trust comes from capsem's CA.
    others = sorted(pem_bodies("/etc/ssl/certs/ca-certificates.crt") - {capsem_ca})
    assert others, "the system store holds only capsem's CA"
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cadata=base64.b64decode(others[0]))
    with pytest.raises(ssl.SSLCertVerificationError):
        with socket.create_connection((doctor_host, 443), timeout=20) as raw:
            ctx.wrap_socket(raw, server_hostname=doctor_host).close()


def test_download_10mb_completes(doctor_host):
    n = 10 * 1024 * 1024
    p = subprocess.run(
        ["curl", "-sS", "--fail", "--max-time", "120", f"https://{doctor_host}/bytes?n={n}"],
        capture_output=True,
        timeout=150,
    )
    assert p.returncode == 0, p.stderr
    assert len(p.stdout) == n
    assert hashlib.sha256(p.stdout).hexdigest() == hashlib.sha256(b"x" * n).hexdigest()


# --- request policy -----------------------------------------------------------


def test_denied_request_gets_403_with_capsem_body(doctor_host):
    status, body = https_get(doctor_host, "/admin/anything")
    assert status == 403, (status, body[:300])
    assert b"capsem" in body.lower(), body[:300]


@pytest.mark.parametrize("path", ["/hello/../admin/anything", "/%61dmin/anything", "//admin/anything"])
def test_denied_request_cannot_sneak_past_by_path_tricks(doctor_host, path):
    p = run(
        ["curl", "-sS", "--path-as-is", "-o", "/dev/null", "-w", "%{http_code}", f"https://{doctor_host}{path}"],
        timeout=30,
    )
    assert p.returncode == 0, describe(p)
    assert p.stdout == "403", f"{path}: HTTP {p.stdout}"


def test_host_header_for_another_name_is_refused(doctor_host, denied_name):
    p = run(["curl", "-sS", "-H", f"Host: {denied_name}", f"https://{doctor_host}/hello"], timeout=30)
    assert "capsem-doctor-ok" not in p.stdout, "domain fronting through an allowed name worked"


def test_sni_for_denied_name_is_refused(host_ip, denied_name):
    p = run(
        ["curl", "-sS", "--max-time", "10", "--resolve", f"{denied_name}:443:{host_ip}", f"https://{denied_name}/hello"],
        timeout=20,
    )
    assert p.returncode != 0 and "capsem-doctor-ok" not in p.stdout, describe(p)


# --- ports and addresses ------------------------------------------------------


def test_http_port_80_is_blocked(doctor_host):
    err = tcp_connect_error(doctor_host, 80)
    assert err is not None, "port 80 on the allowed host accepted a connection"


def test_curl_plain_http_fails(doctor_host):
    p = run(["curl", "-sS", "--max-time", "10", f"http://{doctor_host}/hello"], timeout=20)
    assert p.returncode != 0 and "capsem-doctor-ok" not in p.stdout, describe(p)


@pytest.mark.parametrize("port", [8443, 22, 8080])
def test_non_allowed_port_is_blocked(doctor_host, port):
    err = tcp_connect_error(doctor_host, port)
    assert err is not None, f"port {port} on the allowed host accepted a connection"


@pytest.mark.parametrize("ip", ["1.1.1.1", "8.8.8.8", "93.184.215.14"])
def test_direct_ip_is_blocked(ip):
    err = tcp_connect_error(ip, 443)
    assert err is not None, f"a direct connection to {ip}:443 succeeded"


def test_spoofed_source_address_is_dropped(host_ip):
    # A second address on eth0, outside what capsem gave the guest: a SYN
    # from it must get nowhere.
    spoof = "198.18.0.77"
    p = run(f"ip addr add {spoof}/32 dev eth0")
    assert p.returncode == 0, describe(p)
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(3)
        s.bind((spoof, 0))
        try:
            err = s.connect_ex((host_ip, 443))
        except socket.timeout:
            err = "timeout"
        finally:
            s.close()
    finally:
        run(f"ip addr del {spoof}/32 dev eth0")
    assert err != 0, f"a connection from the spoofed address {spoof} was established"


def test_allowed_name_address_is_stable(doctor_host, host_ip):
    assert [dns_query(doctor_host)[1] for _ in range(3)] == [[host_ip]] * 3


def test_gateway_accepts_no_tcp():
    err = tcp_connect_error(GATEWAY, 22)
    assert err is not None, "the gateway accepted a TCP connection on port 22"


def test_unassigned_fake_dns_address_is_blocked(host_ip):
    a, b, c, d = map(int, host_ip.split("."))
    other = f"{a}.{b}.{(c + 100) % 256}.{(d + 7) % 254 + 1}"
    err = tcp_connect_error(other, 443)
    assert err is not None, f"{other}, an address fake DNS did not hand out, accepted a connection"


# --- DNS ----------------------------------------------------------------------


def test_denied_name_is_nxdomain(denied_name):
    rcode, ips, _ = dns_query(denied_name)
    assert rcode == NXDOMAIN and not ips, (rcode, ips)


def test_denied_name_does_not_resolve_in_libc(denied_name):
    with pytest.raises(socket.gaierror):
        socket.getaddrinfo(denied_name, 443)


def test_public_name_is_nxdomain():
    rcode, ips, _ = dns_query("example.com")
    assert rcode == NXDOMAIN and not ips, (rcode, ips)


def test_outside_resolver_is_answered_by_capsem(doctor_host):
    # A real resolver could not answer this name (.test is reserved) with a
    # fake-DNS address: only capsem could.
    p = run(["dig", "+short", "+time=3", "+tries=1", "@8.8.8.8", doctor_host], timeout=15)
    assert p.returncode == 0, describe(p)
    assert p.stdout.strip().startswith(FAKE_DNS_PREFIX), describe(p)


def test_raw_udp_dns_to_1_1_1_1_is_answered_by_capsem(doctor_host, host_ip):
    rcode, ips, _ = dns_query(doctor_host, server="1.1.1.1")
    assert (rcode, ips) == (0, [host_ip])


def test_outside_resolver_gives_nxdomain_for_public_name():
    # The internet would answer example.com; capsem refuses it.
    rcode, ips, _ = dns_query("example.com", server="8.8.8.8")
    assert rcode == NXDOMAIN and not ips, (rcode, ips)


def test_dns_over_tcp_is_answered_by_capsem(doctor_host, host_ip):
    p = run(["dig", "+tcp", "+short", "+time=3", "+tries=1", "@9.9.9.9", doctor_host], timeout=15)
    assert p.returncode == 0, describe(p)
    assert p.stdout.strip() == host_ip, describe(p)


@pytest.mark.parametrize("target", ["1.1.1.1", "gateway", "allowed"])
def test_dns_over_tls_is_blocked(target, doctor_host):
    host = {"gateway": GATEWAY, "allowed": doctor_host}.get(target, target)
    err = tcp_connect_error(host, 853)
    assert err is not None, f"DNS over TLS to {host}:853 connected"


# --- UDP and ICMP -------------------------------------------------------------


def udp_gets_answer(host, port, payload, timeout=1.0):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(timeout)
    try:
        s.sendto(payload, (host, port))
        s.recvfrom(4096)
        return True
    except (socket.timeout, ConnectionRefusedError):
        return False
    finally:
        s.close()


def test_stray_udp_ntp_gets_no_answer():
    ntp = b"\x1b" + 47 * b"\0"
    assert not udp_gets_answer("1.1.1.1", 123, ntp), "an NTP server answered"


def test_udp_443_quic_to_allowed_host_gets_no_answer(host_ip):
    assert not udp_gets_answer(host_ip, 443, os.urandom(1200)), "UDP 443 (QUIC) was answered"


def test_ping_to_outside_fails():
    p = run(["ping", "-c", "1", "-W", "1", "1.1.1.1"], timeout=10)
    assert p.returncode != 0, "an ICMP echo beyond the gateway was answered:\n" + describe(p)


def test_raw_icmp_socket_to_outside_gets_no_reply():
    # An echo request built by hand on a raw socket, not through ping.
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.settimeout(1)
    body = b"\x08\x00\x00\x00\x12\x34\x00\x01" + b"capsem-doctor"
    csum = 0
    for i in range(0, len(body), 2):
        csum += (body[i] << 8) + (body[i + 1] if i + 1 < len(body) else 0)
    csum = (csum >> 16) + (csum & 0xFFFF)
    csum = ~(csum + (csum >> 16)) & 0xFFFF
    pkt = body[:2] + csum.to_bytes(2, "big") + body[4:]
    try:
        s.sendto(pkt, ("8.8.8.8", 0))
        try:
            while True:
                data, addr = s.recvfrom(2048)
                if addr[0] == "8.8.8.8":
                    pytest.fail(f"8.8.8.8 answered a raw ICMP packet: {data[:28]!r}")
        except socket.timeout:
            pass
    finally:
        s.close()


def test_ping_to_gateway_works():
    p = run(["ping", "-c", "1", "-W", "5", GATEWAY], timeout=15)
    assert p.returncode == 0, describe(p)
