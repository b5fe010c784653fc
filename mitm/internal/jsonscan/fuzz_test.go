package jsonscan

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
	put := func(s *Scanner, v any) {
		if len(stack) == 0 {
			root = append(root, v)
			return
		}
		top := stack[len(stack)-1]
		if top.obj != nil {
			k := string(s.Key(s.Depth() - 1))
			if len(k) >= MaxKeyBytes {
				exact = false
			}
			top.obj[k] = v
		} else {
			top.arr = append(top.arr, v)
		}
	}
	sc := New(1<<20, func(s *Scanner, k Kind) {
		fmt.Fprintf(&b, "%d/%d:", k, s.Depth())
		for i := range s.Depth() {
			if n := s.Index(i); n >= 0 {
				fmt.Fprintf(&b, "[%d]", n)
			} else {
				fmt.Fprintf(&b, ".%q", s.Key(i))
			}
		}
		switch k {
		case ObjStart:
			stack = append(stack, &open{obj: map[string]any{}})
		case ArrStart:
			stack = append(stack, &open{arr: []any{}})
		case ObjEnd, ArrEnd:
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if top.obj != nil {
				put(s, top.obj)
			} else {
				put(s, top.arr)
			}
		case String:
			fmt.Fprintf(&b, "=%q", s.Str())
			if s.StrTruncated() {
				exact = false
			}
			put(s, string(s.Str()))
		case Number:
			fmt.Fprintf(&b, "=%s", s.Num())
			if len(s.Num()) >= MaxNumberBytes {
				exact = false
			}
			put(s, json.Number(s.Num()))
		case True, False:
			put(s, k == True)
		case Null:
			put(s, nil)
		}
		b.WriteByte('\n')
	})
	for _, c := range chunks {
		sc.Write(c)
	}
	sc.Close()
	if sc.Failed() {
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
		`{"model":"claude","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":1024}`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":{"q":"x"}}}`,
	} {
		f.Add([]byte(s), uint16(3), uint16(9))
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
