package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

const bundle = `import x from "y";
const Q = [1, 2, 3];
const E = [
  {
    id: "anthropic",
    name: 'Anthropic',
    api_pattern: "https://api\\.anthropic\\.com",
    description: ` + "`multi\nline \\u00e9`" + `,
    models: [
      {
        id: "claude-x",
        match: { or: [{ starts_with: "claude-x" }, { regex: "^(?!.*-tts)" }] },
        context_window: 2e5,
        deprecated: !1,
        prices: [
          { prices: { input_mtok: 3, output_mtok: { base: 15, tiers: [{ start: 2e5, price: 22.5 }] } } },
          { constraint: { start_date: "2026-01-01", type: "start_date" }, prices: { input_mtok: 0.5, cache_read_mtok: .05 } },
          { constraint: { start_time: "01:00Z", end_time: "02:00Z", type: "time_of_date" }, prices: { input_mtok: 9 } },
        ],
      },
      { id: "free", match: { equals: "free" }, prices: {} },
    ],
  },
], Z = function() {};
`

func TestFindProviders(t *testing.T) {
	arr, err := findProviders([]byte(bundle))
	if err != nil {
		t.Fatal(err)
	}
	p := findByID(arr, "anthropic")
	if p["description"] != "multi\nline é" || p["api_pattern"] != `https://api\.anthropic\.com` {
		t.Fatalf("strings: %q %q", p["description"], p["api_pattern"])
	}
	models := p["models"].([]any)
	var warn []string
	m, w, ok := convertModel(models[0].(map[string]any))
	warn = append(warn, w...)
	if !ok || m.ID != "claude-x" || m.Input != 3.0 || len(m.Changes) != 1 || m.Changes[0].From != "2026-01-01" || len(warn) != 1 {
		t.Fatalf("%+v %v", m, warn)
	}
	b, _ := json.Marshal(m)
	want := `{"id":"claude-x","match":{"or":[{"starts_with":"claude-x"},{"not":{"regex":"^(?:.*-tts)"}}]},"input":3,"output":{"base":15,"tiers":[{"price":22.5,"start":200000}]},"changes":[{"from":"2026-01-01","input":0.5,"cache_read":0.05}]}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	if _, _, ok := convertModel(models[1].(map[string]any)); ok {
		t.Fatal("a model without prices was kept")
	}
}

func TestJSLiterals(t *testing.T) {
	tests := map[string]any{
		`[1, -2.5, 0x10, 1_000, .5, 1e3]`:                             []any{1.0, -2.5, 16.0, 1000.0, 0.5, 1000.0},
		`{a: !0, "b": !1, 'c': null, d: void 0, 1: undefined}`:        map[string]any{"a": true, "b": false, "c": nil, "d": nil, "1": nil},
		`["\x41\u{1F600}\ud83d\ude00\'", 'it\'s', ` + "`t\\`t`" + `]`: []any{"A😀😀'", "it's", "t`t"},
		`[/* c */ 1, // d
		2,]`: []any{1.0, 2.0},
	}
	for in, want := range tests {
		p := &jsParser{s: []byte(in)}
		got, err := p.value()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %#v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"[f()]", "{a}", "`${x}`", `"unterminated`, "[1 2]", "{a: new X()}", strings.Repeat("[", 300)} {
		p := &jsParser{s: []byte(bad)}
		if _, err := p.value(); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
