package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// scanLog runs the scanner over chunks and returns its tokens as text, and
// the value they build (as encoding/json would decode it, with UseNumber).
func scanLog(chunks ...[]byte) (log string, val any, exact bool) {
	var b strings.Builder
	exact = true
	type open struct {
		obj map[string]any
		arr []any
	}
	var stack []*open
	var root []any
	put := func(s *scanner, v any) {
		if len(stack) == 0 {
			root = append(root, v)
			return
		}
		top := stack[len(stack)-1]
		if top.obj != nil {
			k := string(s.stack[len(s.stack)-1].key)
			if len(k) >= maxKeyBytes {
				exact = false
			}
			top.obj[k] = v
		} else {
			top.arr = append(top.arr, v)
		}
	}
	sc := newScanner(1<<20, func(s *scanner, k tokKind) {
		fmt.Fprintf(&b, "%d/%d:", k, s.depth())
		for _, f := range s.stack {
			if f.arr {
				fmt.Fprintf(&b, "[%d]", f.index)
			} else {
				fmt.Fprintf(&b, ".%q", f.key)
			}
		}
		switch k {
		case tokObjStart:
			stack = append(stack, &open{obj: map[string]any{}})
		case tokArrStart:
			stack = append(stack, &open{arr: []any{}})
		case tokObjEnd, tokArrEnd:
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.obj != nil {
				put(s, top.obj)
			} else {
				put(s, top.arr)
			}
		case tokString:
			fmt.Fprintf(&b, "=%q", s.str)
			if s.strTrunc {
				exact = false
			}
			put(s, string(s.str))
		case tokNumber:
			fmt.Fprintf(&b, "=%s", s.num)
			if len(s.num) >= maxNumberBytes {
				exact = false
			}
			put(s, json.Number(s.num))
		case tokTrue, tokFalse:
			put(s, k == tokTrue)
		case tokNull:
			put(s, nil)
		}
		b.WriteByte('\n')
	})
	for _, c := range chunks {
		sc.Write(c)
	}
	sc.close()
	if sc.failed {
		b.WriteString("failed\n")
	}
	if len(root) == 1 {
		val = root[0]
	} else {
		exact = false
	}
	return b.String(), val, exact
}

// FuzzScanner checks the JSON scanner: the same tokens however the input is
// cut, and for valid JSON the same value encoding/json decodes.
func FuzzScanner(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2,{"b":"c\u00e9\ud83d\ude00"}],"d":null,"e":true,"f":false,"g":-1.5e+3}`,
		`[{"x":"\\\"\/\b\f\n\r\t"}, [], {}, ""]`,
		`{"s":"\ud800x\udc00"}`,
		`  {"snake_case_key": {"nested_key": 1}}  `,
		`{"a":1}{"b":2}`,
		`{"a":`,
		`[1,]`,
	} {
		f.Add([]byte(s), uint16(3), uint16(9))
	}
	for _, name := range []string{"anthropic_request.json", "openai_responses.json", "gemini_stream_array.json"} {
		f.Add(readFixture(f, name), uint16(100), uint16(700))
	}
	f.Fuzz(func(t *testing.T, in []byte, c1, c2 uint16) {
		whole, val, exact := scanLog(in)
		i := int(c1) % (len(in) + 1)
		j := i + int(c2)%(len(in)-i+1)
		if split, _, _ := scanLog(in[:i], in[i:j], in[j:]); split != whole {
			t.Fatalf("cut at %d and %d:\n%s\nwhole:\n%s", i, j, split, whole)
		}
		if !exact || !json.Valid(in) || !utf8.Valid(in) {
			return
		}
		d := json.NewDecoder(bytes.NewReader(in))
		d.UseNumber()
		var want any
		if err := d.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(val, want) {
			t.Fatalf("scanner built %#v\nencoding/json %#v", val, want)
		}
	})
}

// FuzzCall feeds arbitrary bodies to each API: no panic, previews within
// their caps, and the same model call however the bodies are cut.
func FuzzCall(f *testing.F) {
	for i, fx := range fixtures {
		f.Add(uint8(i), readFixture(f, fx.req), readFixture(f, fx.resp), uint16(i*31))
	}
	paths := []string{"/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1beta/models/gemini-2.5-flash:streamGenerateContent"}
	types := []string{"text/event-stream", "application/json"}
	f.Fuzz(func(t *testing.T, which uint8, req, resp []byte, cut uint16) {
		path := paths[int(which)%len(paths)]
		ct := types[int(which/4)%len(types)]
		run := func(split bool) string {
			c := Detect("h", "POST", path)
			c.SetOptions(Options{PreviewBytes: 64, MaxToolArgBytes: 256})
			for _, p := range []struct {
				w  interface{ Write([]byte) (int, error) }
				in []byte
			}{{c.RequestWriter(), req}, {c.ResponseWriter(200, ct), resp}} {
				if split {
					k := int(cut) % (len(p.in) + 1)
					p.w.Write(p.in[:k])
					p.w.Write(p.in[k:])
				} else {
					p.w.Write(p.in)
				}
			}
			mc := c.Finish(200, 0, 0, 0)
			for _, s := range []string{mc.TextContent, mc.ThinkingContent, mc.SystemPromptPreview, mc.RequestBodyPreview} {
				if len(s) > 64 {
					t.Fatalf("a preview of %d bytes", len(s))
				}
			}
			for _, tc := range mc.ToolCalls {
				if len(tc.Arguments) > 256 {
					t.Fatalf("arguments of %d bytes", len(tc.Arguments))
				}
			}
			return fmt.Sprintf("%#v", mc)
		}
		if a, b := run(false), run(true); a != b {
			t.Fatalf("cut at %d:\n%s\nwhole:\n%s", cut, b, a)
		}
	})
}
