package mcp

import (
	"io"
	"sync/atomic"
	"testing"
	"time"
)

// endlessEvents is an upstream event stream that never ends, counting what
// was read of it.
type endlessEvents struct {
	read   atomic.Int64
	closed chan struct{}
}

func (e *endlessEvents) Read(b []byte) (int, error) {
	select {
	case <-e.closed:
		return 0, io.ErrClosedPipe
	default:
	}
	ev := []byte("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n")
	n := 0
	for n+len(ev) <= len(b) {
		n += copy(b[n:], ev)
	}
	e.read.Add(int64(n))
	return n, nil
}

func (e *endlessEvents) Close() error { close(e.closed); return nil }

func TestSSERewriterReadsNoFurtherAheadThanTheGuest(t *testing.T) {
	src := &endlessEvents{closed: make(chan struct{})}
	r := newSSERewriter(src, func([]byte) []byte { return nil })
	time.Sleep(200 * time.Millisecond) // the guest reads nothing
	// What is held: sseMaxAhead ready, one read of 32 KiB past it, and at
	// most one event being cut.
	if n := src.read.Load(); n > sseMaxAhead+64<<10 {
		t.Errorf("read %d bytes ahead of a guest that reads nothing, want at most ~%d", n, sseMaxAhead)
	}
	buf := make([]byte, 64<<10)
	if n, err := r.Read(buf); n == 0 || err != nil {
		t.Fatalf("Read = %d, %v", n, err)
	}
	done := make(chan struct{})
	go func() { r.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return: the pump is stuck")
	}
	if big := make([]byte, sseMaxInjected+1); r.inject(big) {
		t.Errorf("an injection past sseMaxInjected was queued")
	}
}
