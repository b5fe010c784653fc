package secret

import "unicode/utf8"

// The JSON view reads the strings of a stream as a client that puts text
// together reads them: escapes decoded, whitespace out, and the strings
// found at one key path (array indices left out) as one text, across
// values and across top-level documents — a model's streamed answer is
// a server-sent event per few characters, each a document whose
// delta.text is the next piece. It tracks structure without checking it
// (text between documents, an SSE event's "data:", is passed over), so a
// stream that is not JSON costs it nothing but a look at each byte.

// maxJSONPaths bounds the views of one stream: the strings of further
// paths share one.
const maxJSONPaths = 64

// maxJSONDepth bounds the containers tracked; deeper ones are counted and
// their strings read as the deepest tracked one's.
const maxJSONDepth = 64

type jsonFold struct {
	s     *Scrubber
	views map[uint64]*view
	list  []*view
	over  *view // the paths past maxJSONPaths
	stack []jframe
	deep  int // containers opened past maxJSONDepth, not yet closed

	inStr, isKey bool
	cur          *view  // the view of the string being read (not a key)
	key          uint64 // the hash of the key being read
	esc          int    // 0: no escape; 1: after a backslash; 2–5: \u and esc-2 hex digits
	escAt        int64
	u            rune
	hi           rune // a high surrogate waiting for its low half
	hiAt         int64
}

type jframe struct {
	obj, expectKey bool
	path, key      uint64 // the container's path; an object's current key
}

const fnvBasis, fnvPrime = 14695981039346656037, 1099511628211

func mix(path, key uint64) uint64 { return (path*fnvPrime ^ key) * 0x9E3779B97F4A7C15 }

func (f *jsonFold) valuePath() uint64 {
	if len(f.stack) == 0 {
		return 0
	}
	t := &f.stack[len(f.stack)-1]
	if t.obj {
		return mix(t.path, t.key)
	}
	return t.path
}

func (f *jsonFold) viewFor(path uint64) *view {
	if v := f.views[path]; v != nil {
		return v
	}
	nv := func() *view {
		return &view{m: f.s.folded, st: f.s.folded.Stream(), minHold: f.s.hold, folded: true, inJSON: true, lower: true}
	}
	if len(f.list) < maxJSONPaths {
		v := nv()
		f.views[path] = v
		f.list = append(f.list, v)
		return v
	}
	if f.over == nil {
		f.over = nv()
	}
	return f.over
}

func (f *jsonFold) feed(p []byte, at int64) {
	for i := 0; i < len(p); {
		c := p[i]
		if !f.inStr {
			if byteClass[c]&classJSON == 0 {
				j := i + 1
				for j < len(p) && byteClass[p[j]]&classJSON == 0 {
					j++
				}
				i = j
				continue
			}
			switch c {
			case '{', '[':
				if len(f.stack) >= maxJSONDepth {
					f.deep++
				} else {
					f.stack = append(f.stack, jframe{obj: c == '{', expectKey: c == '{', path: f.valuePath()})
				}
			case '}', ']':
				if f.deep > 0 {
					f.deep--
				} else if len(f.stack) > 0 {
					f.stack = f.stack[:len(f.stack)-1]
				}
			case ':', ',':
				if k := len(f.stack) - 1; k >= 0 && f.stack[k].obj {
					f.stack[k].expectKey = c == ','
				}
			case '"':
				f.inStr = true
				k := len(f.stack) - 1
				f.isKey = k >= 0 && f.stack[k].obj && f.stack[k].expectKey
				if f.isKey {
					f.key = fnvBasis
				} else {
					f.cur = f.viewFor(f.valuePath())
				}
			}
			i++
			continue
		}
		if f.esc > 0 {
			i += f.escape(c, at+int64(i))
			continue
		}
		switch c {
		case '"':
			f.inStr, f.hi = false, 0
			if k := len(f.stack) - 1; f.isKey && k >= 0 {
				f.stack[k].key = f.key
			}
			i++
		case '\\':
			f.esc, f.escAt = 1, at+int64(i)
			f.hashKey(c)
			i++
		default:
			j := i + 1
			for j < len(p) && byteClass[p[j]]&(classQuote|classSlash) == 0 {
				j++
			}
			f.text(p[i:j], at+int64(i))
			i = j
		}
	}
}

// text takes plain string bytes (no quote, no backslash).
func (f *jsonFold) text(b []byte, at int64) {
	if f.isKey {
		k := f.key
		for _, c := range b {
			k = (k ^ uint64(c)) * fnvPrime
		}
		f.key = k
		return
	}
	f.hi = 0
	for i := 0; i < len(b); {
		if isSpace(b[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(b) && byteClass[b[j]]&classSpace == 0 {
			j++
		}
		f.cur.add(b[i:j], at+int64(i))
		i = j
	}
}

func (f *jsonFold) hashKey(c byte) {
	if f.isKey {
		f.key = (f.key ^ uint64(c)) * fnvPrime
	}
}

// escape takes byte c of an escape at raw offset at; it returns 0 when c
// ended a broken \u escape and is to be read again as string text.
func (f *jsonFold) escape(c byte, at int64) int {
	f.hashKey(c)
	if f.esc == 1 {
		f.esc = 0
		switch c {
		case 'u':
			f.esc, f.u = 2, 0
		case 'n', 'r', 't', 'b', 'f':
			// whitespace or a control character: not text
		default: // \" \\ \/, or not JSON: the character itself
			if !f.isKey {
				f.hi = 0
				f.cur.addUnit([]byte{c}, f.escAt, 2)
			}
		}
		return 1
	}
	d := unhex(c)
	if d < 0 {
		f.esc = 0
		return 0
	}
	f.u = f.u<<4 | rune(d)
	if f.esc++; f.esc == 6 {
		f.esc = 0
		if !f.isKey {
			f.rune(f.u, at+1)
		}
	}
	return 1
}

// rune takes a decoded \u escape that ended before raw offset end.
func (f *jsonFold) rune(r rune, end int64) {
	start := f.escAt
	switch {
	case r >= 0xD800 && r < 0xDC00:
		f.hi, f.hiAt = r, start
		return
	case r >= 0xDC00 && r < 0xE000 && f.hi != 0:
		r = 0x10000 + (f.hi-0xD800)<<10 + (r - 0xDC00)
		start = f.hiAt
	}
	f.hi = 0
	if r < 0x80 && isSpace(byte(r)) || r < 0x20 {
		return
	}
	f.cur.addUnit(utf8.AppendRune(nil, r), start, int(end-start))
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

func (f *jsonFold) commit(hit func(*view, Hit, int64)) {
	for _, v := range f.list {
		v.commit(hit)
	}
	if f.over != nil {
		f.over.commit(hit)
	}
}

func (f *jsonFold) holdFrom() int64 {
	h := int64(1<<63 - 1)
	for _, v := range f.list {
		h = min(h, v.holdFrom())
	}
	if f.over != nil {
		h = min(h, f.over.holdFrom())
	}
	return h
}
