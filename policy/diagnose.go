package policy

import (
	"fmt"
	"slices"
	"strings"

	toml "github.com/pelletier/go-toml/v2"
)

// schemaKey returns the key of keys that part names ignoring case, or "".
func schemaKey(keys []string, part string) string {
	for _, k := range keys {
		if strings.EqualFold(k, part) {
			return k
		}
	}
	return ""
}

// unknownKey reports a key the schema does not have.
func (c *collector) unknownKey(de *toml.DecodeError, w *walker) {
	line, _ := de.Position()
	key := w.fullKey(de.Key(), line)
	parent := ""
	for _, part := range key {
		next, spelt, known := schemaStep(parent, part)
		if !known {
			break
		}
		if spelt == "" {
			c.unknownPart(line, parent, part)
			return
		}
		parent = next
	}
	c.add(line, "unknown key %q; remove it", formatKey(key))
}

// unknownPart reports the key part that is not in the table of schema
// path parent.
func (c *collector) unknownPart(line int, parent, part string) {
	in := schemaTable(parent)
	// A key of another table, put in the wrong place? A table inside
	// parent's is the likeliest.
	var other *table
	for i := range tables {
		t := &tables[i]
		if t == in || !slices.ContainsFunc(t.keys, func(k key) bool { return k.name == part }) {
			continue
		}
		if other == nil || in != nil && t.parent() == in.name && other.parent() != in.name {
			other = t
		}
	}
	if other != nil {
		where := "at the top level"
		if in != nil {
			where = "in " + in.header()
		}
		c.add(line, "key %q belongs in the %s table, not %s; move it under a \"%s\" line", part, other.header(), where, other.header())
		return
	}
	keys, _ := schemaKeys(parent)
	hint := ""
	if s := suggest(part, keys); s != "" {
		hint = fmt.Sprintf(" did you mean %q?", s)
	}
	if in == nil {
		c.add(line, "unknown table or key %q:%s the policy file has only the tables %s; remove or rename it", part, hint, tableList())
		return
	}
	h := in.header()
	c.add(line, "unknown key %q in %s:%s the keys of %s are %s; remove or rename it", part, h, hint, h, strings.Join(keys, ", "))
}

// tableList names the top-level tables as prose: "[network], [upstream],
// … and [dns]".
func tableList() string {
	var headers []string
	for i := range tables {
		if tables[i].parent() == "" {
			headers = append(headers, tables[i].header())
		}
	}
	last := len(headers) - 1
	return strings.Join(headers[:last], ", ") + " and " + headers[last]
}

// checkCase reports schema keys written in another case ("Allow"): go-toml
// matches struct fields case-insensitively, capsem does not accept them.
// Only path[from:] is checked; the rest was checked with its table header.
// The names of a named table and the keys of a map are the user's, any
// case.
func (c *collector) checkCase(path []string, from, line int) {
	parent := ""
	for depth, part := range path {
		next, spelt, known := schemaStep(parent, part)
		if !known || spelt == "" {
			return // a map's keys, or unknown: reported by the decoder
		}
		if spelt != part && depth >= from {
			c.add(line, "key %q must be written in lower case, as %q", part, spelt)
		}
		parent = next
	}
}

// expectedType says what the value at key must be, or "".
func expectedType(key []string) string {
	// The schema path of key: in lower case, a named table's names
	// replaced by nameMark.
	parts := make([]string, len(key))
	parent := ""
	for i, part := range key {
		parts[i] = strings.ToLower(part)
		if t := tableNamed(parent); t != nil && t.named {
			parts[i] = nameMark
		}
		parent = strings.TrimPrefix(parent+"."+parts[i], ".")
	}
	k := parent
	for _, t := range tables {
		if k == t.name || k == t.keyPath() {
			return t.want
		}
		for _, tk := range t.keys {
			full := t.keyPath() + "." + tk.name
			if k == full || (tk.kind == kindStringMap || tk.kind == kindStringLists) && strings.HasPrefix(k, full+".") {
				return tk.want
			}
		}
	}
	return ""
}

// decodeError reports a syntax, type or duplicate-key error from go-toml.
func (c *collector) decodeError(de *toml.DecodeError, w *walker) {
	line, col := de.Position()
	if line == 1 && col == 1 && len(de.Key()) > 0 {
		// go-toml had no position for the value (nested arrays have
		// none): point at its key instead.
		if kl := w.keyLine(de.Key()); kl > 0 {
			line = kl
		}
	}
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	if found := mismatchFound(msg); found != "" {
		if want := expectedType(de.Key()); want != "" {
			c.add(line, "%s; found %s", want, found)
			return
		}
		c.add(line, "%s %q cannot hold %s; fix its value", "key", formatKey(de.Key()), found)
		return
	}
	if strings.Contains(msg, "already defined") || strings.Contains(msg, "already exists") {
		c.add(line, "%s: a key or table may appear only once; merge the two into one", msg)
		return
	}
	c.add(line, "invalid TOML at column %d: %s; fix the syntax (see https://toml.io)", col, msg)
}

// mismatchFound returns what go-toml found when msg is a type-mismatch
// error ("an integer", "a table"), or "".
func mismatchFound(msg string) string {
	var what string
	switch {
	case strings.HasPrefix(msg, "cannot decode TOML "):
		what = strings.TrimPrefix(msg, "cannot decode TOML ")
		if i := strings.Index(what, " into "); i >= 0 {
			what = what[:i]
		}
	case strings.HasPrefix(msg, "cannot store an array table"):
		what = "array table"
	case strings.HasPrefix(msg, "cannot store a table"):
		what = "table"
	default:
		return ""
	}
	switch {
	case what == "":
		return "a value of another type"
	case strings.ContainsRune("aeiou", rune(what[0])):
		return "an " + what
	}
	return "a " + what
}

// formatKey writes a TOML key path, quoting parts that need it.
func formatKey(key []string) string {
	parts := make([]string, len(key))
	for i, k := range key {
		parts[i] = k
		if k == "" || strings.IndexFunc(k, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
		}) >= 0 {
			parts[i] = fmt.Sprintf("%q", k)
		}
	}
	return strings.Join(parts, ".")
}

// suggest returns the key of keys closest to k, if it is a likely typo.
func suggest(k string, keys []string) string {
	best, bestD := "", 3
	for _, cand := range keys {
		if d := editDistance(strings.ToLower(k), cand); d < bestD {
			best, bestD = cand, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
