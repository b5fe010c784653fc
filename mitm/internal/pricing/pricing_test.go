package pricing

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestTableLoads(t *testing.T) {
	tb := load()
	if tb.err != nil {
		t.Fatal(tb.err)
	}
	info := About()
	if info.Models < 100 || !strings.Contains(info.Source, "genai-prices") || info.Retrieved == "" || info.Published == "" {
		t.Fatalf("About() = %+v", info)
	}
	for _, p := range []string{"anthropic", "openai", "google"} {
		if len(tb.entries[p]) < 10 {
			t.Errorf("%s: %d models", p, len(tb.entries[p]))
		}
	}
}

func TestLookup(t *testing.T) {
	tests := []struct {
		provider, model, wantID string
		in, out, cr, cw         float64
	}{
		{"anthropic", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5", 3, 15, 0.3, 3.75},
		{"anthropic", "claude-sonnet-4-5", "claude-sonnet-4-5", 3, 15, 0.3, 3.75},
		{"anthropic", "Claude-Sonnet-4-5@20250929", "claude-sonnet-4-5", 3, 15, 0.3, 3.75},
		{"anthropic", "claude-sonnet-4-20250514", "claude-sonnet-4-0", 3, 15, 0.3, 3.75},
		{"anthropic", "claude-opus-4-1-20250805", "claude-opus-4-1", 15, 75, 1.5, 18.75},
		{"anthropic", "claude-opus-4-5-20251101", "claude-opus-4-5", 5, 25, 0.5, 6.25},
		{"anthropic", "claude-haiku-4-5-20251001", "claude-haiku-4-5", 1, 5, 0.1, 1.25},
		{"anthropic", "claude-3-5-haiku-20241022", "claude-3-5-haiku-latest", 0.8, 4, 0.08, 1},
		{"anthropic", "claude-3-7-sonnet-20250219", "claude-3-7-sonnet-latest", 3, 15, 0.3, 3.75},
		{"openai", "gpt-4o", "gpt-4o", 2.5, 10, 1.25, 0},
		{"openai", "gpt-4o-2024-08-06", "gpt-4o", 2.5, 10, 1.25, 0},
		{"openai", "gpt-4o-2099-01-01", "gpt-4o", 2.5, 10, 1.25, 0}, // unknown date: longest prefix
		{"openai", "gpt-4o-mini", "gpt-4o-mini", 0.15, 0.6, 0.075, 0},
		{"openai", "gpt-4o-mini-2024-07-18", "gpt-4o-mini", 0.15, 0.6, 0.075, 0},
		{"openai", "gpt-4.1-2025-04-14", "gpt-4.1", 2, 8, 0.5, 0},
		{"openai", "gpt-5", "gpt-5", 1.25, 10, 0.125, 0},
		{"openai", "gpt-5-2025-08-07", "gpt-5", 1.25, 10, 0.125, 0},
		{"openai", "gpt-5-mini-2025-08-07", "gpt-5-mini", 0.25, 2, 0.025, 0},
		{"openai", "o4-mini", "o4-mini", 1.1, 4.4, 0.275, 0},
		{"google", "models/gemini-2.5-flash", "gemini-2.5-flash", 0.3, 2.5, 0.03, 0},
		{"google", "gemini-2.5-flash", "gemini-2.5-flash", 0.3, 2.5, 0.03, 0},
		{"google", "gemini-2.5-pro", "gemini-2.5-pro", 1.25, 10, 0.125, 0},
		{"google", "gemini-2.5-pro-preview-06-05", "gemini-2.5-pro", 1.25, 10, 0.125, 0},
		{"google", "gemini-2.5-pro-preview-tts", "gemini-2.5-pro-tts", 1, 20, 0, 0},
		{"google", "gemini-2.5-flash-lite-preview-06-17", "gemini-2.5-flash-lite", 0.1, 0.4, 0.01, 0},
		{"google", "gemini-2.0-flash", "gemini-2.0-flash", 0.1, 0.4, 0.025, 0},
		{"google", "gemini-2.0-flash-001", "gemini-2.0-flash", 0.1, 0.4, 0.025, 0},
		// A provider named wrong still finds the model in another table.
		{"openai", "claude-sonnet-4-5-20250929", "claude-sonnet-4-5", 3, 15, 0.3, 3.75},
		{"", "gpt-4o", "gpt-4o", 2.5, 10, 1.25, 0},
	}
	for _, tt := range tests {
		m, ok := Lookup(tt.provider, tt.model)
		if !ok {
			t.Errorf("%s %s: not found", tt.provider, tt.model)
			continue
		}
		if m.ID != tt.wantID {
			t.Errorf("%s %s: found %s/%s, want %s", tt.provider, tt.model, m.Provider, m.ID, tt.wantID)
			continue
		}
		got := [4]float64{m.Input.Base, m.Output.Base, m.CacheRead.Base, m.CacheWrite.Base}
		if got != [4]float64{tt.in, tt.out, tt.cr, tt.cw} {
			t.Errorf("%s: prices %v, want %v", tt.model, got, [4]float64{tt.in, tt.out, tt.cr, tt.cw})
		}
	}
}

func TestUnknown(t *testing.T) {
	for _, m := range []string{"", "   ", "llama-3.1-70b", "mistral-large", "gpt", "claude"} {
		if usd, known := Cost("openai", m, 1000, 1000, 0, 0); known || usd != 0 {
			t.Errorf("%q: %v, %v", m, usd, known)
		}
	}
}

func TestEveryModelFindsItself(t *testing.T) {
	tb := load()
	for p, es := range tb.entries {
		for _, e := range es {
			m, ok := tb.lookup(p, e.id, time.Now())
			if !ok {
				t.Errorf("%s/%s: not found by its own id", p, e.id)
				continue
			}
			if m.ID != e.id && m.Prices.Input.Base != e.at(time.Now()).Input.Base {
				t.Errorf("%s/%s: found %s with other prices", p, e.id, m.ID)
			}
		}
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestCost(t *testing.T) {
	usd, known := Cost("anthropic", "claude-sonnet-4-5-20250929", 1000, 500, 2000, 100)
	want := (1000*3 + 500*15 + 2000*0.3 + 100*3.75) / 1e6
	if !known || !near(usd, want) {
		t.Fatalf("Cost = %v, %v; want %v", usd, known, want)
	}
	// Over 200k input tokens (cache included) the long-context tier prices
	// the whole request.
	usd, _ = Cost("anthropic", "claude-sonnet-4-5", 150_000, 1000, 60_000, 0)
	want = (150_000*6 + 1000*22.5 + 60_000*0.6) / 1e6
	if !near(usd, want) {
		t.Fatalf("tiered cost = %v, want %v", usd, want)
	}
	// OpenAI has no cache-write price: such tokens cost the input price.
	usd, _ = Cost("openai", "gpt-4o", 1000, 0, 0, 1000)
	if !near(usd, 2*1000*2.5/1e6) {
		t.Fatalf("cache write without a price: %v", usd)
	}
}

func TestDatedChanges(t *testing.T) {
	tb := load()
	before, _ := tb.lookup("openai", "o3", time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC))
	after, _ := tb.lookup("openai", "o3-2025-04-16", time.Date(2025, 6, 10, 0, 0, 0, 0, time.UTC))
	if before.Input.Base != 10 || after.Input.Base != 2 {
		t.Fatalf("o3 input price before the cut %v, after %v; want 10, 2", before.Input.Base, after.Input.Base)
	}
}

func TestPriceJSON(t *testing.T) {
	if _, err := parse([]byte(`{"providers":{"x":[{"id":"m","input":{"tiers":[]}}]}}`)); err == nil {
		t.Error("a tiered price without a base was accepted")
	}
	if _, err := parse([]byte(`{"providers":{"x":[{"id":"m","match":{"regex":"(?!x)"}}]}}`)); err == nil {
		t.Error("a regex RE2 cannot run was accepted")
	}
	if _, err := parse([]byte(`{"providers":{"x":[{"id":"m","match":{"glob":"x*"}}]}}`)); err == nil {
		t.Error("an unknown match operator was accepted")
	}
	tb, err := parse([]byte(`{"providers":{"x":[{"id":"m-1","input":1,"output":2}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := tb.lookup("x", "m-1-2026", time.Now()); !ok || m.ID != "m-1" {
		t.Fatal("a model without match rules is not found by prefix")
	}
	if _, ok := tb.lookup("x", "m-10", time.Now()); ok {
		t.Fatal("a prefix that does not end at a boundary matched")
	}
}

func BenchmarkCost(b *testing.B) {
	for b.Loop() {
		Cost("anthropic", "claude-sonnet-4-5-20250929", 1000, 500, 2000, 100)
	}
}
