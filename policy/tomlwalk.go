package policy

import (
	"fmt"
	"iter"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"
)

// leaf is one scalar value of the file, with where it is.
type leaf struct {
	path    []string
	index   int // position in its array, -1 when not in an array
	elem    int // the element of the array of tables path[0] it is in (from 0), -1 when none
	kind    unstable.Kind
	value   string // the decoded string, for strings
	line    int    // line of the value
	keyLine int    // line of the key holding the value
}

// walker reads the syntax tree of a document that the decoder has accepted,
// to pair each value with its line. Because it works on the tree, a string
// that also appears in a comment or under another key cannot be mistaken
// for the value.
type walker struct {
	c      *collector
	lines  lineIndex
	leaves []leaf
	keys   []keyRef // every table header and key, in file order

	elems   map[string][]int // the line of each element of each array of tables ([[http]]), in file order
	headers []int            // the line of each table header, in file order
	cur     int              // the element being read, -1 when none
}

type keyRef struct {
	path []string
	line int
}

// elemEnd returns the line after the last one that element i of array of
// tables t can span: the next table header or element of t, whichever
// comes first.
func (w *walker) elemEnd(t string, i int) int {
	elems := w.elems[t]
	start := elems[i]
	end := math.MaxInt
	if i+1 < len(elems) {
		end = max(elems[i+1], start+1)
	}
	for _, h := range w.headers {
		if h > start {
			return min(end, h)
		}
	}
	return end
}

// fullKey returns the full path of the key that go-toml reports as key on
// line: inside inline tables go-toml gives only the innermost part.
func (w *walker) fullKey(key []string, line int) []string {
	var best []string
	for _, k := range w.keys {
		if k.line == line && len(k.path) >= len(key) && len(k.path) > len(best) &&
			slices.Equal(k.path[len(k.path)-len(key):], key) {
			best = k.path
		}
	}
	if best == nil {
		return key
	}
	return best
}

// keyLine returns the line of the first key with this path, or 0.
func (w *walker) keyLine(key []string) int {
	for _, k := range w.keys {
		if len(k.path) == len(key) {
			same := true
			for i := range key {
				if !strings.EqualFold(k.path[i], key[i]) {
					same = false
					break
				}
			}
			if same {
				return k.line
			}
		}
	}
	return 0
}

func (w *walker) walk(data []byte) {
	var p unstable.Parser
	p.Reset(data)
	var table []string
	w.cur = -1
	w.elems = map[string][]int{}
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			var line int
			table, line = w.readKey(nil, e)
			w.headers = append(w.headers, line)
			w.c.checkCase(table, 0, line)
			w.cur = -1
			if t := arrayTableAt(table); t != nil {
				if e.Kind == unstable.ArrayTable {
					w.newElem(t, line)
				} else {
					w.c.add(line, "%s", t.notArray)
				}
			}
		case unstable.KeyValue:
			w.keyValue(table, e)
		}
	}
}

// readKey records n's key and returns its path, prefix followed by the
// key's parts, and the line of its first part.
func (w *walker) readKey(prefix []string, n *unstable.Node) ([]string, int) {
	line := 0
	for it := n.Key(); it.Next(); {
		k := it.Node()
		if line == 0 {
			line = w.lines.line(k.Raw)
		}
		prefix = append(prefix, string(k.Data))
	}
	w.keys = append(w.keys, keyRef{prefix, line})
	return prefix, line
}

// newElem starts reading a new element of the array of tables t.
func (w *walker) newElem(t *table, line int) {
	w.elems[t.name] = append(w.elems[t.name], line)
	w.cur = len(w.elems[t.name]) - 1
}

func (w *walker) keyValue(prefix []string, kv *unstable.Node) {
	path := make([]string, len(prefix), len(prefix)+2)
	copy(path, prefix)
	path, keyLine := w.readKey(path, kv)
	w.c.checkCase(path, len(prefix), keyLine)
	for j := len(prefix) + 1; j < len(path); j++ {
		// http.host = "…", or rules.server = "…" in [mcp]: one table, not
		// an array. (http = { … } is reported by the decoder.)
		if t := arrayTableAt(path[:j]); t != nil {
			w.c.add(keyLine, "%s", t.notArray)
			break
		}
	}
	w.value(path, -1, kv.Value(), keyLine)
}

// inlineTable reads the keys of an inline table at path.
func (w *walker) inlineTable(path []string, v *unstable.Node) {
	for it := v.Children(); it.Next(); {
		if c := it.Node(); c.Kind == unstable.KeyValue {
			w.keyValue(path, c)
		}
	}
}

func (w *walker) value(path []string, index int, v *unstable.Node, keyLine int) {
	if !v.Valid() {
		return
	}
	switch v.Kind {
	case unstable.Array:
		if index >= 0 {
			return // nested arrays: never valid here, reported by the decoder
		}
		i := 0
		for it := v.Children(); it.Next(); {
			if c := it.Node(); c.Kind != unstable.Comment {
				w.value(path, i, c, keyLine)
				i++
			}
		}
	case unstable.InlineTable:
		if index < 0 {
			w.inlineTable(path, v)
			return
		}
		t := arrayTableAt(path)
		if t == nil || w.cur >= 0 {
			return // never valid, reported by the decoder
		}
		// http = [ { … }, { … } ]: the inline form of [[http]].
		line := keyLine
		if v.Raw.Length > 0 {
			line = w.lines.line(v.Raw)
		}
		w.newElem(t, line)
		w.inlineTable(path, v)
		w.cur = -1
	default:
		l := leaf{path: path, index: index, elem: w.cur, kind: v.Kind, line: keyLine, keyLine: keyLine}
		if v.Raw.Length > 0 {
			l.line = w.lines.line(v.Raw)
		}
		if v.Kind == unstable.String {
			l.value = string(v.Data)
		}
		w.leaves = append(w.leaves, l)
	}
}

// values yields, in file order, each string value of a key of t with its
// key: the value of a key of kindString, each entry of kindStrings, each
// value of the map of kindStringMap, each entry of each list of
// kindStringLists. Wrong types were reported by the
// decoder already, so other values are skipped. In an array of tables,
// leaf.elem is the element that holds the value; in a named table,
// leaf.path[len(t.parts())] is the name.
func (w *walker) values(t *table) iter.Seq2[*key, *leaf] {
	return func(yield func(*key, *leaf) bool) {
		elems := len(w.elems[t.name])
		parts := t.parts()
		depth := len(parts) // the index of the key in a leaf's path
		if t.named {
			depth++
		}
		for i := range w.leaves {
			l := &w.leaves[i]
			if len(l.path) <= depth || !slices.Equal(l.path[:len(parts)], parts) || t.array && (l.elem < 0 || l.elem >= elems) {
				continue
			}
			for j := range t.keys {
				if l.holds(t.keys[j], depth) {
					if !yield(&t.keys[j], l) {
						return
					}
					break
				}
			}
		}
	}
}

// holds reports whether l is a string value of key k of its table, k
// being l.path[depth]: the table's own value, an entry of its array, or a
// value of its map.
func (l *leaf) holds(k key, depth int) bool {
	if l.kind != unstable.String || len(l.path) <= depth || l.path[depth] != k.name {
		return false
	}
	switch n := len(l.path) - depth; k.kind {
	case kindString:
		return n == 1 && l.index < 0
	case kindStrings:
		return n == 1 && l.index >= 0
	case kindStringMap:
		return n == 2 && l.index < 0
	case kindStringLists:
		return n == 2 && l.index >= 0
	}
	return false
}

// names returns the names of named table t that the file wrote, sorted.
func (w *walker) names(t *table) []string {
	parts := t.parts()
	var out []string
	for _, k := range w.keys {
		if len(k.path) > len(parts) && slices.Equal(k.path[:len(parts)], parts) {
			out = append(out, k.path[len(parts)])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// nameLines returns the first and the last line of the keys and headers of
// table name of named table t, 0 when there are none.
func (w *walker) nameLines(t *table, name string) (first, last int) {
	parts := t.parts()
	for _, k := range w.keys {
		if len(k.path) > len(parts) && slices.Equal(k.path[:len(parts)], parts) && k.path[len(parts)] == name {
			if first == 0 || k.line < first {
				first = k.line
			}
			last = max(last, k.line)
		}
	}
	return first, last
}

// crossCheck makes sure the walker saw every value the decoder decoded: a
// rule the decisions silently lacked (a deny entry above all) would be a
// hole in the sandbox, so any disagreement is an error.
func (w *walker) crossCheck(cfg decoded) {
	type counts struct {
		t         *table
		cols      []int // the keys counted, indices in t.keys
		got, want []int // walker and decoder: a row of len(cols) per element
	}
	all := make([]counts, len(tables))
	agree := true
	for i := range tables {
		t := &tables[i]
		cols := countedCols[i]
		got, want := w.stringCounts(t, cols), cfg.stringCounts(i, cols)
		agree = agree && slices.Equal(got, want)
		switch {
		case t.array:
			agree = agree && len(w.elems[t.name]) == len(cfg.elems(t))
		case t.named:
			agree = agree && len(w.names(t)) == len(cfg.elems(t))
		}
		all[i] = counts{t, cols, got, want}
	}
	if agree {
		return
	}
	// The counts of each key that holds strings: first of the tables, then
	// of each array of tables a list per element, and of each named table a
	// list per name.
	var parts []string
	for _, array := range []bool{false, true} {
		for _, c := range all {
			switch {
			case (c.t.array || c.t.named) != array:
			case array:
				parts = append(parts, fmt.Sprintf("%s %v/%v", c.t.name, rows(c.got, len(c.cols)), rows(c.want, len(c.cols))))
			default:
				for j, k := range c.cols {
					parts = append(parts, fmt.Sprintf("%s %d/%d", c.t.keys[k].name, c.got[j], c.want[j]))
				}
			}
		}
	}
	w.c.add(1, "internal error: the policy was read two ways that disagree (%s); please report this file to the capsem developers", strings.Join(parts, ", "))
}

// countedCols holds, for each of tables, the indices in its keys of the
// keys that hold strings, single values first: the order of crossCheck's
// message.
var countedCols = func() [][]int {
	cols := make([][]int, len(tables))
	for i, t := range tables {
		var lists []int
		for j, k := range t.keys {
			switch {
			case k.kind == kindString:
				cols[i] = append(cols[i], j)
			case k.kind.holdsStrings():
				lists = append(lists, j)
			}
		}
		cols[i] = append(cols[i], lists...)
	}
	return cols
}()

// rows cuts counts into rows of n.
func rows(counts []int, n int) [][]int {
	out := make([][]int, 0, len(counts)/max(n, 1))
	for len(counts) >= n && len(counts) > 0 {
		out = append(out, counts[:n])
		counts = counts[n:]
	}
	return out
}

// stringCounts returns how many string leaves the walker read for each key
// cols of t: a row per element of an array of tables, a row per name of a
// named table (sorted), one row for a table.
func (w *walker) stringCounts(t *table, cols []int) []int {
	rows := 1
	var names []string
	switch {
	case t.array:
		rows = len(w.elems[t.name])
	case t.named:
		names = w.names(t)
		rows = len(names)
	}
	got := make([]int, rows*len(cols))
	for k, l := range w.values(t) {
		row := 0
		switch {
		case t.array:
			row = l.elem
		case t.named:
			row, _ = slices.BinarySearch(names, l.path[len(t.parts())])
		}
		for c, j := range cols {
			if &t.keys[j] == k {
				got[row*len(cols)+c]++
			}
		}
	}
	return got
}

// lineIndex maps byte offsets to 1-based line numbers.
type lineIndex []int // offsets of the start of each line after the first

func newLineIndex(data []byte) lineIndex {
	var idx lineIndex
	for i, c := range data {
		if c == '\n' {
			idx = append(idx, i+1)
		}
	}
	return idx
}

func (li lineIndex) line(r unstable.Range) int {
	off := int(r.Offset)
	// the number of line starts at or before off, plus one
	return sort.Search(len(li), func(i int) bool { return li[i] > off }) + 1
}
