package sse

import (
	"bytes"
)

// DefaultMaxEventBytes is the event size limit used when NewParser is given
// zero or a negative limit.
const DefaultMaxEventBytes = 1 << 20

// minMaxEventBytes keeps the limit large enough that a line cut at the limit
// can never look like a different, valid field (see Parser.appendLine).
const minMaxEventBytes = 64

// linePad is how far past the event limit a line is kept while it is split
// across writes: room for the longest field name, its colon and one space.
const linePad = 8

// maxRetryDigits is the longest retry value that is honoured. Longer values
// are ignored so that a line cut at the limit is read as it would be whole.
const maxRetryDigits = 18

var bom = []byte{0xEF, 0xBB, 0xBF}

// Event is one dispatched server-sent event.
type Event struct {
	// Type is the event type: the last "event" field of the event, or
	// "message" when it had none.
	Type string
	// Data is the event's data: its "data" fields joined with "\n".
	Data string
	// ID is the stream's last event ID at the time of dispatch: the last
	// "id" field seen so far in the stream, in this event or an earlier one.
	ID string
	// Truncated is set when a field of the event was longer than the
	// parser's limit: Data, Type or ID then holds only the first bytes.
	Truncated bool
}

// Parser is an incremental event-stream parser. It is not safe for
// concurrent use; feed it from one goroutine at a time.
type Parser struct {
	max     int
	lineMax int
	fn      func(Event)

	bomSeen int  // bytes of a leading BOM matched so far
	bomDone bool // the start of the stream has been checked for a BOM
	skipLF  bool // the previous write ended with CR: drop a leading LF
	closed  bool

	line        []byte // the current line, when it spans writes
	lineDropped bool   // bytes of the current line were dropped (too long)
	lineNUL     bool   // a dropped byte of the current line was NUL

	data      []byte
	evType    []byte
	hasType   bool
	lastID    string
	truncated bool
	retry     int
}

// NewParser returns a parser that calls fn for each event, in stream order,
// from within Write. maxEventBytes bounds the bytes kept for one event's data
// (and, separately, its type and id); zero or less means
// DefaultMaxEventBytes, and values under 64 are raised to 64.
func NewParser(maxEventBytes int, fn func(Event)) *Parser {
	if maxEventBytes <= 0 {
		maxEventBytes = DefaultMaxEventBytes
	}
	if maxEventBytes < minMaxEventBytes {
		maxEventBytes = minMaxEventBytes
	}
	if fn == nil {
		fn = func(Event) {}
	}
	return &Parser{max: maxEventBytes, lineMax: maxEventBytes + linePad, fn: fn, retry: -1}
}

// Retry returns the reconnection time, in milliseconds, the stream last set
// with a "retry" field, or -1 if it set none.
func (p *Parser) Retry() int { return p.retry }

// LastEventID returns the last event ID seen so far in the stream.
func (p *Parser) LastEventID() string { return p.lastID }

// Write feeds the next bytes of the stream. It dispatches every event the
// bytes complete and always returns len(b), nil. After Close it ignores its
// input.
func (p *Parser) Write(b []byte) (int, error) {
	n := len(b)
	if p.closed || n == 0 {
		return n, nil
	}
	if !p.bomDone {
		for len(b) > 0 && p.bomSeen < len(bom) {
			if b[0] != bom[p.bomSeen] {
				// Not a BOM after all: the bytes matched so far are content.
				p.bomDone = true
				p.feed(bom[:p.bomSeen])
				break
			}
			p.bomSeen++
			b = b[1:]
		}
		if p.bomSeen == len(bom) {
			p.bomDone = true
		}
		if !p.bomDone {
			return n, nil
		}
	}
	p.feed(b)
	return n, nil
}

// Close ends the stream. An event not yet ended by a blank line is
// discarded, as the standard says; nothing is dispatched. Close always
// returns nil.
func (p *Parser) Close() error {
	p.closed = true
	p.line, p.data, p.evType = nil, nil, nil
	return nil
}

func (p *Parser) feed(b []byte) {
	if p.skipLF && len(b) > 0 {
		p.skipLF = false
		if b[0] == '\n' {
			b = b[1:]
		}
	}
	for len(b) > 0 {
		i := indexEOL(b)
		if i < 0 {
			p.appendLine(b)
			return
		}
		if len(p.line) > 0 || p.lineDropped {
			p.appendLine(b[:i])
			p.processLine(p.line, p.lineNUL)
			p.line = p.line[:0]
			p.lineDropped, p.lineNUL = false, false
		} else {
			p.processLine(b[:i], false)
		}
		if b[i] == '\r' {
			if i+1 == len(b) {
				p.skipLF = true
			} else if b[i+1] == '\n' {
				i++
			}
		}
		b = b[i+1:]
	}
}

// indexEOL returns the index of the first CR or LF in b, or -1.
func indexEOL(b []byte) int {
	n := bytes.IndexByte(b, '\n')
	var r int
	if n < 0 {
		r = bytes.IndexByte(b, '\r')
	} else {
		r = bytes.IndexByte(b[:n], '\r')
	}
	if r >= 0 {
		return r
	}
	return n
}

// appendLine keeps at most lineMax bytes of a line that spans writes. The
// value of a field cut there is still longer than the event limit, so it is
// truncated exactly as it would be if the line had come in one write; a NUL
// among the dropped bytes is remembered for the id field's rule.
func (p *Parser) appendLine(b []byte) {
	room := p.lineMax - len(p.line)
	if room < 0 {
		room = 0
	}
	if len(b) > room {
		if bytes.IndexByte(b[room:], 0) >= 0 {
			p.lineNUL = true
		}
		b = b[:room]
		p.lineDropped = true
	}
	p.line = append(p.line, b...)
}

func (p *Parser) processLine(line []byte, droppedNUL bool) {
	if len(line) == 0 {
		p.dispatch()
		return
	}
	if line[0] == ':' {
		return // a comment
	}
	var field, value []byte
	if c := bytes.IndexByte(line, ':'); c >= 0 {
		field, value = line[:c], line[c+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	} else {
		field = line
	}
	switch string(field) {
	case "event":
		value = p.capValue(value)
		p.evType = append(p.evType[:0], value...)
		p.hasType = true
	case "data":
		// The buffer holds at most max bytes of data plus the line feed
		// that ends the last line (which dispatch removes).
		room := p.max - len(p.data)
		if room < 0 {
			p.truncated = true
			return
		}
		if len(value) > room {
			value = value[:room]
			p.truncated = true
		}
		p.data = append(p.data, value...)
		p.data = append(p.data, '\n')
	case "id":
		if droppedNUL || bytes.IndexByte(value, 0) >= 0 {
			return
		}
		value = p.capValue(value)
		if string(value) != p.lastID {
			p.lastID = string(value)
		}
	case "retry":
		if len(value) == 0 || len(value) > maxRetryDigits {
			return
		}
		n := 0
		for _, c := range value {
			if c < '0' || c > '9' {
				return
			}
			n = n*10 + int(c-'0')
		}
		p.retry = n
	}
}

func (p *Parser) capValue(v []byte) []byte {
	if len(v) > p.max {
		p.truncated = true
		return v[:p.max]
	}
	return v
}

func (p *Parser) dispatch() {
	if len(p.data) == 0 {
		p.evType = p.evType[:0]
		p.hasType = false
		p.truncated = false
		return
	}
	data := p.data
	if data[len(data)-1] == '\n' {
		data = data[:len(data)-1]
	}
	ev := Event{Type: "message", Data: string(data), ID: p.lastID, Truncated: p.truncated}
	if p.hasType && len(p.evType) > 0 {
		ev.Type = string(p.evType)
	}
	p.data = p.data[:0]
	p.evType = p.evType[:0]
	p.hasType = false
	p.truncated = false
	p.fn(ev)
}
