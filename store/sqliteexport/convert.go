package sqliteexport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/store"
)

// converter turns the fields of store records into the values of columns
// (the value functions of schema.go call it), scrubbing text when asked.
type converter struct {
	scrub bool
	ph    *dlp.Scrubber // with scrub: redacts the placeholders of the sessions exported too (nil: none)
	buf   bytes.Buffer
}

// newConverter returns the converter of an export of sessions. With
// scrub, the placeholders the sessions' records hold are redacted in every
// text of every one of them (not only its own: a placeholder the policy
// fixed is the same in each session of that policy, and a session
// recorded before capsem kept them has none).
func newConverter(scrub bool, sessions []store.Session) *converter {
	c := &converter{scrub: scrub}
	if scrub {
		var vals []string
		for _, s := range sessions {
			for _, p := range s.Placeholders {
				vals = append(vals, p.Value)
			}
		}
		c.ph = dlp.NewScrubber(vals)
	}
	return c
}

// text returns s as a TEXT value: NULL when empty, invalid UTF-8
// replaced, scrubbed when asked.
func (c *converter) text(s string) any {
	if s == "" {
		return nil
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if c.scrub {
		s = c.ph.Scrub(s)
	}
	return s
}

// sessionID returns the id a session has in the export: its store id,
// or, when scrubbing changes it, the scrubbed id made unique by the
// session's ordinal.
func (c *converter) sessionID(id string, ordinal int) string {
	if !c.scrub {
		return id
	}
	if s := c.ph.Scrub(id); s != id {
		return fmt.Sprintf("%s#%d", s, ordinal)
	}
	return id
}

const tsLayout = "2006-01-02T15:04:05.000000000Z"

// timeText is t as the text of a timestamp column, NULL when t is zero;
// timeMS is the same time as its *_ms column.
func timeText(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(tsLayout)
}

func timeMS(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMilli()
}

// eventTimeText is timeText for a column that is never NULL.
func eventTimeText(t time.Time) any { return t.UTC().Format(tsLayout) }

func addr(a interface {
	IsValid() bool
	String() string
}) any {
	if !a.IsValid() {
		return nil
	}
	return a.String()
}

func nonZero[T int | int64 | uint16](v T) any {
	if v == 0 {
		return nil
	}
	return int64(v)
}

// direction is net_events.direction: a record from before capsem kept
// it has none, and every flow then was the guest's.
func (c *converter) direction(d store.Direction) any {
	if d == "" {
		d = store.Outbound
	}
	return c.text(string(d))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// bit is a bool as the 0 or 1 of an INTEGER column.
func bit(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// finite is v, or 0 for NaN and ±Inf (which SQLite would store as NULL or
// carry into every sum). The store never hands them out; this is the
// exporter not relying on it.
func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

// argv returns the words of a command line as valid UTF-8 and, when
// scrubbing, with [dlp.ScrubArgv] applied.
func (c *converter) argv(args []string) []string {
	words := make([]string, len(args))
	for i, a := range args {
		words[i] = strings.ToValidUTF8(a, "\uFFFD")
	}
	if c.scrub {
		words = c.ph.ScrubArgv(words)
	}
	return words
}

// json encodes v compactly, without HTML escaping.
func (c *converter) json(v any) any {
	c.buf.Reset()
	enc := json.NewEncoder(&c.buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only strings and slices of them are encoded: cannot happen.
		panic(fmt.Sprintf("sqliteexport: encoding JSON: %v", err))
	}
	return strings.TrimSuffix(c.buf.String(), "\n")
}

func (c *converter) headers(hs []store.Header) any {
	if len(hs) == 0 {
		return nil
	}
	out := make([][2]string, len(hs))
	for i, h := range hs {
		name, value := strings.ToValidUTF8(h.Name, "\uFFFD"), strings.ToValidUTF8(h.Value, "\uFFFD")
		if c.scrub {
			name, value = c.ph.ScrubHeader(name, value)
		}
		out[i] = [2]string{name, value}
	}
	return c.json(out)
}
