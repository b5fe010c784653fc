package mitm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"
)

// gate is a writer that blocks every write until let through (open
// closed), recording what it was given, or failing with err.
type gate struct {
	mu   sync.Mutex
	got  bytes.Buffer
	open chan struct{} // closed: writes pass
	err  error
}

func (g *gate) Write(p []byte) (int, error) {
	<-g.open
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err != nil {
		return 0, g.err
	}
	return g.got.Write(p)
}

func (g *gate) bytes() []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	return bytes.Clone(g.got.Bytes())
}

func TestWriteBehindSendsEverythingInOrder(t *testing.T) {
	g := &gate{open: make(chan struct{})}
	close(g.open)
	b := newWriteBehind(g)
	var want bytes.Buffer
	for i := range 5000 {
		line := fmt.Appendf(nil, "frame %d %s\n", i, bytes.Repeat([]byte{'x'}, i%300))
		want.Write(line)
		if n, err := b.Write(line); err != nil || n != len(line) {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 3*writeBehindMax/16+7) // larger than the bound: taken in parts
	want.Write(big)
	if n, err := b.Write(big); err != nil || n != len(big) {
		t.Fatalf("Write(big) = %d, %v", n, err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(g.bytes()) < want.Len(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("sent %d of %d bytes in 5 s", len(g.bytes()), want.Len())
		}
	}
	b.mu.Lock()
	held := b.buf
	b.mu.Unlock()
	if held != nil {
		t.Fatalf("an idle connection holds a %d-byte buffer", cap(held))
	}
	b.close()
	if !bytes.Equal(g.bytes(), want.Bytes()) {
		t.Fatalf("sent %d bytes, not the %d written in order", len(g.bytes()), want.Len())
	}
}

func TestWriteBehindBoundsWhatWaits(t *testing.T) {
	g := &gate{open: make(chan struct{})} // a guest that does not read
	b := newWriteBehind(g)
	b.drain = 100 * time.Millisecond
	wrote := make(chan int)
	go func() {
		n := 0
		for n < 4*writeBehindMax {
			k, err := b.Write(make([]byte, 1000))
			n += k
			if err != nil {
				break
			}
		}
		wrote <- n
	}()
	select {
	case n := <-wrote:
		t.Fatalf("%d bytes taken while nothing was sent: the bound does not hold", n)
	case <-time.After(300 * time.Millisecond):
	}
	b.mu.Lock()
	held := len(b.buf)
	b.mu.Unlock()
	if held > writeBehindMax {
		t.Fatalf("%d bytes held, more than writeBehindMax (%d)", held, writeBehindMax)
	}
	start := time.Now()
	b.close() // the sender is stuck: close gives up after drain
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("close waited %v for a sender that cannot send", d)
	}
	if n := <-wrote; n >= 4*writeBehindMax {
		t.Fatalf("the blocked writer was not released by close (wrote %d)", n)
	}
	close(g.open)
}

func TestWriteBehindReturnsTheSendError(t *testing.T) {
	boom := errors.New("guest connection reset")
	g := &gate{open: make(chan struct{}), err: boom}
	close(g.open)
	b := newWriteBehind(g)
	b.Write([]byte("first")) // taken; its send fails
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := b.Write([]byte("next"))
		if errors.Is(err, boom) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Write after a failed send = %v, want the send's error", err)
		}
		time.Sleep(time.Millisecond)
	}
	b.close()
	if _, err := b.Write([]byte("late")); err == nil {
		t.Fatal("Write after close succeeded")
	}
}

func TestWriteBehindCloseSendsWhatCameBefore(t *testing.T) {
	g := &gate{open: make(chan struct{})}
	b := newWriteBehind(g)
	b.Write([]byte("GOAWAY"))
	go func() { time.Sleep(50 * time.Millisecond); close(g.open) }()
	b.close()
	if got := string(g.bytes()); got != "GOAWAY" {
		t.Fatalf("sent %q before close returned, want GOAWAY", got)
	}
	if _, err := b.Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("Write after close = %v, want io.ErrClosedPipe", err)
	}
}
