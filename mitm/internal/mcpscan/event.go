package mcpscan

import "bytes"

var bom = []byte{0xEF, 0xBB, 0xBF}

// EventData reads one raw event (as an EventSplitter hands out whole): its
// event name (the last "event" field; "" when it has none, which readers
// take as "message") and its data (its "data" fields joined with LF), by
// the rules of the event-stream standard: lines end with LF, CRLF or CR,
// comments are skipped, one space after the colon is dropped, a byte-order
// mark at the start is skipped (it can only be at the stream's start). It
// reads up to the first blank line. data is nil when the event has no data
// field, which readers do not dispatch.
func EventData(raw []byte) (event string, data []byte) {
	raw = bytes.TrimPrefix(raw, bom)
	for len(raw) > 0 {
		i := bytes.IndexAny(raw, "\r\n")
		line := raw
		if i >= 0 {
			line = raw[:i]
			if raw[i] == '\r' && i+1 < len(raw) && raw[i+1] == '\n' {
				i++
			}
			raw = raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) == 0 {
			break
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "event":
			event = string(value)
		case "data":
			if data != nil {
				data = append(data, '\n')
			} else {
				data = make([]byte, 0, len(value))
			}
			data = append(data, value...)
		}
	}
	return event, data
}

// FormatEvent writes one event: an "event" line when event is not empty,
// then data split at its line ends (LF, CRLF or CR) into "data" lines, then
// the blank line that ends it. EventData reads back event and data (its
// line ends as LF). Line
// ends in event are dropped, as they would end its line.
func FormatEvent(event string, data []byte) []byte {
	out := make([]byte, 0, len(event)+len(data)+16)
	if event != "" {
		out = append(out, "event: "...)
		for i := 0; i < len(event); i++ {
			if c := event[i]; c != '\r' && c != '\n' {
				out = append(out, c)
			}
		}
		out = append(out, '\n')
	}
	for {
		i := bytes.IndexAny(data, "\r\n")
		line := data
		if i >= 0 {
			line = data[:i]
		}
		out = append(out, "data: "...)
		out = append(out, line...)
		out = append(out, '\n')
		if i < 0 {
			break
		}
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	return append(out, '\n')
}
