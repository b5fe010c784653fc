package ui

import (
	"bytes"
	"net/netip"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/capsem/capsem/store"
)

// FuzzRowsRendering: whatever the guest puts in the strings of its events
// (a name, a path, a tool's arguments, a file name, a command), the
// timeline's markup is the same — as many '<' as with harmless text, so
// no tag, comment or script came from the guest — and a cut preview is
// still valid UTF-8 where the input was.
func FuzzRowsRendering(f *testing.F) {
	for _, s := range []string{"x", "<script>alert(1)</script>", "\"><img src=x onerror=alert(1)>", "</td></tr><tr>", "<!--", "\u202eevil", strings.Repeat("é", 300)} {
		f.Add(s)
	}
	s, err := New(nil, testToken, nil)
	if err != nil {
		f.Fatal(err)
	}
	render := func(text string) string {
		ip := netip.MustParseAddr("198.19.0.9")
		evs := []store.Event{
			{Seq: 1, DNS: &store.DNS{QName: text, QType: "A", Decision: store.Denied, Reason: text, MatchedRule: text, Answer: text}},
			{Seq: 2, Net: &store.Net{Domain: text, IP: ip, Port: 443, Method: "GET", Path: text, Decision: store.Denied, Reason: text, Detail: text}},
			{Seq: 3, ModelCall: &store.ModelCall{Provider: text, Model: text, TextContent: text, ToolCalls: []store.ToolCall{{Name: text, Arguments: text, Origin: text}}}},
			{Seq: 4, MCPCall: &store.MCPCall{ServerName: text, Method: text, ToolName: text, ErrorMessage: text}},
			{Seq: 5, Exec: &store.Exec{Argv: []string{text}}},
			{Seq: 6, FS: &store.FS{Action: text, Path: text, OldPath: text}},
		}
		var rows []row
		for i := range evs {
			rows = append(rows, rowsOf(&evs[i])...)
		}
		var b bytes.Buffer
		if err := s.tmpl.ExecuteTemplate(&b, "rows", map[string]any{"Base": s.Base(), "ID": text, "Rows": rows}); err != nil {
			f.Fatal(err)
		}
		return b.String()
	}
	// Empty strings leave out their optional parts ({{if .Reason}}…).
	want := map[bool]int{true: strings.Count(render(""), "<"), false: strings.Count(render("x"), "<")}
	f.Fuzz(func(t *testing.T, text string) {
		out := render(text)
		if got := strings.Count(out, "<"); got != want[text == ""] {
			t.Fatalf("guest text %q changed the markup: %d '<', want %d", text, got, want[text == ""])
		}
		if utf8.ValidString(text) && !utf8.ValidString(out) {
			t.Fatalf("valid guest text %q rendered as invalid UTF-8", text)
		}
	})
}
