package sqliteexport

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"time"

	"github.com/capsem/capsem/store"
)

// cols reads the values of a row in order: each method takes the next
// column. A value of the wrong type sets err (the first one is kept) and
// reads as the zero value.
type cols struct {
	vals []any
	i    int
	err  error
}

func (c *cols) next() any {
	v := c.vals[c.i]
	c.i++
	return v
}

func (c *cols) fail(format string, a ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, a...)
	}
}

// str is a TEXT column: NULL reads as "".
func (c *cols) str() string {
	switch v := c.next().(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	default:
		c.fail("column %d: %T where text was written", c.i-1, v)
		return ""
	}
}

// int is an INTEGER column: NULL reads as 0.
func (c *cols) int() int64 {
	v := c.next()
	switch v.(type) {
	case nil, int64, float64:
		return toInt(v)
	default:
		c.fail("column %d: %T where an integer was written", c.i-1, v)
		return 0
	}
}

func toInt(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	}
	return 0
}

// float is a REAL column: NULL reads as 0.
func (c *cols) float() float64 {
	switch v := c.next().(type) {
	case nil:
		return 0
	case float64:
		return v
	case int64:
		return float64(v)
	default:
		c.fail("column %d: %T where a number was written", c.i-1, v)
		return 0
	}
}

func (c *cols) bool() bool { return c.int() != 0 }

// duration is a duration_ms column.
func (c *cols) duration() time.Duration {
	return time.Duration(math.Round(c.float() * float64(time.Millisecond)))
}

// time reads two columns, a timestamp's text and its *_ms: the text has
// nanoseconds, the milliseconds are the fallback. NULL in both: the zero
// time.
func (c *cols) time() time.Time {
	text, ms := c.str(), c.next()
	if text != "" {
		if t, err := time.Parse(tsLayout, text); err == nil {
			return t.UTC()
		}
		if t, err := time.Parse(time.RFC3339Nano, text); err == nil {
			return t.UTC()
		}
	}
	if ms != nil {
		return time.UnixMilli(toInt(ms)).UTC()
	}
	if text != "" {
		c.fail("column %d: timestamp %q does not parse", c.i-2, text)
	}
	return time.Time{}
}

func (c *cols) addr() netip.Addr {
	s := c.str()
	if s == "" {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		c.fail("column %d: address %q: %v", c.i-1, s, err)
	}
	return a
}

// json decodes a JSON column into v; NULL leaves v as it is.
func (c *cols) json(v any) error {
	s := c.str()
	if s == "" {
		return nil
	}
	return json.Unmarshal([]byte(s), v)
}

func (c *cols) headers() []store.Header {
	var pairs [][2]string
	if err := c.json(&pairs); err != nil {
		c.fail("column %d: headers: %v", c.i-1, err)
		return nil
	}
	if pairs == nil {
		return nil
	}
	out := make([]store.Header, len(pairs))
	for i, p := range pairs {
		out[i] = store.Header{Name: p[0], Value: p[1]}
	}
	return out
}

// eventHead are the columns every event table starts with.
const eventHead = "id, session_id, seq, timestamp, timestamp_ms"

// rowHead reads eventHead into ev and returns the row's id.
func (c *cols) head(ev *store.Event) int64 {
	id := c.key("id")
	ev.Session = c.str()
	ev.Seq = uint64(c.key("seq"))
	ev.Time = c.time()
	return id
}

// key is an id or seq column: an INTEGER above zero, as Export writes
// them. A file that has another there (a REAL between two integers, which
// int would cut, or a negative) would make the merger read the same rows
// again and again.
func (c *cols) key(name string) int64 {
	v, ok := c.next().(int64)
	if !ok || v <= 0 {
		c.fail("%s %v is not an integer above 0", name, c.vals[c.i-1])
		return 0
	}
	return v
}

// chain reads the chain columns of sessions: chain_seq, chain_head,
// chain_meta, chain_key, chain_sig. Nil when chain_seq is NULL.
func (c *cols) chain() *store.Chain {
	seq := c.next()
	head, meta, key, sig := c.hex(), c.hex(), c.hex(), c.hex()
	if seq == nil {
		return nil
	}
	ch := &store.Chain{Seq: uint64(toInt(seq)), Key: key, Sig: sig}
	if copy(ch.Head[:], head) != len(ch.Head) || copy(ch.Meta[:], meta) != len(ch.Meta) {
		c.fail("chain_head and chain_meta must be %d bytes of hex", len(ch.Head))
	}
	return ch
}

// hex reads a column of hex text; nil when NULL.
func (c *cols) hex() []byte {
	s := c.str()
	if s == "" {
		return nil
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		c.fail("%q is not hex", s)
	}
	return b
}
