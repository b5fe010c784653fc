package mcpscan

import "bytes"

// DefaultSplitEventBytes is the largest event an EventSplitter hands out
// whole when NewEventSplitter is given zero or less. A tools/list result is
// the event worth rewriting; the largest seen (a GitHub server with every
// toolset on, schemas included) is under 1 MiB.
const DefaultSplitEventBytes = 4 << 20

// EventSplitter cuts a text/event-stream into raw events: the bytes of
// each event up to and including the blank line that ends it, with the
// line ends it came with (LF, CRLF or CR, as the standard allows). An event
// no larger than the cap is handed out whole, for the caller to pass on or
// rewrite; a larger one is handed out in pieces as they come, never held
// whole. What it hands out, concatenated, is exactly what it was fed. It is
// not safe for concurrent use.
type EventSplitter struct {
	max int
	fn  func(raw []byte, complete bool)

	buf []byte // the current event, while it is held (at most max bytes)
	// pass: the current event went over the cap (or was flushed) and is
	// being passed through in pieces.
	pass bool
	// lineEmpty: no byte of the current line yet, so a line end here is
	// a blank line and ends the event.
	lineEmpty bool
	// prevCR: the last byte was CR, so an LF now belongs to that line end.
	prevCR bool
	// ended: the event ended with a CR; it waits for the next byte, which
	// may be the LF of a CRLF and so part of it.
	ended bool
	// strayLF: Flush handed out an event that ended with a CR, so an LF
	// now is the rest of that CRLF and is handed out alone.
	strayLF bool
	closed  bool
}

// NewEventSplitter returns a splitter that calls fn for each event, from
// within Write, Flush and Close: complete is true for a whole event of at
// most maxEventBytes (zero or less means DefaultSplitEventBytes), false for
// each piece of a larger one, or of one cut by Flush or Close. raw is valid
// only during the call.
func NewEventSplitter(maxEventBytes int, fn func(raw []byte, complete bool)) *EventSplitter {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultSplitEventBytes
	}
	if fn == nil {
		fn = func([]byte, bool) {}
	}
	return &EventSplitter{max: maxEventBytes, fn: fn, lineEmpty: true}
}

// Write feeds the stream's next bytes, in any pieces. It always returns
// len(p), nil; after Close it ignores its input.
func (e *EventSplitter) Write(p []byte) (int, error) {
	n := len(p)
	if e.closed {
		return n, nil
	}
	b := p
	for len(b) > 0 {
		if e.prevCR {
			e.prevCR = false
			stray := e.strayLF
			e.strayLF = false
			if b[0] == '\n' {
				if stray {
					e.fn(b[:1], false)
					b = b[1:]
					continue
				}
				if e.ended {
					e.ended = false
					e.emit(b[:1])
					b = b[1:]
					continue
				}
				// The LF of a CRLF ending a line that was not blank.
				e.hold(b[:1])
				b = b[1:]
				continue
			}
			if e.ended {
				e.ended = false
				e.emit(nil)
			}
		}
		i := bytes.IndexAny(b, "\r\n")
		if i != 0 {
			e.lineEmpty = false
		}
		if i < 0 {
			e.hold(b)
			return n, nil
		}
		c := b[i]
		blank := e.lineEmpty
		e.lineEmpty = true
		if c == '\r' {
			e.prevCR = true
		}
		if !blank {
			e.hold(b[:i+1])
			b = b[i+1:]
			continue
		}
		if c == '\r' {
			// The event ends here, or at the LF after this CR.
			e.hold(b[:i+1])
			e.ended = true
			b = b[i+1:]
			continue
		}
		e.emit(b[:i+1])
		b = b[i+1:]
	}
	return n, nil
}

// hold keeps bytes of the current event, or passes them on once it is over
// the cap.
func (e *EventSplitter) hold(b []byte) {
	if len(b) == 0 {
		return
	}
	if e.pass {
		e.fn(b, false)
		return
	}
	if len(e.buf)+len(b) > e.max {
		e.pass = true
		if len(e.buf) > 0 {
			e.fn(e.buf, false)
			e.buf = e.buf[:0]
		}
		e.fn(b, false)
		return
	}
	e.buf = append(e.buf, b...)
}

// emit ends the current event with its last bytes, tail.
func (e *EventSplitter) emit(tail []byte) {
	switch {
	case e.pass:
		if len(tail) > 0 {
			e.fn(tail, false)
		}
	case len(e.buf)+len(tail) > e.max:
		if len(e.buf) > 0 {
			e.fn(e.buf, false)
		}
		e.fn(tail, false)
	case len(e.buf) == 0:
		if len(tail) > 0 {
			e.fn(tail, true)
		}
	default:
		e.buf = append(e.buf, tail...)
		e.fn(e.buf, true)
	}
	e.buf = e.buf[:0]
	e.pass = false
	e.shrink()
}

// shrink lets go of a buffer grown by a large event, so that a long
// stream of small events after one large one does not keep it.
func (e *EventSplitter) shrink() {
	if cap(e.buf) > 64<<10 {
		e.buf = nil
	}
}

// Flush hands out what is held: an event that has ended (waiting to see
// whether an LF follows its last CR) whole, or the start of one that has
// not, as a piece, the rest of which then follows in pieces.
func (e *EventSplitter) Flush() {
	if e.ended {
		e.ended = false
		e.strayLF = true
		e.emit(nil)
		return
	}
	if len(e.buf) > 0 {
		e.fn(e.buf, false)
		e.buf = e.buf[:0]
		e.pass = true
	}
}

// Close hands out what is held, as Flush does, and ends the stream. It
// always returns nil.
func (e *EventSplitter) Close() error {
	if !e.closed {
		e.Flush()
		e.closed = true
	}
	return nil
}
