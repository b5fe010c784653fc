package sqliteexport

import (
	"bytes"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/capsem/capsem/store"
)

// TestScrubFixedPlaceholders: a placeholder the policy fixed (placeholder
// = "…" in a [[secret]]) has no prefix dlp.Scrub knows; with the
// session's record holding it, an export with Scrub has no copy of it, in
// any text, in any form or case the events hold it — also in a session
// recorded before capsem kept them, which is the same policy's.
func TestScrubFixedPlaceholders(t *testing.T) {
	const fixed = "Fixed-Placeholder/For+Anthropic"
	const reloaded = "placeholder-of-a-reload-0001"
	st, err := store.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	texts := []string{fixed, "pre " + fixed + " post", url.QueryEscape(fixed), url.PathEscape(fixed), strings.ToLower(fixed) + ".evil.test", reloaded}
	write := func(w *store.Writer) {
		for _, text := range texts {
			n := &store.Net{Count: 1}
			setStrings(n, text)
			n.RequestHeaders = []store.Header{{Name: "X-Api-Key", Value: text}, {Name: "X-Other", Value: text}, {Name: text, Value: "v"}}
			w.Append(store.Event{Net: n})
			d := &store.DNS{}
			setStrings(d, text)
			w.Append(store.Event{DNS: d})
			m := &store.ModelCall{InputTokens: 1}
			setStrings(m, text)
			tc := store.ToolCall{}
			setStrings(&tc, text)
			m.ToolCalls = []store.ToolCall{tc}
			w.Append(store.Event{ModelCall: m})
			x := &store.Exec{}
			setStrings(x, text)
			x.Argv = []string{"curl", "-H", "X-Token: " + text, "https://a.test/?k=" + text}
			w.Append(store.Event{Exec: x})
			f := &store.FS{Size: 1}
			setStrings(f, text)
			w.Append(store.Event{FS: f})
		}
	}
	// A session whose policy fixed the placeholder, reloaded to one with
	// another secret; and an older one whose record has none.
	w, err := st.Begin(store.Session{ID: "fixed", Command: []string{"capsem", "run", "--", "echo", fixed},
		Placeholders: []store.Placeholder{{Name: "ANTHROPIC_API_KEY", Value: fixed}}})
	if err != nil {
		t.Fatal(err)
	}
	w.NotePlaceholders(map[string]string{"ANTHROPIC_API_KEY": fixed, "RELOADED": reloaded})
	write(w)
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	old, err := st.Begin(store.Session{ID: "older"})
	if err != nil {
		t.Fatal(err)
	}
	write(old)
	if err := old.End(nil); err != nil {
		t.Fatal(err)
	}
	sessions, err := st.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		if s.ID == "fixed" && len(s.Placeholders) != 2 {
			t.Fatalf("the session's record holds the placeholders %+v, want both", s.Placeholders)
		}
	}

	forms := []string{fixed, url.QueryEscape(fixed), url.PathEscape(fixed), reloaded}
	holds := func(path string) []string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, f := range forms {
			if bytes.Contains(bytes.ToLower(b), []byte(strings.ToLower(f))) {
				found = append(found, f)
			}
		}
		return found
	}
	raw, _ := export(t, st, Options{})
	if got := holds(raw); len(got) != len(forms) {
		t.Fatalf("the export without Scrub holds %q of %q: the test plants nothing", got, forms)
	}
	scrubbed, _ := export(t, st, Options{Scrub: true})
	if got := holds(scrubbed); len(got) != 0 {
		t.Errorf("the scrubbed export holds the placeholder in the forms %q", got)
	}
	db := openExport(t, scrubbed)
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM net_events WHERE domain LIKE '%[REDACTED:secret-placeholder]%'`).Scan(&n); err != nil || n == 0 {
		t.Errorf("no net event's domain says [REDACTED:secret-placeholder] (%d, %v)", n, err)
	}
}
