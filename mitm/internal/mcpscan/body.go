package mcpscan

// Body reads the JSON-RPC messages of one HTTP request or response body:
// a single message or a batch (an array). It is not safe for concurrent
// use.
type Body struct {
	r      *reader
	closed bool
}

// NewBody returns a body parser that calls fn for each JSON-RPC 2.0
// message as it ends, from within Write. previewBytes caps Message.Preview
// and Message.ErrorMessage; zero or less means DefaultPreviewBytes. Feed it
// the body with its content coding removed.
func NewBody(previewBytes int, fn func(Message)) *Body {
	return &Body{r: newReader(previewBytes, fn)}
}

// Write feeds the body's next bytes, in any pieces. It always returns
// len(b), nil; after Close it ignores its input.
func (b *Body) Write(p []byte) (int, error) {
	if !b.closed {
		b.r.write(p)
	}
	return len(p), nil
}

// JSONRPC reports whether the body is JSON-RPC 2.0 so far: it has an
// object with "jsonrpc": "2.0" and a method, result or error, which is how
// MCP traffic is told from other JSON. It turns true as soon as both have
// been read, before the object ends.
func (b *Body) JSONRPC() bool { return b.r.jsonrpc }

// Suspect reports whether the body held an object with a method that is
// not JSON-RPC 2.0 (no "jsonrpc": "2.0"), or an ambiguous object no
// message was made of (its method spelled "Method", say): a lenient server
// might act on it as a request, so a caller deciding on MCP requests must
// refuse it.
func (b *Body) Suspect() bool { return b.r.suspect }

// Whole reports whether everything fed so far was read as JSON to its
// end: no syntax the scanner refuses (a byte-order mark, UTF-16, NaN),
// no nesting past jsonscan.MaxDepth, and no value left open. A body that
// is not Whole was not read, whatever a server's parser makes of it (most
// read what the scanner refuses), so a caller deciding on requests must
// refuse one that may be JSON.
func (b *Body) Whole() bool { return !b.r.sc.Failed() && b.r.sc.Depth() == 0 && b.r.base < 0 }

// Close ends the body: a message not yet ended is dropped. It always
// returns nil.
func (b *Body) Close() error {
	if !b.closed {
		b.r.close()
		b.closed = true
	}
	return nil
}
