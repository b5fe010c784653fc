package mcpscan

import (
	"bytes"
	"encoding/json"
)

// FilterTools takes one complete JSON-RPC 2.0 response whose result has a
// tools array (a tools/list result), or a batch holding such responses, and
// returns it without the tools whose name hide reports true, and the names
// it left out. Every other byte is kept as it was, the kept tools too; only
// the tools array is written anew. ok is false, and out nil, when msg is
// not such a message. When no tool is hidden, out is msg itself.
func FilterTools(msg []byte, hide func(name string) bool) (out []byte, hidden []string, ok bool) {
	if hide == nil || !json.Valid(msg) {
		return nil, nil, false
	}
	v := bytes.TrimLeft(msg, " \t\r\n")
	if len(v) > 0 && v[0] == '[' {
		return filterBatch(msg, hide)
	}
	return filterOne(msg, hide)
}

// filterOne filters one response.
func filterOne(msg []byte, hide func(string) bool) ([]byte, []string, bool) {
	// Keys are matched exactly (encoding/json's struct fields would take
	// "Result" too), and the last of equal keys wins, as in JSON.parse.
	vs, ve, ok := member(msg, "jsonrpc")
	var version string
	if !ok || json.Unmarshal(msg[vs:ve], &version) != nil || version != "2.0" {
		return nil, nil, false
	}
	rs, re, ok := member(msg, "result")
	if !ok {
		return nil, nil, false
	}
	ts, te, ok := member(msg[rs:re], "tools")
	if !ok {
		return nil, nil, false
	}
	ts, te = rs+ts, rs+te
	var tools []json.RawMessage
	if json.Unmarshal(msg[ts:te], &tools) != nil {
		return nil, nil, false // not an array
	}
	var hidden []string
	kept := make([]json.RawMessage, 0, len(tools))
	for _, t := range tools {
		var tool map[string]json.RawMessage
		var name string
		if json.Unmarshal(t, &tool) == nil && bytes.HasPrefix(tool["name"], []byte(`"`)) &&
			json.Unmarshal(tool["name"], &name) == nil && hide(name) {
			hidden = append(hidden, name)
			continue
		}
		kept = append(kept, t)
	}
	if len(hidden) == 0 {
		return msg, nil, true
	}
	out := make([]byte, 0, len(msg))
	out = append(out, msg[:ts]...)
	out = append(out, '[')
	for i, t := range kept {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, t...)
	}
	out = append(out, ']')
	out = append(out, msg[te:]...)
	return out, hidden, true
}

// filterBatch filters each response of a batch that is a tools/list
// result; ok when one was.
func filterBatch(msg []byte, hide func(string) bool) ([]byte, []string, bool) {
	d := json.NewDecoder(bytes.NewReader(msg))
	if t, err := d.Token(); err != nil || t != json.Delim('[') {
		return nil, nil, false
	}
	var out []byte
	var hidden []string
	last, any := 0, false
	for d.More() {
		var el json.RawMessage
		if d.Decode(&el) != nil {
			return nil, nil, false
		}
		end := int(d.InputOffset())
		start := end - len(el)
		f, h, ok := filterOne(msg[start:end], hide)
		if !ok {
			continue
		}
		any = true
		if len(h) == 0 {
			continue
		}
		out = append(out, msg[last:start]...)
		out = append(out, f...)
		last = end
		hidden = append(hidden, h...)
	}
	if !any {
		return nil, nil, false
	}
	if len(hidden) == 0 {
		return msg, nil, true
	}
	return append(out, msg[last:]...), hidden, true
}

// member returns where the value of key is in the JSON object obj: the
// last such member, as encoding/json reads it.
func member(obj []byte, key string) (start, end int, ok bool) {
	d := json.NewDecoder(bytes.NewReader(obj))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return 0, 0, false
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return 0, 0, false
		}
		k, _ := t.(string)
		var v json.RawMessage
		if d.Decode(&v) != nil {
			return 0, 0, false
		}
		if k == key {
			end = int(d.InputOffset())
			start, ok = end-len(v), true
		}
	}
	return start, end, ok
}
