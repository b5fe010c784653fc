"""MCP, seen from inside: the host's MCP servers reached through capsem's
gateway at https://mcp.capsem.internal/NAME, a remote MCP server behind an
allowed host reached through the MITM, the policy's [[mcp.rules]] refusing
tools with capsem's own JSON-RPC error before they reach the server, and
every call in the session's record.

The client is MCP's streamable HTTP spoken by hand with the standard
library (a POST of JSON-RPC answered with JSON or an event stream, the
Mcp-Session-Id header carried), so that no SDK in the guest hides what went
over the wire. The doctor's policy (cmd/capsem/doctor.go) names the
servers, the rules and their lines through CAPSEM_DOCTOR_MCP_* variables.
"""

import json
import ssl
import urllib.error
import urllib.request
import uuid

import pytest

from conftest import FAKE_DNS_PREFIX, dns_query, host_events, required_env, tcp_connect_error, wait_for

GATEWAY_HOST = "mcp.capsem.internal"
PROTOCOL_VERSION = "2025-06-18"
REFUSAL_CODE = -32050  # policy.MCPRefusalCode
NXDOMAIN = 3


class MCPSession:
    """One MCP session over streamable HTTP to url."""

    def __init__(self, url, timeout=30):
        self.url = url
        self.timeout = timeout
        self.session_id = None
        self.version = None
        self.next_id = 1
        self.ctx = ssl.create_default_context()

    def post(self, msg):
        """POSTs one JSON-RPC message (or batch); returns (status,
        headers, [decoded JSON-RPC messages of the answer])."""
        headers = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "User-Agent": "capsem-doctor",
        }
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if self.version:
            headers["MCP-Protocol-Version"] = self.version
        req = urllib.request.Request(self.url, data=json.dumps(msg).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.ctx) as r:
                status, hdrs, body = r.status, r.headers, r.read()
        except urllib.error.HTTPError as e:
            status, hdrs, body = e.code, e.headers, e.read()
        return status, hdrs, decode_answer(hdrs.get("Content-Type", ""), body, status)

    def request(self, method, params=None):
        """Sends a request and returns its response message (with "result"
        or "error")."""
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        status, hdrs, msgs = self.post(msg)
        assert status == 200, f"{method} to {self.url}: HTTP {status}: {msgs!r}"
        for m in msgs:
            if m.get("id") == rid and ("result" in m or "error" in m):
                if method == "initialize" and hdrs.get("Mcp-Session-Id"):
                    self.session_id = hdrs["Mcp-Session-Id"]
                return m
        raise AssertionError(f"{method} to {self.url}: no response to id {rid} in {msgs!r}")

    def result(self, method, params=None):
        """The result of a request that must succeed."""
        m = self.request(method, params)
        assert "result" in m, f"{method}: {m!r}"
        return m["result"]

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        status, _, msgs = self.post(msg)
        assert status in (200, 202), f"notification {method}: HTTP {status}: {msgs!r}"

    def initialize(self):
        res = self.result(
            "initialize",
            {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "capsem-doctor", "version": "1"}},
        )
        self.version = res.get("protocolVersion")
        self.notify("notifications/initialized")
        return res

    def call(self, tool, args=None):
        """tools/call's response message."""
        return self.request("tools/call", {"name": tool, "arguments": args or {}})

    def call_text(self, tool, args=None):
        """The text a tools/call that must succeed returned."""
        m = self.call(tool, args)
        assert "result" in m, f"tools/call {tool}: {m!r}"
        res = m["result"]
        assert not res.get("isError"), f"tools/call {tool}: {res!r}"
        return "".join(c.get("text", "") for c in res.get("content", []) if c.get("type") == "text")

    def calls(self):
        """How many tools/call the test server served before this one."""
        return int(self.call_text("calls"))


def decode_answer(ctype, body, status):
    """The JSON-RPC messages of an HTTP answer: a JSON body, or the data of
    an event stream's events. A non-JSON error body is returned as text."""
    if "text/event-stream" in ctype:
        return parse_sse(body.decode())
    text = body.decode(errors="replace").strip()
    if not text:
        return []
    if "json" not in ctype:
        return [{"http_body": text, "status": status}]
    v = json.loads(text)
    return v if isinstance(v, list) else [v]


def parse_sse(text):
    """The JSON of each event's data in an event stream."""
    out, data = [], []
    for line in text.splitlines() + [""]:
        if line == "":
            if data:
                out.append(json.loads("\n".join(data)))
            data = []
        elif line.startswith("data:"):
            v = line[5:]
            data.append(v[1:] if v.startswith(" ") else v)
    return out


def connect(url):
    s = MCPSession(url)
    s.initialize()
    return s


def tool_names(session):
    return {t["name"] for t in session.result("tools/list", {})["tools"]}


def mcp_events(doctor_host):
    return host_events(doctor_host, "mcp_call")


def matching(doctor_host, **want):
    """The recorded mcp_calls whose fields equal want."""
    return [e for e in mcp_events(doctor_host) if all(e.get(k) == v for k, v in want.items())]


def new_event(doctor_host, before, **want):
    """The first mcp_call matching want recorded after the len(before)
    that matched before, polled for; None if none came."""

    def look():
        evs = matching(doctor_host, **want)
        return evs[len(before)] if len(evs) > len(before) else None

    return wait_for(look, timeout=15)


def assert_refused(m, tool, rule):
    """m is capsem's JSON-RPC refusal of tools/call tool, naming rule."""
    assert "error" in m and "result" not in m, f"tools/call {tool} was not refused: {m!r}"
    err = m["error"]
    assert err.get("code") == REFUSAL_CODE, err
    msg = err.get("message", "")
    assert msg.startswith("capsem:"), msg
    assert rule in msg, f"the refusal does not name {rule}: {msg}"
    assert f'"{tool}"' in msg, f"the refusal does not name the tool {tool}: {msg}"


# --- fixtures -------------------------------------------------------------------


@pytest.fixture(scope="module")
def server():
    return required_env("CAPSEM_DOCTOR_MCP_SERVER")


@pytest.fixture(scope="module")
def gateway_url(server):
    return f"https://{GATEWAY_HOST}/{server}"


@pytest.fixture
def gw(gateway_url):
    return connect(gateway_url)


@pytest.fixture(scope="module")
def gateway_rule():
    return required_env("CAPSEM_DOCTOR_MCP_GATEWAY_RULE")


@pytest.fixture(scope="module")
def host_rule():
    return required_env("CAPSEM_DOCTOR_MCP_HOST_RULE")


@pytest.fixture(scope="module", params=["CAPSEM_DOCTOR_MCP_PATH", "CAPSEM_DOCTOR_MCP_JSON_PATH"], ids=["sse", "json"])
def remote_path(request):
    return required_env(request.param)


@pytest.fixture
def remote(doctor_host, remote_path):
    return connect(f"https://{doctor_host}{remote_path}")


# --- the gateway ----------------------------------------------------------------


def test_mcp_gateway_name_resolves_into_fake_dns_pool():
    required_env("CAPSEM_DOCTOR_MCP_SERVER")
    rcode, ips, _ = dns_query(GATEWAY_HOST)
    assert rcode == 0 and ips, (rcode, ips)
    assert all(ip.startswith(FAKE_DNS_PREFIX) for ip in ips), ips


def test_mcp_gateway_only_on_443(server):
    # The policy allows the gateway's name on 443 alone; nothing else of
    # it is served.
    assert tcp_connect_error(GATEWAY_HOST, 443) is None
    assert tcp_connect_error(GATEWAY_HOST, 80) is not None


def test_mcp_gateway_initialize_returns_server_info(gateway_url):
    s = MCPSession(gateway_url)
    res = s.initialize()
    assert res["serverInfo"]["name"] == "capsem-testserver", res
    assert "tools" in res.get("capabilities", {}), res
    assert s.session_id, "the gateway gave no Mcp-Session-Id"


def test_mcp_gateway_tools_list_hides_denied(gw):
    names = tool_names(gw)
    # echo, add, calls and slow are allowed; env and crash are denied by
    # the first [[mcp.rules]] entry and hide_denied is on by default.
    assert {"echo", "add", "calls", "slow"} <= names, names
    assert not names & {"env", "crash"}, names


def test_mcp_gateway_tools_call_echo(gw):
    text = f"hello from the guest {uuid.uuid4().hex}"
    assert gw.call_text("echo", {"text": text}) == text


def test_mcp_gateway_tools_call_add(gw):
    assert gw.call_text("add", {"a": 2, "b": 40}) == "42"


def test_mcp_gateway_denied_tool_refused_with_capsem_error(gw, gateway_rule):
    assert_refused(gw.call("env", {"name": "PATH"}), "env", gateway_rule)


def test_mcp_gateway_denied_tool_never_reaches_server(gw, gateway_rule):
    before = gw.calls()
    gw.call_text("echo", {"text": "counted"})  # reaches it: the count can move
    assert_refused(gw.call("env", {"name": "HOME"}), "env", gateway_rule)
    assert_refused(gw.call("crash"), "crash", gateway_rule)
    # The calls tool counts itself and the echo; a denied call that got
    # through would count too (and crash would have restarted the server,
    # resetting the count to 0).
    assert gw.calls() == before + 2


def test_mcp_gateway_resources_read(gw):
    res = gw.result("resources/read", {"uri": "capsem://testserver/hello"})
    assert [c.get("text") for c in res["contents"]] == ["hello from testserver"], res


def test_mcp_gateway_prompts_get(gw):
    res = gw.result("prompts/get", {"name": "greet", "arguments": {"name": "doctor"}})
    texts = [m["content"].get("text") for m in res["messages"]]
    assert texts == ["Say hello to doctor"], res


def test_mcp_gateway_unknown_server_is_404(server):
    s = MCPSession(f"https://{GATEWAY_HOST}/no-such-server-{uuid.uuid4().hex[:8]}")
    status, _, msgs = s.post(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "capsem-doctor", "version": "1"}}}
    )
    assert status == 404, (status, msgs)


def test_mcp_gateway_server_env_is_only_its_own():
    name = required_env("CAPSEM_DOCTOR_MCP_ENV_SERVER")
    mark = required_env("CAPSEM_DOCTOR_MCP_MARK")
    host_only = required_env("CAPSEM_DOCTOR_MCP_HOST_ONLY_VAR")
    s = connect(f"https://{GATEWAY_HOST}/{name}")
    assert "env" in tool_names(s), "the env tool is allowed on this server"
    assert s.call_text("env", {"name": mark}) == "capsem-doctor-mark"
    assert s.call_text("env", {"name": "PATH"}) != ""
    # Set in the capsem process that started the server: a stdio server
    # gets PATH, HOME and its env, nothing else of capsem's.
    assert s.call_text("env", {"name": host_only}) == ""


# --- a host the policy denies ---------------------------------------------------


def test_mcp_to_denied_host_refused(denied_name):
    rcode, ips, _ = dns_query(denied_name)
    assert (rcode, ips) == (NXDOMAIN, []), (rcode, ips)
    s = MCPSession(f"https://{denied_name}/mcp", timeout=10)
    with pytest.raises(OSError):  # urllib.error.URLError is an OSError
        s.initialize()


# --- a remote MCP server behind an allowed host, through the MITM ---------------


def test_mcp_remote_tools_call(remote):
    text = f"remote echo {uuid.uuid4().hex}"
    assert remote.call_text("echo", {"text": text}) == text
    assert remote.call_text("add", {"a": 1.5, "b": 2}) == "3.5"


def test_mcp_remote_tools_list_hides_denied(remote):
    names = tool_names(remote)
    # The remote server runs in the doctor's own process, which has no
    # crash tool to offer; env is there and denied on the doctor host.
    assert {"echo", "add", "calls", "slow"} <= names, names
    assert "env" not in names, names


def test_mcp_remote_denied_tool_refused_never_reaching_upstream(remote, host_rule):
    before = remote.calls()
    assert_refused(remote.call("env", {"name": "HOME"}), "env", host_rule)
    assert remote.calls() == before + 1


def test_mcp_remote_calls_recorded_with_host_and_path(doctor_host, remote, remote_path, host_rule):
    server_name = doctor_host + remote_path
    allowed = dict(server_name=server_name, method="tools/call", tool_name="echo", decision="allowed")
    refused = dict(server_name=server_name, method="tools/call", tool_name="env", decision="denied")
    before_allowed, before_refused = matching(doctor_host, **allowed), matching(doctor_host, **refused)
    remote.call_text("echo", {"text": "recorded remotely"})
    denied = remote.call("env", {"name": "HOME"})
    e = new_event(doctor_host, before_allowed, **allowed)
    assert e, f"no new allowed tools/call of echo on {server_name} in {mcp_events(doctor_host)!r}"
    d = new_event(doctor_host, before_refused, **refused)
    assert d, f"no new denied tools/call of env on {server_name} in {mcp_events(doctor_host)!r}"
    assert d["request_id"] == str(denied["id"]), d
    assert d["reason"] == "mcp-tool-denied", d
    assert d["matched_rule"].startswith(host_rule), d
    assert d["error_message"] == denied["error"]["message"], d


# --- the record -----------------------------------------------------------------


def test_mcp_gateway_calls_recorded_in_session(doctor_host, gw, server, gateway_rule):
    allowed = dict(server_name=server, method="tools/call", tool_name="echo", decision="allowed")
    refused = dict(server_name=server, method="tools/call", tool_name="env", decision="denied")
    before_allowed, before_refused = matching(doctor_host, **allowed), matching(doctor_host, **refused)
    gw.call_text("echo", {"text": "recorded"})
    denied = gw.call("env", {"name": "HOME"})
    e = new_event(doctor_host, before_allowed, **allowed)
    assert e, f"no new allowed tools/call of echo on {server} in {mcp_events(doctor_host)!r}"
    d = new_event(doctor_host, before_refused, **refused)
    assert d, f"no new denied tools/call of env on {server} in {mcp_events(doctor_host)!r}"
    assert d["request_id"] == str(denied["id"]), d
    assert d["reason"] == "mcp-tool-denied", d
    assert d["matched_rule"].startswith(gateway_rule), d
    assert d["error_message"] == denied["error"]["message"], d
    # Calls through the gateway are recorded as the server's NAME, never
    # also as the gateway's host.
    hosts = [e for e in mcp_events(doctor_host) if e.get("server_name", "").startswith(GATEWAY_HOST)]
    assert not hosts, hosts


def test_mcp_gateway_methods_recorded(doctor_host, gw, server):
    before = {m: matching(doctor_host, server_name=server, method=m) for m in ("tools/list", "resources/read", "prompts/get")}
    gw.result("tools/list", {})
    gw.result("resources/read", {"uri": "capsem://testserver/hello"})
    gw.result("prompts/get", {"name": "greet", "arguments": {"name": "doctor"}})
    for m, b in before.items():
        assert new_event(doctor_host, b, server_name=server, method=m), f"no new {m} on {server} in {mcp_events(doctor_host)!r}"
    assert matching(doctor_host, server_name=server, method="initialize"), "no initialize recorded"
