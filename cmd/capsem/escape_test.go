package main

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/capsem/capsem/store"
)

func TestDisplay(t *testing.T) {
	for _, c := range []struct {
		in, want, why string
	}{
		{"api.example.com", "api.example.com", "plain text is left alone"},
		{"café 日本 ünïcode", "café 日本 ünïcode", "printable text of any script is kept"},
		{"a b\u3000c", "a b\u3000c", "spaces are kept"},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`, "OSC: would retitle the terminal"},
		{"\x1b[8mhidden", `\x1b[8mhidden`, "CSI: would hide what follows"},
		{"row\nFORGED\rX\ty", `row\nFORGED\rX\ty`, "line breaks and tabs would forge rows and columns"},
		{"\x00\x7f", `\x00\x7f`, "NUL and DEL"},
		{"\u009b31m", `\u009b31m`, "C1 CSI"},
		{"evil\u202etxt.exe\u2066", `evil\u202etxt.exe\u2066`, "bidi overrides and isolates reorder the text"},
		{"a\u200bb\ufeff", `a\u200bb\ufeff`, "zero-width and BOM hide characters"},
		{"l1\u2028l2", `l1\u2028l2`, "line separator"},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`, "invalid UTF-8, byte by byte"},
		{`C:\dir\x1b`, `C:\\dir\\x1b`, "a backslash is doubled: escaped text reads back unambiguously"},
		{"\U000e0001tag", `\U000e0001tag`, "a format character above the BMP"},
		{"", "", "empty"},
	} {
		if got := display(c.in); got != c.want {
			t.Errorf("display(%q) = %q, want %q: %s", c.in, got, c.want, c.why)
		}
	}
}

func TestDisplayMessage(t *testing.T) {
	for _, c := range []struct {
		in, want, why string
	}{
		{"boot the guest: x\nlast lines:\n  a", "boot the guest: x\nlast lines:\n  a", "the message's own lines are kept"},
		{`start ["sh" "-c" "echo \"hi\""]`, `start ["sh" "-c" "echo \"hi\""]`, "%q's backslashes are kept, not doubled"},
		{"agent: \x1b]0;pwned\x07", `agent: \x1b]0;pwned\x07`, "an escape sequence from the guest is shown, not obeyed"},
		{"row\rFORGED", `row\rFORGED`, "a CR would overwrite the line"},
		{"evil\u202etxt", `evil\u202etxt`, "bidi override"},
	} {
		if got := displayMessage(c.in); got != c.want {
			t.Errorf("displayMessage(%q) = %q, want %q: %s", c.in, got, c.want, c.why)
		}
	}
}

// hostile strings a guest could get into the store, each the same length
// class as its benign twin.
var hostile = []string{
	"\x1b]0;pwned\x07", "\x1b[8m", "\nFORGED ROW  qname=ok.test\n", "\r", "\u202e", "\u009b31m", "\x7f", "\t", "\xff",
}

// terminalBytes are what must never reach the terminal raw.
var terminalBytes = []string{"\x1b", "\x07", "\r", "\x7f", "\u202e", "\u009b", "\t", "\xff"}

// guestStore writes one session whose guest-controlled strings carry the
// hostile sequences (evil) or plain letters in their place.
func guestStore(t *testing.T, evil bool) string {
	t.Helper()
	s := func(base string) string {
		if !evil {
			return base + "-plain"
		}
		return base + strings.Join(hostile, "")
	}
	dir := t.TempDir()
	st, err := openTestStore(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Begin(store.Session{ID: "20260501T120000Z-abcdef", Command: []string{"sh", "-c", s("echo")}})
	if err != nil {
		t.Fatal(err)
	}
	w.Append(store.Event{DNS: &store.DNS{QName: s("evil.test"), QType: "A", Decision: store.Denied, Answer: s("NXDOMAIN")}})
	w.Append(store.Event{Net: &store.Net{Domain: s("api.example.com"), IP: netip.MustParseAddr("198.19.0.1"), Port: 443,
		Transport: store.TransportTCP, Decision: store.Allowed, Reason: "allowed", Path: s("/v1/")}})
	w.Append(store.Event{Net: &store.Net{Domain: s("denied.test"), Transport: store.TransportTCP, Decision: store.Denied,
		Reason: s("port-not-allowed"), Port: 22, Detail: s("d")}})
	w.Append(store.Event{ModelCall: &store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", Model: s("claude"),
		ToolCalls:   []store.ToolCall{{CallID: s("toolu_1"), Name: s("bash"), Origin: "native"}},
		ToolResults: []store.ToolResult{{CallID: s("toolu_0"), ContentPreview: s("output")}}}})
	w.Append(store.Event{ModelCall: &store.ModelCall{Provider: s("openai"), Domain: "api.anthropic.com"}}) // a failed check's detail
	w.Append(store.Event{Agent: &store.Agent{State: store.AgentViolation, Detail: s("frame")}})
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
	return dir
}

func capsemOut(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	run(append([]string{"capsem"}, args...), &stdout, &stderr) // inspect exits 1 for the planted failed check
	if stdout.Len() == 0 {
		t.Fatalf("%v: no output; stderr %s", args, stderr.String())
	}
	return stdout.String()
}

// TestGuestTextIsEscaped runs `capsem inspect` and `capsem sessions` on a
// session whose query names, domains, paths, reasons, model and tool text,
// agent detail and command carry terminal escapes, line breaks, C1
// controls, bidi overrides and invalid UTF-8: no such byte reaches the
// output raw, and the output has as many lines as for a benign twin — no
// row is forged. The JSON forms carry the exact strings, \u-escaped.
func TestGuestTextIsEscaped(t *testing.T) {
	for _, args := range [][]string{{"inspect", "-n", "10"}, {"sessions"}} {
		evil := capsemOut(t, append(args, "--data", guestStore(t, true))...)
		plain := capsemOut(t, append(args, "--data", guestStore(t, false))...)
		for _, b := range terminalBytes {
			if strings.Contains(evil, b) {
				t.Errorf("capsem %s prints %q raw:\n%s", args[0], b, evil)
			}
		}
		if ne, np := strings.Count(evil, "\n"), strings.Count(plain, "\n"); ne != np {
			t.Errorf("capsem %s: %d lines for the hostile session, %d for its benign twin: a row was forged\n%s", args[0], ne, np, evil)
		}
		if strings.Contains(evil, "\nFORGED") || !strings.Contains(evil, `\x1b]0;pwned\x07`) {
			t.Errorf("capsem %s does not show the escapes escaped:\n%s", args[0], evil)
		}

		js := capsemOut(t, append(args, "--json", "--data", guestStore(t, true))...)
		for _, b := range terminalBytes {
			if strings.Contains(js, b) {
				t.Errorf("capsem %s --json prints %q raw", args[0], b)
			}
		}
		var v any
		if err := json.Unmarshal([]byte(js), &v); err != nil {
			t.Errorf("capsem %s --json: %v", args[0], err)
		}
	}
	// The JSON carries the exact command (invalid UTF-8 aside, which JSON
	// cannot carry).
	var sums []sessionSummary
	if err := json.Unmarshal([]byte(capsemOut(t, "sessions", "--json", "--data", guestStore(t, true))), &sums); err != nil {
		t.Fatal(err)
	}
	want := "echo" + strings.ReplaceAll(strings.Join(hostile, ""), "\xff", "\ufffd")
	if len(sums) != 1 || len(sums[0].Command) != 3 || sums[0].Command[2] != want {
		t.Errorf("sessions --json command %q, want %q", sums[0].Command, want)
	}
}
