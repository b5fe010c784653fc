// Package fieldorder reads the header fields of an HTTP/1.1 head in the
// order they came on the wire, as Go's textproto reads each line, so that
// an event can record them in that order (net/http keeps a map).
//
// What it must never do: consume or change a byte of what it reads (the
// server or client reads the head afterwards as always), or accept a line
// Go would reject.
package fieldorder

import (
	"bufio"
	"bytes"
	"net/textproto"
	"strings"

	"github.com/capsem/capsem/store"
)

// AddLine adds one header line (without its line ending) to fields as
// Go's textproto reads it: a line that starts with a space or tab continues
// the previous field's value, joined by one space; otherwise it is
// "name: value" with the name canonicalized and the value trimmed. ok is
// false for a line Go would reject.
func AddLine(fields []store.Header, line []byte) ([]store.Header, bool) {
	if line[0] == ' ' || line[0] == '\t' {
		if len(fields) == 0 {
			return fields, false
		}
		last := &fields[len(fields)-1]
		last.Value = strings.TrimLeft(last.Value+" "+string(trimOWS(line)), " \t")
		return fields, true
	}
	name, value, ok := bytes.Cut(trimOWS(line), []byte(":"))
	if !ok || len(name) == 0 || !validFieldName(name) {
		return fields, false
	}
	return append(fields, store.Header{
		Name:  textproto.CanonicalMIMEHeaderKey(string(name)),
		Value: string(bytes.TrimLeft(value, " \t")),
	}), true
}

// trimOWS trims spaces and tabs at both ends.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// validFieldName reports whether name is an RFC 9110 token, as Go's
// server requires of header names.
func validFieldName(name []byte) bool {
	for _, c := range name {
		if !tokenByte[c] {
			return false
		}
	}
	return true
}

var tokenByte = func() (t [256]bool) {
	for c := range 256 {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			t[c] = true
		}
	}
	for _, c := range []byte("!#$%&'*+-.^_`|~") {
		t[c] = true
	}
	return t
}()

// PeekResponse returns the header fields of the response head at the
// start of br, in order, without consuming anything: http.ReadResponse
// reads the head afterwards as always. ok is false when the head does not
// fit br's buffer or the connection fails first (ReadResponse then reports
// the failure).
func PeekResponse(br *bufio.Reader) (fields []store.Header, ok bool) {
	for n, from := 1, 0; ; {
		if _, err := br.Peek(n); err != nil {
			return nil, false
		}
		b, _ := br.Peek(br.Buffered())
		if end := headEnd(b, from); end >= 0 {
			return parseHeadFields(b[:end])
		}
		from = max(0, len(b)-3)
		n = len(b) + 1
	}
}

// headEnd returns the offset just past the blank line that ends the head
// at the start of b (CRLF or LF line endings), searching from from, or -1.
func headEnd(b []byte, from int) int {
	for i := from; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return i + 1
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return i + 2
		}
	}
}

// parseHeadFields parses the fields of a head (its first line, the status
// or request line, skipped).
func parseHeadFields(head []byte) ([]store.Header, bool) {
	_, rest, _ := bytes.Cut(head, []byte("\n"))
	var fields []store.Header
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break
		}
		var ok bool
		if fields, ok = AddLine(fields, line); !ok {
			return nil, false
		}
	}
	return fields, true
}
