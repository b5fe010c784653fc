package store

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"math/bits"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fullNet() *Net {
	return &Net{
		Domain:    "api.anthropic.com",
		IP:        netip.MustParseAddr("198.19.0.7"),
		Port:      443,
		SrcIP:     netip.MustParseAddr("198.18.0.2"),
		SrcPort:   51234,
		Transport: TransportTCP,
		ConnType:  ConnHTTPS,

		Decision:    Allowed,
		Reason:      "domain allowed by policy",
		MatchedRule: "allow api.anthropic.com:443",

		HTTPVersion:   HTTP2,
		Method:        "POST",
		Path:          "/v1/messages",
		Query:         "beta=true&x=é",
		StatusCode:    200,
		BytesSent:     1234,
		BytesReceived: 98765,
		Duration:      1532 * time.Millisecond,

		RequestHeaders:      []Header{{"Content-Type", "application/json"}, {"X-Dup", "1"}, {"X-Dup", "2"}, {"", ""}},
		ResponseHeaders:     []Header{{"Server", "cloudflare"}},
		RequestBodyPreview:  `{"model":"claude"}`,
		ResponseBodyPreview: "\x00\xff binary \xfe",

		Count:  3,
		Detail: "free text",
	}
}

func fullDNS() *DNS {
	return &DNS{
		QName:         "example.com",
		QType:         "AAAA",
		Transport:     TransportUDP,
		Decision:      Denied,
		Reason:        "not in the allow list",
		MatchedRule:   "default deny",
		Answer:        "NXDOMAIN",
		ResolverAsked: netip.MustParseAddr("2001:db8::53"),
		Count:         1 << 33,
	}
}

func fullModelCall() *ModelCall {
	return &ModelCall{
		Provider:            "anthropic",
		Domain:              "api.anthropic.com",
		Model:               "claude-sonnet-4",
		Method:              "POST",
		Path:                "/v1/messages",
		Stream:              true,
		SystemPromptPreview: "You are a helpful agent.",
		MessagesCount:       7,
		ToolsCount:          12,
		RequestBytes:        23456,
		RequestBodyPreview:  `{"model":"claude-sonnet-4","stream":true}`,
		MessageID:           "msg_01XYZ",
		StatusCode:          200,
		TextContent:         "Let me look at the file.",
		ThinkingContent:     "The user wants \x00\xff bytes",
		StopReason:          "tool_use",
		InputTokens:         1500,
		OutputTokens:        320,
		CacheReadTokens:     1 << 40,
		CacheWriteTokens:    64,
		Duration:            2718 * time.Millisecond,
		ResponseBytes:       9876,
		CostUSD:             0.0123456789,
		TraceID:             "trace-7",
		UsageDetails:        `{"input_tokens":1500,"output_tokens":320}`,
		ToolCalls: []ToolCall{
			{Index: 0, CallID: "toolu_01", Name: "bash", Arguments: `{"command":"ls"}`, Origin: "native"},
			{Index: 1, CallID: "toolu_02", Name: "read_file", Arguments: strings.Repeat("x", 300), Origin: "mcp"},
			{}, // every field zero: still one element
			{Index: -1, Name: "odd"},
		},
		ToolResults: []ToolResult{
			{CallID: "toolu_00", ContentPreview: "file1\nfile2", IsError: false},
			{CallID: "toolu_0a", ContentPreview: "permission denied", IsError: true},
			{},
		},
	}
}

func fullExec() *Exec {
	return &Exec{
		Argv:     []string{"sh", "-c", "echo 'hi' > out.txt", "", "é\x00\xff"},
		Dir:      "/workspace/sub dir",
		TTY:      true,
		PID:      4242,
		Start:    time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC),
		Duration: 1234567 * time.Microsecond,
		ExitCode: 137,
		Signal:   "KILL",
	}
}

func fullFS() *FS {
	return &FS{Action: FSRenamed, Path: "src/new name.go", OldPath: "src/old.go", Size: 1 << 33, Dir: true,
		GuestTime: time.Date(2000, 1, 1, 0, 0, 0, 1, time.UTC)}
}

func fullAgent() *Agent {
	return &Agent{State: AgentRateLimited, Detail: "fs events over 1000/s", Count: 12345}
}

func roundTrip(t *testing.T, ev Event) Event {
	t.Helper()
	v := appendEvent(nil, &ev)
	var got Event
	if err := decodeEvent(v, &got); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return got
}

func TestCodecRoundTrip(t *testing.T) {
	now := time.Unix(0, time.Now().UnixNano())
	cases := []Event{
		{Time: now, Kind: KindNet, Net: fullNet()},
		{Time: now, Kind: KindDNS, DNS: fullDNS()},
		{Time: now, Kind: KindNet, Net: &Net{}},
		{Time: now, Kind: KindDNS, DNS: &DNS{}},
		{Time: now, Kind: KindNet, Net: &Net{StatusCode: -1, BytesSent: -5, Duration: -time.Second, Count: 1 << 62,
			IP: netip.MustParseAddr("::ffff:1.2.3.4"), Port: 65535}},
		{Time: now, Kind: KindNet, Net: &Net{HTTPVersion: HTTP3, Method: "GET", Transport: TransportUDP}},
		{Time: now, Kind: KindNet, Net: &Net{HTTPVersion: HTTP10}},
		{Time: now, Kind: KindNet, Net: &Net{HTTPVersion: "HTTP/9"}},          // not one of the usual values: kept as written
		{Time: now, Kind: KindNet, Net: &Net{Method: "GET", StatusCode: 200}}, // a request without a version
		{Time: now, Kind: KindModelCall, ModelCall: fullModelCall()},
		{Time: now, Kind: KindModelCall, ModelCall: &ModelCall{}},
		{Time: now, Kind: KindModelCall, ModelCall: &ModelCall{Model: "gpt-5", CostUSD: 3, Stream: false,
			ToolCalls: []ToolCall{{CallID: "c1"}}}}, // no tool results
		{Time: now, Kind: KindModelCall, ModelCall: &ModelCall{Provider: "openai", CostUSD: -0.5, StatusCode: -1,
			MessagesCount: -3, Duration: -time.Second, ToolResults: []ToolResult{{CallID: "c1", IsError: true}}}}, // no tool calls
		{Time: now, Kind: KindExec, Exec: fullExec()},
		{Time: now, Kind: KindExec, Exec: &Exec{}},
		{Time: now, Kind: KindExec, Exec: &Exec{Argv: []string{""}, Start: time.Unix(0, 0).UTC(), ExitCode: -1, PID: -2, Duration: -time.Second}},
		{Time: now, Kind: KindExec, Exec: &Exec{Argv: []string{"ls"}, Start: time.Unix(-1, 5).UTC()}}, // before the epoch
		{Time: now, Kind: KindFS, FS: fullFS()},
		{Time: now, Kind: KindFS, FS: &FS{}},
		{Time: now, Kind: KindFS, FS: &FS{Action: FSDeleted, Path: "a/b", Size: -1}},
		{Time: now, Kind: KindFS, FS: &FS{Action: "a new action", Path: "."}},
		{Time: now, Kind: KindFS, FS: &FS{Action: FSCreated, GuestTime: time.Unix(0, 0).UTC()}}, // the epoch is a time
		{Time: now, Kind: KindFS, FS: &FS{GuestTime: time.Unix(-5, 7).UTC()}},
		{Time: now, Kind: KindDNS, DNS: &DNS{QName: "x.test", Count: -1}},
		{Time: now, Kind: KindAgent, Agent: fullAgent()},
		{Time: now, Kind: KindAgent, Agent: &Agent{}},
		{Time: now, Kind: KindAgent, Agent: &Agent{State: "a new state", Count: -3}},
		{Time: now, Kind: KindAgent, Agent: &Agent{State: AgentViolation, Detail: "frame of 70000 bytes over the 65536 cap"}},
		{Time: now, Kind: KindRecording, Recording: &Recording{State: RecordingUnstored, Count: 1 << 40, Detail: "101 events not stored"}},
		{Time: now, Kind: KindRecording, Recording: &Recording{}},
		{Time: now, Kind: KindRecording, Recording: &Recording{State: "a new state", Count: -1}},
		{Time: now, Kind: KindMCPCall, MCPCall: &MCPCall{ServerName: "mcp.example.com/mcp", Method: "tools/call", ToolName: "read_file",
			RequestID: `"req-7"`, RequestPreview: `{"path":"/etc"}`, ResponsePreview: `{"content":[]}`, Decision: Denied, Reason: "mcp-tool-denied",
			MatchedRule: "mcp.rules[2] (line 16)", Duration: 1500 * time.Microsecond, ErrorMessage: "capsem: denied", BytesSent: 120, BytesReceived: 1 << 33}},
		{Time: now, Kind: KindMCPCall, MCPCall: &MCPCall{}},
		{Time: now, Kind: KindMCPCall, MCPCall: &MCPCall{Method: "a/new/method", RequestID: "12", Decision: "a new decision", Duration: -1}},
		{Time: now, Kind: "http"},
		{},
	}
	for i, ev := range cases {
		got := roundTrip(t, ev)
		if !got.Time.Equal(ev.Time) {
			t.Errorf("case %d: time %v, want %v", i, got.Time, ev.Time)
		}
		got.Time, ev.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, ev) {
			t.Errorf("case %d:\n got %+v\nwant %+v", i, got, ev)
			if got.Net != nil && ev.Net != nil {
				t.Errorf("net:\n got %+v\nwant %+v", *got.Net, *ev.Net)
			}
			if got.ModelCall != nil && ev.ModelCall != nil {
				t.Errorf("model call:\n got %+v\nwant %+v", *got.ModelCall, *ev.ModelCall)
			}
			if got.Exec != nil && ev.Exec != nil {
				t.Errorf("exec:\n got %+v\nwant %+v", *got.Exec, *ev.Exec)
			}
			if got.FS != nil && ev.FS != nil {
				t.Errorf("fs:\n got %+v\nwant %+v", *got.FS, *ev.FS)
			}
			if got.Recording != nil && ev.Recording != nil {
				t.Errorf("recording:\n got %+v\nwant %+v", *got.Recording, *ev.Recording)
			}
			if got.Agent != nil && ev.Agent != nil {
				t.Errorf("agent:\n got %+v\nwant %+v", *got.Agent, *ev.Agent)
			}
			if got.MCPCall != nil && ev.MCPCall != nil {
				t.Errorf("mcp call:\n got %+v\nwant %+v", *got.MCPCall, *ev.MCPCall)
			}
		}
	}
}

// Fields and kinds added later must be readable by this build: unknown
// field numbers are skipped, an unknown kind comes back without payload.
func TestCodecForwardCompatible(t *testing.T) {
	ev := Event{Time: time.Unix(1, 0), Kind: KindNet, Net: &Net{Domain: "a.example", Port: 80}}
	v := appendEvent(nil, &ev)
	v = appendString(v, 99, "a new net field")
	v = appendUint(v, 100, 12345)
	v = appendString(v, 40, "a new dns-block field")
	v = appendString(v, 130, "an http field")
	var got Event
	if err := decodeEvent(v, &got); err != nil {
		t.Fatalf("decode with unknown fields: %v", err)
	}
	if got.Net == nil || got.Net.Domain != "a.example" || got.Net.Port != 80 {
		t.Fatalf("got %+v", got.Net)
	}

	fut := Event{Time: time.Unix(1, 0), Kind: "a_future_kind"}
	v = appendEvent(nil, &fut)
	v = appendString(v, 400, "a new kind's field")
	v = appendUint(v, 1000, 1)
	got = Event{}
	if err := decodeEvent(v, &got); err != nil {
		t.Fatalf("decode future kind: %v", err)
	}
	if got.Kind != "a_future_kind" || got.DNS != nil || got.Net != nil || got.ModelCall != nil || got.Exec != nil || got.FS != nil || got.Agent != nil || got.Recording != nil || got.MCPCall != nil {
		t.Fatalf("future kind decoded as %+v", got)
	}

	// Exec and fs events with fields added later in their blocks.
	x := Event{Time: time.Unix(1, 0), Kind: KindExec, Exec: &Exec{Argv: []string{"true"}, ExitCode: 1}}
	v = appendEvent(nil, &x)
	v = appendString(v, 300, "a new exec field")
	v = appendUint(v, 319, 9)
	v = appendString(v, fExecArgv, "more")
	got = Event{}
	if err := decodeEvent(v, &got); err != nil {
		t.Fatalf("decode exec with unknown fields: %v", err)
	}
	if want := (&Exec{Argv: []string{"true", "more"}, ExitCode: 1}); !reflect.DeepEqual(got.Exec, want) || got.FS != nil {
		t.Fatalf("exec decoded as %+v (fs %+v), want %+v", got.Exec, got.FS, want)
	}
	f := Event{Time: time.Unix(1, 0), Kind: KindFS, FS: &FS{Action: FSCreated, Path: "a"}}
	v = appendEvent(nil, &f)
	v = appendString(v, 350, "a new fs field")
	v = appendUint(v, 383, 9)
	got = Event{}
	if err := decodeEvent(v, &got); err != nil {
		t.Fatalf("decode fs with unknown fields: %v", err)
	}
	if want := (&FS{Action: FSCreated, Path: "a"}); !reflect.DeepEqual(got.FS, want) || got.Exec != nil {
		t.Fatalf("fs decoded as %+v (exec %+v), want %+v", got.FS, got.Exec, want)
	}

	// A model call with fields added later, at the top level and inside
	// its tool calls and tool results.
	mc := Event{Time: time.Unix(1, 0), Kind: KindModelCall, ModelCall: &ModelCall{Model: "m", InputTokens: 5}}
	v = appendEvent(nil, &mc)
	v = appendString(v, 250, "a new model-call field")
	v = appendUint(v, 251, 7)
	v = appendTag(v, fMCToolCall, wireBytes)
	start := len(v)
	v = appendString(v, fToolCallID, "c9")
	v = appendString(v, 6, "a new tool-call field")
	v = appendUint(v, 7, 1)
	v = appendInt(v, fToolIndex, 2)
	v = prefixLength(v, start)
	v = appendTag(v, fMCToolResult, wireBytes)
	start = len(v)
	v = appendUint(v, 9, 99)
	v = appendBool(v, fResultIsError, true)
	v = appendString(v, 4, "a new tool-result field")
	v = prefixLength(v, start)
	got = Event{}
	if err := decodeEvent(v, &got); err != nil {
		t.Fatalf("decode model call with unknown fields: %v", err)
	}
	want := &ModelCall{Model: "m", InputTokens: 5, ToolCalls: []ToolCall{{CallID: "c9", Index: 2}}, ToolResults: []ToolResult{{IsError: true}}}
	if !reflect.DeepEqual(got.ModelCall, want) {
		t.Fatalf("got %+v, want %+v", got.ModelCall, want)
	}

	// A known kind whose payload has no field set (every field zero).
	v = appendEvent(nil, &Event{Time: time.Unix(1, 0), Kind: KindModelCall})
	got = Event{}
	if err := decodeEvent(v, &got); err != nil || !reflect.DeepEqual(got.ModelCall, &ModelCall{}) {
		t.Fatalf("bare model call decoded as %+v (%v), want an empty payload", got.ModelCall, err)
	}
	for _, k := range []Kind{KindExec, KindFS, KindAgent, KindRecording, KindMCPCall} {
		v = appendEvent(nil, &Event{Time: time.Unix(1, 0), Kind: k})
		got = Event{}
		if err := decodeEvent(v, &got); err != nil || (k == KindExec) != (got.Exec != nil) || (k == KindFS) != (got.FS != nil) ||
			(k == KindAgent) != (got.Agent != nil) || (k == KindRecording) != (got.Recording != nil) || (k == KindMCPCall) != (got.MCPCall != nil) {
			t.Fatalf("bare %s decoded as %+v (%v), want an empty payload", k, got, err)
		}
	}

	// An agent event with fields added later in its block.
	a := Event{Time: time.Unix(1, 0), Kind: KindAgent, Agent: &Agent{State: AgentSilent}}
	v = appendEvent(nil, &a)
	v = appendString(v, 400, "a new agent field")
	v = appendUint(v, 447, 9)
	got = Event{}
	if err := decodeEvent(v, &got); err != nil || !reflect.DeepEqual(got.Agent, &Agent{State: AgentSilent}) {
		t.Fatalf("agent with unknown fields decoded as %+v (%v)", got.Agent, err)
	}
	r := Event{Time: time.Unix(1, 0), Kind: KindRecording, Recording: &Recording{State: RecordingResumed}}
	v = appendEvent(nil, &r)
	v = appendString(v, 500, "a new recording field")
	v = appendUint(v, 511, 9)
	got = Event{}
	if err := decodeEvent(v, &got); err != nil || !reflect.DeepEqual(got.Recording, &Recording{State: RecordingResumed}) || got.Agent != nil {
		t.Fatalf("recording with unknown fields decoded as %+v (%v)", got.Recording, err)
	}
}

// TestCodecOldRecords: records written before DNS.Count, FS.GuestTime and
// the agent kind existed (the bytes below are what the encoder of commit
// 71f42db wrote), and before Net.HTTPVersion existed (commit ba12063),
// decode as before, with the new fields zero.
func TestCodecOldRecords(t *testing.T) {
	cases := []struct {
		why  string
		hex  string
		want Event
	}{
		{"a denied DNS query has no count: it stands for one query",
			"0117979cfe362a00050a03646e73820106612e746573748a0101419201037564709a010664656e696564b201084e58444f4d41494eba0104c6120001",
			Event{Time: time.Unix(1700000000, 5).UTC(), Kind: KindDNS, DNS: &DNS{QName: "a.test", QType: "A",
				Transport: TransportUDP, Decision: Denied, Answer: "NXDOMAIN", ResolverAsked: netip.MustParseAddr("198.18.0.1")}}},
		{"a file event has no guest time: Time is all there is",
			"0117979cfe362a00060a026673821407637265617465648a1403782f79981406",
			Event{Time: time.Unix(1700000000, 6).UTC(), Kind: KindFS, FS: &FS{Action: FSCreated, Path: "x/y", Size: 3}}},
		{"a request the MITM recorded has no HTTP version: it reads as \"\", as a flow's does",
			"0117979cfe362a00070a036e6574820406612e746573748a0404c61300079004bb039a0404c6120002a004c0b802aa0403746370b204056874747073ba0407616c6c6f776564d20403474554da04022f78e8049003a80502",
			Event{Time: time.Unix(1700000000, 7).UTC(), Kind: KindNet, Net: &Net{Domain: "a.test", IP: netip.MustParseAddr("198.19.0.7"), Port: 443,
				SrcIP: netip.MustParseAddr("198.18.0.2"), SrcPort: 40000, Transport: TransportTCP, ConnType: ConnHTTPS, Decision: Allowed,
				Method: "GET", Path: "/x", StatusCode: 200, Count: 1}}},
	}
	for _, c := range cases {
		v, err := hex.DecodeString(c.hex)
		if err != nil {
			t.Fatal(err)
		}
		var got Event
		if err := decodeEvent(v, &got); err != nil {
			t.Errorf("%s: %v", c.why, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.why, got, c.want)
		}
		// And the same event encodes to the same bytes: zero new fields
		// are not written.
		if again := hex.EncodeToString(appendEvent(nil, &c.want)); again != c.hex {
			t.Errorf("%s: re-encoded as %s", c.why, again)
		}
	}
}

// TestCodecFieldBlocks: every field number sits in its payload's block,
// and the blocks do not overlap.
func TestCodecFieldBlocks(t *testing.T) {
	blocks := []struct {
		name          string
		lo, hi, known int
		first         int
	}{
		{"dns", dnsLo, dnsHi, dnsKnown, fDNSQName},
		{"net", netLo, netHi, netKnown, fNetDomain},
		{"model_call", mcLo, mcHi, mcKnown, fMCProvider},
		{"exec", execLo, execHi, execKnown, fExecArgv},
		{"fs", fsLo, fsHi, fsKnown, fFSAction},
		{"agent", agentLo, agentHi, agentKnown, fAgentState},
		{"recording", recLo, recHi, recKnown, fRecState},
	}
	for i, b := range blocks {
		if b.first < b.lo || b.known >= b.hi || b.first > b.known {
			t.Errorf("%s: fields %d..%d outside the block [%d, %d)", b.name, b.first, b.known, b.lo, b.hi)
		}
		if i > 0 && b.lo < blocks[i-1].hi {
			t.Errorf("%s: block [%d, %d) overlaps %s's", b.name, b.lo, b.hi, blocks[i-1].name)
		}
		for num := b.first; num <= b.known; num++ {
			if n := wireTypesRefused(num); n != 1 {
				t.Errorf("%s: field %d has no wire type (%d of the 2 refused)", b.name, num, n)
			}
		}
	}
}

// wireTypesRefused decodes field num once as a varint and once as bytes,
// each with an empty value, and says how many of the two were refused for
// their wire type: 1 for a field the decoder knows, 0 for one it skips.
func wireTypesRefused(num int) int {
	n := 0
	for _, val := range [][]byte{appendTag(nil, num, wireVarint), appendTag(nil, num, wireBytes)} {
		v := append(appendEvent(nil, &Event{}), val...)
		v = append(v, 0)
		var ev Event
		if err := decodeEvent(v, &ev); err != nil && strings.Contains(err.Error(), "wire type") {
			n++
		}
	}
	return n
}

// TestExecStart: the start time keeps its nanoseconds, the epoch is not
// the zero time, and it reads back in UTC.
func TestExecStart(t *testing.T) {
	for _, st := range []time.Time{
		{}, time.Unix(0, 0), time.Unix(0, 1), time.Unix(-1, 999999999),
		time.Date(2026, 5, 1, 14, 0, 0, 7, time.FixedZone("CEST", 2*3600)),
	} {
		got := roundTrip(t, Event{Kind: KindExec, Exec: &Exec{Start: st}})
		if !got.Exec.Start.Equal(st) || got.Exec.Start.IsZero() != st.IsZero() {
			t.Errorf("start %v read back as %v", st, got.Exec.Start)
		}
		if !st.IsZero() && got.Exec.Start.Location() != time.UTC {
			t.Errorf("start %v read back in %v, want UTC", st, got.Exec.Start.Location())
		}
	}
}

// Floats: round values are short, NaN and Inf are never written and never
// read back, and -0 is 0.
func TestCodecFloat(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want float64
		size int // bytes of tag + value
	}{
		{0, 0, 0}, {math.Copysign(0, -1), 0, 0}, {math.NaN(), 0, 0}, {math.Inf(1), 0, 0}, {math.Inf(-1), 0, 0},
		{0.5, 0.5, 2 + 3}, {3, 3, 2 + 2}, {-2.25, -2.25, 2 + 2}, {0.0123456789, 0.0123456789, 2 + 10},
		{math.MaxFloat64, math.MaxFloat64, 2 + 10}, {math.SmallestNonzeroFloat64, math.SmallestNonzeroFloat64, 2 + 9},
	} {
		b := appendFloat(nil, fMCCostUSD, c.v)
		if len(b) != c.size {
			t.Errorf("%v: %d bytes, want %d", c.v, len(b), c.size)
		}
		got := roundTrip(t, Event{Kind: KindModelCall, ModelCall: &ModelCall{CostUSD: c.v}})
		if got.ModelCall.CostUSD != c.want || math.Signbit(got.ModelCall.CostUSD) != math.Signbit(c.want) {
			t.Errorf("%v read back as %v, want %v", c.v, got.ModelCall.CostUSD, c.want)
		}
	}
	// A NaN written by hand is read as 0.
	v := appendEvent(nil, &Event{Kind: KindModelCall})
	v = appendUint(v, fMCCostUSD, bits.ReverseBytes64(math.Float64bits(math.NaN())))
	var ev Event
	if err := decodeEvent(v, &ev); err != nil || ev.ModelCall.CostUSD != 0 {
		t.Errorf("NaN cost read as %v (%v), want 0", ev.ModelCall.CostUSD, err)
	}
}

// Encoding into a buffer with room allocates nothing, model calls included.
func TestEncodeAllocs(t *testing.T) {
	for _, ev := range []Event{
		{Time: time.Now(), Kind: KindNet, Net: fullNet()},
		{Time: time.Now(), Kind: KindModelCall, ModelCall: fullModelCall()},
		{Time: time.Now(), Kind: KindExec, Exec: fullExec()},
		{Time: time.Now(), Kind: KindFS, FS: fullFS()},
		{Time: time.Now(), Kind: KindAgent, Agent: fullAgent()},
		{Time: time.Now(), Kind: KindDNS, DNS: fullDNS()},
	} {
		buf := make([]byte, 0, 4096)
		if n := testing.AllocsPerRun(100, func() { buf = appendEvent(buf[:0], &ev) }); n != 0 {
			t.Errorf("%s: %v allocations per encoding, want 0", ev.Kind, n)
		}
	}
}

func TestDecodeGarbage(t *testing.T) {
	good := appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindNet, Net: fullNet()})
	hdr := func(rest ...byte) []byte {
		b := []byte{eventVersion}
		b = binary.BigEndian.AppendUint64(b, 42)
		return append(b, rest...)
	}
	cases := []struct {
		name string
		v    []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrCorrupt, "empty"},
		{"version 0", []byte{0, 1, 2}, ErrUnknownVersion, "version 0"},
		{"version 99", append([]byte{99}, good[1:]...), ErrUnknownVersion, "version 99"},
		{"short header", []byte{eventVersion, 1, 2}, ErrCorrupt, "header"},
		{"truncated", good[:len(good)-3], ErrCorrupt, ""},
		{"bad varint", hdr(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), ErrCorrupt, "varint"},
		{"field zero", hdr(0x02, 0x00), ErrCorrupt, "field number 0"},
		{"wire type 5", hdr(byte(fKind<<3 | 5)), ErrCorrupt, "wire type"},
		{"length past end", hdr(byte(fKind<<3|wireBytes), 50, 'n'), ErrCorrupt, "past the end"},
		{"kind as varint", hdr(byte(fKind<<3|wireVarint), 1), ErrCorrupt, "wire type"},
		{"bad address", hdr(append(appendTag(nil, fNetIP, wireBytes), 3, 7, 1, 2)...), ErrCorrupt, "address of 3 bytes"},
		{"port too big", hdr(append(appendTag(nil, fNetPort, wireVarint), binary.AppendUvarint(nil, 70000)...)...), ErrCorrupt, "port"},
		{"bad header", hdr(append(appendTag(nil, fNetRequestHeader, wireBytes), 2, 9, 'x')...), ErrCorrupt, "header"},
		{"stream as bytes", hdr(append(appendTag(nil, fMCStream, wireBytes), 1, 1)...), ErrCorrupt, "wire type"},
		{"model as varint", hdr(append(appendTag(nil, fMCModel, wireVarint), 1)...), ErrCorrupt, "wire type"},
		{"cost as bytes", hdr(appendString(nil, fMCCostUSD, "12345678")...), ErrCorrupt, "wire type"},
		{"tool call as varint", hdr(appendUint(nil, fMCToolCall, 1)...), ErrCorrupt, "wire type"},
		{"tool call index as bytes", hdr(append(appendTag(nil, fMCToolCall, wireBytes), 3, fToolIndex<<3|wireBytes, 1, 'x')...), ErrCorrupt, "tool call"},
		{"tool call name as varint", hdr(append(appendTag(nil, fMCToolCall, wireBytes), 2, fToolName<<3|wireVarint, 1)...), ErrCorrupt, "tool call"},
		{"tool call truncated", hdr(append(appendTag(nil, fMCToolCall, wireBytes), 3, fToolName<<3|wireBytes, 5, 'x')...), ErrCorrupt, "past the end"},
		{"tool call field zero", hdr(append(appendTag(nil, fMCToolCall, wireBytes), 2, 0x02, 0)...), ErrCorrupt, "field number 0"},
		{"tool result wire type 5", hdr(append(appendTag(nil, fMCToolResult, wireBytes), 1, fResultCallID<<3|5)...), ErrCorrupt, "tool result"},
		{"tool result is_error as bytes", hdr(append(appendTag(nil, fMCToolResult, wireBytes), 3, fResultIsError<<3|wireBytes, 1, 1)...), ErrCorrupt, "tool result"},
		{"argv as varint", hdr(appendUint(nil, fExecArgv, 1)...), ErrCorrupt, "wire type"},
		{"argv past end", hdr(append(appendTag(nil, fExecArgv, wireBytes), 9, 'l', 's')...), ErrCorrupt, "past the end"},
		{"tty as bytes", hdr(appendString(nil, fExecTTY, "1")...), ErrCorrupt, "wire type"},
		{"start as bytes", hdr(appendString(nil, fExecStart, "12345678")...), ErrCorrupt, "wire type"},
		{"exit code as bytes", hdr(appendString(nil, fExecExitCode, "0")...), ErrCorrupt, "wire type"},
		{"signal as varint", hdr(appendUint(nil, fExecSignal, 9)...), ErrCorrupt, "wire type"},
		{"fs action as varint", hdr(appendUint(nil, fFSAction, 1)...), ErrCorrupt, "wire type"},
		{"fs size as bytes", hdr(appendString(nil, fFSSize, "big")...), ErrCorrupt, "wire type"},
		{"fs dir as bytes", hdr(appendString(nil, fFSDir, "y")...), ErrCorrupt, "wire type"},
		{"fs path truncated varint", hdr(append(appendTag(nil, fFSPath, wireBytes), 0x80)...), ErrCorrupt, "varint"},
		{"fs guest time as bytes", hdr(appendString(nil, fFSGuestTime, "2000")...), ErrCorrupt, "wire type"},
		{"dns count as bytes", hdr(appendString(nil, fDNSCount, "5")...), ErrCorrupt, "wire type"},
		{"agent state as varint", hdr(appendUint(nil, fAgentState, 1)...), ErrCorrupt, "wire type"},
		{"agent count as bytes", hdr(appendString(nil, fAgentCount, "1")...), ErrCorrupt, "wire type"},
		{"recording state as varint", hdr(appendUint(nil, fRecState, 1)...), ErrCorrupt, "wire type"},
		{"recording count as bytes", hdr(appendString(nil, fRecCount, "1")...), ErrCorrupt, "wire type"},
		{"agent detail past end", hdr(append(appendTag(nil, fAgentDetail, wireBytes), 9, 'x')...), ErrCorrupt, "past the end"},
	}
	for _, c := range cases {
		var ev Event
		err := decodeEvent(c.v, &ev)
		if err == nil {
			t.Errorf("%s: decoded without error: %+v", c.name, ev)
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %q does not wrap %v", c.name, err, c.want)
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.msg)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindNet, Net: fullNet()}))
	f.Add(appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindDNS, DNS: fullDNS()}))
	f.Add(appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindModelCall, ModelCall: fullModelCall()}))
	f.Add(appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindModelCall}))
	f.Add(appendEvent(nil, &Event{Kind: KindModelCall, ModelCall: &ModelCall{CostUSD: 0.5,
		ToolCalls: []ToolCall{{}}, ToolResults: []ToolResult{{CallID: "c", IsError: true}}}}))
	f.Add(appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindExec, Exec: fullExec()}))
	f.Add(appendEvent(nil, &Event{Kind: KindExec, Exec: &Exec{Argv: []string{"", ""}, Start: time.Unix(0, 0)}}))
	f.Add(appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindFS, FS: fullFS()}))
	f.Add(appendEvent(nil, &Event{Kind: KindFS}))
	f.Add(appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindAgent, Agent: fullAgent()}))
	f.Add(appendEvent(nil, &Event{Kind: KindAgent, Agent: &Agent{State: AgentViolation, Detail: "\x1b]0;x\x07"}}))
	f.Add(appendEvent(nil, &Event{Kind: KindAgent}))
	f.Add(appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindRecording, Recording: &Recording{State: RecordingUnstored, Count: 3, Detail: "d"}}))
	f.Add(appendEvent(nil, &Event{Kind: KindRecording}))
	f.Add(appendEvent(nil, &Event{Time: time.Unix(6, 0), Kind: KindMCPCall, MCPCall: &MCPCall{ServerName: "s", Method: "tools/call", ToolName: "t", Duration: 5}}))
	f.Add(appendEvent(nil, &Event{Kind: KindDNS, DNS: &DNS{QName: "a\x1b[8m\nb", Count: 7}}))
	f.Add(appendEvent(nil, &Event{Kind: KindNet, Net: &Net{HTTPVersion: HTTP3, Method: "GET"}}))
	f.Add(appendEvent(nil, &Event{Kind: KindFS, FS: &FS{GuestTime: time.Unix(0, 0)}}))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a})
	f.Fuzz(func(t *testing.T, v []byte) {
		var ev Event
		if err := decodeEvent(v, &ev); err != nil {
			return
		}
		// Whatever decodes must encode, and from then on round-trip
		// unchanged (the first pass may drop empty, non-canonical fields).
		once := roundTrip(t, ev)
		twice := roundTrip(t, once)
		if !twice.Time.Equal(once.Time) {
			t.Fatalf("time changed: %v != %v", twice.Time, once.Time)
		}
		once.Time, twice.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(once, twice) {
			t.Fatalf("not stable:\n%+v\n%+v", once, twice)
		}
	})
}

func BenchmarkEncodeNet(b *testing.B) {
	ev := Event{Time: time.Now(), Kind: KindNet, Net: fullNet()}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendEvent(buf[:0], &ev)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkEncodeModelCall(b *testing.B) {
	ev := Event{Time: time.Now(), Kind: KindModelCall, ModelCall: fullModelCall()}
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendEvent(buf[:0], &ev)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeModelCall(b *testing.B) {
	v := appendEvent(nil, &Event{Time: time.Now(), Kind: KindModelCall, ModelCall: fullModelCall()})
	b.ReportAllocs()
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		var ev Event
		if err := decodeEvent(v, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeNet(b *testing.B) {
	v := appendEvent(nil, &Event{Time: time.Now(), Kind: KindNet, Net: fullNet()})
	b.ReportAllocs()
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		var ev Event
		if err := decodeEvent(v, &ev); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeExec(b *testing.B) {
	ev := Event{Time: time.Now(), Kind: KindExec, Exec: fullExec()}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendEvent(buf[:0], &ev)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeFS(b *testing.B) {
	v := appendEvent(nil, &Event{Time: time.Now(), Kind: KindFS, FS: &FS{Action: FSModified, Path: "src/main.go", Size: 4096}})
	b.ReportAllocs()
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		var ev Event
		if err := decodeEvent(v, &ev); err != nil {
			b.Fatal(err)
		}
	}
}
