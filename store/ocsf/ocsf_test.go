package ocsf

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/sqliteexport"
)

// schemas compiles the pinned OCSF 1.8.0 JSON Schemas (testdata, with
// PROVENANCE.md), by class_uid.
func schemas(t *testing.T) map[int]*jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	out := map[int]*jsonschema.Schema{}
	for class, name := range className {
		path := filepath.Join("testdata", "ocsf-"+Version, "ocsf-"+Version+"-"+name+".schema.json")
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AddResource(path, doc); err != nil {
			t.Fatal(err)
		}
		if out[class], err = c.Compile(path); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// validate checks every line of out against the schema of its class and
// returns the lines by class, with their metadata.uid unique.
func validate(t *testing.T, out []byte) map[int][]map[string]any {
	t.Helper()
	sch := schemas(t)
	byClass := map[int][]map[string]any{}
	uids := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(sc.Bytes()))
		if err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		var ev map[string]any
		json.Unmarshal(sc.Bytes(), &ev)
		class := int(ev["class_uid"].(float64))
		s := sch[class]
		if s == nil {
			t.Fatalf("line %d: class_uid %d is none of the classes written", n, class)
		}
		if err := s.Validate(doc); err != nil {
			t.Errorf("line %d (%s) does not validate against OCSF %s: %v\n%s", n, className[class], Version, err, sc.Text())
		}
		uid := ev["metadata"].(map[string]any)["uid"].(string)
		if uids[uid] {
			t.Errorf("line %d: metadata.uid %s repeats", n, uid)
		}
		uids[uid] = true
		byClass[class] = append(byClass[class], ev)
	}
	return byClass
}

// TestFixtureValidates: every event of the real session fixture (claude
// in the guest, a tool loop, refusals, an MCP call) is written as an OCSF
// event that validates against its class's schema, or counted as skipped.
func TestFixtureValidates(t *testing.T) {
	r, err := sqliteexport.OpenReader(filepath.Join("..", "..", "tests", "fixtures", "session.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sessions, err := r.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	res, err := Write(&buf, r, sessions, Options{})
	if err != nil {
		t.Fatal(err)
	}
	byClass := validate(t, buf.Bytes())
	var total int64
	for _, s := range sessions {
		total += s.Counts.Events
	}
	skipped := 0
	for k, n := range res.Skipped {
		if k != store.KindAgent && k != store.KindRecording {
			t.Errorf("%d %s events skipped: that kind has a class", n, k)
		}
		skipped += n
	}
	if int64(res.Events+skipped) != total {
		t.Errorf("%d written + %d skipped, the fixture has %d events", res.Events, skipped, total)
	}
	for _, class := range []int{classDNS, classNetwork, classHTTP, classProcess, classFile} {
		if len(byClass[class]) == 0 {
			t.Errorf("no %s event from the fixture", className[class])
		}
	}
	t.Logf("%d events: %v; skipped %v", res.Events, res.ByClass, res.Skipped)
}

// TestEveryShape: each mapping, its branches included (denied flows,
// inbound, renames, an overflow, an exec without a pid, a denied MCP call),
// validates, and says what it should.
func TestEveryShape(t *testing.T) {
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	w, err := st.Begin(store.Session{ID: "s1", Sandbox: "box", Host: "builder", Command: []string{"claude"}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1767225600, 0)
	ip := netip.MustParseAddr
	evs := []store.Event{
		{DNS: &store.DNS{QName: "api.test", QType: "A", Transport: store.TransportUDP, Decision: store.Allowed, Answer: "198.19.0.7", ResolverAsked: ip("198.18.0.1")}},
		{DNS: &store.DNS{QName: "evil.test", QType: "TXT", Decision: store.Denied, Reason: "not in the allow list", MatchedRule: "default deny", Answer: "NXDOMAIN", Count: 40}},
		{Net: &store.Net{IP: ip("1.1.1.1"), Port: 443, SrcIP: ip("198.18.0.2"), SrcPort: 4000, Transport: store.TransportTCP, Decision: store.Denied, Reason: "direct-ip"}},
		{Net: &store.Net{Domain: "echo.test", IP: ip("198.19.0.8"), Port: 7, Transport: store.TransportTCP, Decision: store.Allowed, BytesSent: 10, BytesReceived: 10, Duration: time.Second, ConnType: store.ConnTCP, Detail: "upstream via the proxy 10.0.0.1:3128"}},
		{Net: &store.Net{IP: ip("198.18.0.2"), Port: 8000, SrcIP: ip("127.0.0.1"), SrcPort: 5000, Transport: store.TransportTCP, Direction: store.Inbound, Decision: store.Allowed}},
		{Net: &store.Net{Domain: "api.test", Port: 443, Method: "PROPFIND", Path: "/x", Query: "key=sk-ant-api03-OcsfTestSecret0123456789abcdefABCDEF", Decision: store.Denied, Reason: "denied-path", StatusCode: 403, HTTPVersion: store.HTTP2,
			RequestHeaders: []store.Header{{Name: "User-Agent", Value: "curl/8"}}}},
		{ModelCall: &store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", Model: "claude-x", Method: "POST", Path: "/v1/messages", StatusCode: 200, InputTokens: 10, OutputTokens: 5, CostUSD: 0.001,
			ToolCalls: []store.ToolCall{{Name: "Bash"}}}},
		{MCPCall: &store.MCPCall{ServerName: "mcp.test/mcp", Method: "tools/call", ToolName: "get-env", RequestID: "3", Decision: store.Denied, Reason: "mcp-tool-denied", MatchedRule: "mcp.rules[1]"}},
		{MCPCall: &store.MCPCall{ServerName: "everything", Method: "tools/list", Decision: store.Allowed}},
		{Exec: &store.Exec{Argv: []string{"sh", "-c", "echo 'hi'"}, PID: 42, Start: at, Duration: time.Second, ExitCode: 0}},
		{Exec: &store.Exec{ExitCode: -1, Signal: "KILL", TTY: true}},
		{FS: &store.FS{Action: store.FSCreated, Path: "src/main.go", Size: 10}},
		{FS: &store.FS{Action: store.FSRenamed, Path: "b.txt", OldPath: "a.txt", GuestTime: at}},
		{FS: &store.FS{Action: store.FSOverflow, Path: "node_modules", Dir: true}},
		{FS: &store.FS{Action: "unknown", Path: "x"}},
		{Agent: &store.Agent{State: store.AgentSilent}},
	}
	for _, ev := range evs {
		ev.Time = at
		w.Append(ev)
	}
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	sess, _ := st.Session("s1")
	var buf bytes.Buffer
	res, err := Write(&buf, st, []store.Session{sess}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	byClass := validate(t, buf.Bytes())
	if res.Events != len(evs)-1 || res.Skipped[store.KindAgent] != 1 {
		t.Errorf("result %+v, want %d written and the agent event skipped", res, len(evs)-1)
	}
	out := buf.String()
	for _, c := range []struct{ want, why string }{
		{`"type_uid":400306`, "an allowed DNS answer is DNS Activity: Traffic"},
		{`"rcode_id":3`, "NXDOMAIN"},
		{`"count":40`, "an aggregated event keeps its count"},
		{`"type_uid":400105`, "a denied flow is Network Activity: Refuse"},
		{`"direction_id":1`, "an inbound connection to a published port"},
		{`"firewall_rule":{"name":"default deny"}`, "the rule that decided"},
		{`"type_uid":400299`, "PROPFIND is HTTP Activity: Other"},
		{`"query_string":"key=sk-ant-api03-OcsfTestSecret0123456789abcdefABCDEF"`, "the query, unscrubbed without Scrub"},
		{`"method":"PROPFIND"`, "a method OCSF has no value for, unmapped"},
		{`"user_agent":"curl/8"`, "the user agent"},
		{`"model":"claude-x"`, "a model call's model, unmapped"},
		{`"mcp_method":"tools/call"`, "an MCP call's method, unmapped"},
		{`"cmd_line":"sh -c \"echo 'hi'\""`, "the command line as a shell shows it"},
		{`"exit_code":-1`, "an exec the guest did not report the end of"},
		{`"file_result":{"name":"b.txt"`, "a rename's new name"},
		{`"type_uid":100199`, "an overflow: changes went unrecorded"},
		{`"detail":"upstream via the proxy 10.0.0.1:3128"`, "a flow's detail"},
	} {
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: no %s in\n%s", c.why, c.want, out)
		}
	}
	if len(byClass[classHTTP]) != 4 {
		t.Errorf("%d HTTP Activity events, want 4 (a request, a model call, two MCP calls)", len(byClass[classHTTP]))
	}
	// Scrub redacts what capsem export --scrub does.
	buf.Reset()
	if _, err := Write(&buf, st, []store.Session{sess}, Options{Scrub: true}); err != nil {
		t.Fatal(err)
	}
	validate(t, buf.Bytes())
	if strings.Contains(buf.String(), "OcsfTestSecret") || !strings.Contains(buf.String(), "[REDACTED:") {
		t.Errorf("Scrub left the planted key:\n%s", buf.String())
	}
}
