package mcpscan

import (
	"strings"

	"github.com/capsem/capsem/mitm/internal/sse"
)

// Stream reads the JSON-RPC messages of a text/event-stream body: the
// response to a POST, or the GET stream, of MCP's streamable HTTP
// transport, or the stream of the older HTTP+SSE transport. Each event's
// data is one message or a batch. It is not safe for concurrent use.
type Stream struct {
	r        *reader
	p        *sse.Parser
	endpoint func(string)
	closed   bool
}

// NewStream returns a stream parser that calls fn for each JSON-RPC 2.0
// message as its event ends, and endpoint with the data of each event
// named "endpoint" (the older HTTP+SSE transport's first event: the URI
// the client is to POST its messages to), from within Write. previewBytes
// is as for NewBody; endpoint may be nil. An event's data is kept up to
// MaxEventBytes; a longer event yields no message.
func NewStream(previewBytes int, fn func(Message), endpoint func(uri string)) *Stream {
	s := &Stream{r: newReader(previewBytes, fn), endpoint: endpoint}
	s.p = sse.NewParser(MaxEventBytes, s.event)
	return s
}

func (s *Stream) event(ev sse.Event) {
	if ev.Type == "endpoint" {
		if s.endpoint != nil && !ev.Truncated {
			s.endpoint(strings.TrimSpace(ev.Data))
		}
		return
	}
	if ev.Truncated {
		return // cut JSON: no whole message in it
	}
	s.r.reset()
	s.r.write([]byte(ev.Data))
	s.r.close()
}

// Write feeds the stream's next bytes, in any pieces. It always returns
// len(b), nil; after Close it ignores its input.
func (s *Stream) Write(p []byte) (int, error) {
	if !s.closed {
		s.p.Write(p)
	}
	return len(p), nil
}

// JSONRPC reports whether an event so far carried JSON-RPC 2.0, as
// Body.JSONRPC does for a body.
func (s *Stream) JSONRPC() bool { return s.r.jsonrpc }

// Close ends the stream: an event not ended by a blank line is dropped, as
// the standard says. It always returns nil.
func (s *Stream) Close() error {
	if !s.closed {
		s.p.Close()
		s.closed = true
	}
	return nil
}
