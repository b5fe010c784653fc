package proto

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// handshakeFrames is what a well-behaved agent sends before anything else.
func handshakeFrames(t testing.TB) []byte {
	t.Helper()
	var b []byte
	for _, m := range []Message{Hello{Proto: Version, Agent: "hostile", Window: 1024}, Ready{}} {
		f, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = AppendFrame(b, f)
	}
	return b
}

func frames(t testing.TB, ms ...Message) []byte {
	t.Helper()
	var b []byte
	for _, m := range ms {
		f, err := Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = AppendFrame(b, f)
	}
	return b
}

// hostilePeer is the guest's end of a connection that replays a script of
// bytes and, after the host's Hello, never reads what the host writes: every
// later host write blocks until the connection is closed, as when guest
// root holds the agent's port and ignores it.
type hostilePeer struct {
	r       io.Reader
	writes  atomic.Int64
	closed  chan struct{}
	once    sync.Once
	atEnd   func() // called once, when the script is used up
	endOnce sync.Once
}

func newHostilePeer(script []byte, atEnd func()) *hostilePeer {
	return &hostilePeer{r: bytes.NewReader(script), closed: make(chan struct{}), atEnd: atEnd}
}

func (p *hostilePeer) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if err == io.EOF && p.atEnd != nil {
		p.endOnce.Do(p.atEnd)
	}
	return n, err
}

func (p *hostilePeer) Write(b []byte) (int, error) {
	if p.writes.Add(1) == 1 {
		return len(b), nil // the host's Hello
	}
	<-p.closed
	return 0, net.ErrClosed
}

func (p *hostilePeer) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}

// A guest that sends Pings without end and never reads the Pongs costs the
// host one pending Pong — on the commit before this test, one goroutine per
// Ping (3.9 GB in 22 s through a real VM).
func TestClientPingFloodIsBounded(t *testing.T) {
	const pings = 100_000
	script := handshakeFrames(t)
	for i := 0; i < pings; i++ {
		script = append(script, frames(t, Ping{Seq: uint64(i)})...)
	}
	base := runtime.NumGoroutine()
	var grew int
	peer := newHostilePeer(script, func() { grew = grownBy(base, 8) })
	cl, err := NewClient(context.Background(), peer, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	<-cl.Done()
	// The read loop and the pong loop, plus slack for the runtime.
	if grew > 8 {
		t.Fatalf("%d Pings from a peer that never reads left %d more goroutines; want at most 8", pings, grew)
	}
}

// What the guest sends that breaks the protocol cuts it off with
// ErrViolation; what is merely useless is ignored at a bounded cost.
func TestClientHostilePeer(t *testing.T) {
	bigLen := binary.BigEndian.AppendUint32(nil, MaxFrame+1)
	malformed := []byte{0, 0, 0, 6, byte(TypeExit), 0, 0, 0, 1, '{'}
	for _, tc := range []struct {
		name      string
		script    []byte
		violation bool
		why       string
	}{
		{"oversized frame", bigLen, true, "the reader refuses a length above MaxFrame before allocating"},
		{"malformed body", malformed, true, "a frame that does not decode means the peer is not our agent"},
		{"exec from the guest", frames(t, Exec{ID: 1, Argv: []string{"x"}}), true, "only the host starts sessions"},
		{"stdin from the guest", frames(t, Stdin{ID: 1, Data: []byte("x")}), true, "only the host writes stdin"},
		{"second hello", frames(t, Hello{Proto: Version}), true, "the handshake is over"},
		{"second ready", frames(t, Ready{}), true, "the handshake is over"},
		{"shutdown from the guest", frames(t, Shutdown{}), true, "only the host powers the guest off"},
		{"freeze from the guest", frames(t, Freeze{}), true, "only the host freezes the guest"},
		{"thaw from the guest", frames(t, Thaw{Restored: true}), true, "only the host thaws it"},
		{"frozen nobody asked for", frames(t, Frozen{Refused: "x"}), false, "no Freeze waits: ignored with a rate-limited log"},
		{"thawed nobody asked for", frames(t, Thawed{}), false, "no Thaw waits: ignored with a rate-limited log"},
		{"started, window, error of a session never opened", frames(t, Started{ID: 77, PID: 1}, Window{ID: 77, Stream: StreamStdin, N: 1},
			Error{ID: 77, Msg: "x"}), false, "another host's session, before a restore: ignored"},
		{"stdout of a session never opened", frames(t, Stdout{ID: 77, Data: make([]byte, 64<<10)}), false, "dropped: no session means no buffer to fill"},
		{"exit of a session never opened", frames(t, Exit{ID: 77, Code: 1}), false, "ignored"},
		{"exec event of a session never opened", frames(t, ExecEvent{ID: 77, Argv: []string{"forged"}}), false, "handed to OnEvent, whose caller ignores what it did not start"},
		{"unknown type", frames(t, Unknown{Frame: Frame{Type: 200, Body: []byte("x")}}), false, "a newer agent may add types; ignored with a rate-limited log"},
		{"agent error without session", frames(t, Error{Msg: "boom"}), false, "logged with a rate limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peer := newHostilePeer(append(handshakeFrames(t), tc.script...), nil)
			cl, err := NewClient(context.Background(), peer, ClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-cl.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("the client did not end at the end of the script")
			}
			if got := errors.Is(cl.Err(), ErrViolation); got != tc.violation {
				t.Fatalf("violation = %v, want %v (%s): %v", got, tc.violation, tc.why, cl.Err())
			}
		})
	}
}

// oneExecAgent is a client whose fake agent answers the first Exec with
// script, then reads and drops everything.
func oneExecAgent(t *testing.T, script func(c *Conn, ex Exec)) *Client {
	t.Helper()
	a, h := net.Pipe()
	t.Cleanup(func() { a.Close() })
	fakeAgent(t, a, func(c *Conn) {
		m, _ := c.Recv()
		script(c, m.(Exec))
		_, _ = io.Copy(io.Discard, a)
	})
	cl, err := NewClient(context.Background(), h, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// A peer that sends more credit than MaxWindow is cut off.
func TestClientCreditViolation(t *testing.T) {
	cl := oneExecAgent(t, func(c *Conn, ex Exec) {
		_ = c.Send(Started{ID: ex.ID, PID: 1})
		_ = c.Send(Window{ID: ex.ID, Stream: StreamStdin, N: MaxWindow})
	})
	s, err := cl.Exec(context.Background(), Exec{Argv: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(); !errors.Is(err, ErrViolation) || !errors.Is(err, ErrWindowExceeded) {
		t.Fatalf("wait: %v", err)
	}
}

// The host opens at most MaxSessions sessions at once.
func TestClientCapsSessions(t *testing.T) {
	a, h := net.Pipe()
	defer a.Close()
	fakeAgent(t, a, func(c *Conn) {
		for {
			m, err := c.Recv()
			if err != nil {
				return
			}
			if ex, ok := m.(Exec); ok {
				_ = c.Send(Started{ID: ex.ID, PID: int(ex.ID)})
			}
		}
	})
	cl, err := NewClient(context.Background(), h, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := 0; i < MaxSessions; i++ {
		if _, err := cl.Exec(context.Background(), Exec{Argv: []string{"sleep"}}); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	if _, err := cl.Exec(context.Background(), Exec{Argv: []string{"one more"}}); !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("session %d: %v, want ErrTooManySessions", MaxSessions+1, err)
	}
}

// The host's record of a session is what it sent and when it saw it end.
func TestSessionExecAndTimes(t *testing.T) {
	cl := oneExecAgent(t, func(c *Conn, ex Exec) {
		_ = c.Send(Started{ID: ex.ID, PID: 5})
		// The guest claims another command and another time; the host
		// keeps its own.
		_ = c.Send(ExecEvent{ID: ex.ID, Argv: []string{"forged"}, Start: 1})
		_ = c.Send(Exit{ID: ex.ID, Code: 0})
	})
	before := time.Now()
	s, err := cl.Exec(context.Background(), Exec{Argv: []string{"true"}, Dir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(); err != nil {
		t.Fatal(err)
	}
	sent, ended := s.Times()
	if sent.Before(before) || ended.Before(sent) || time.Since(ended) > time.Minute {
		t.Fatalf("times %v .. %v (test began %v)", sent, ended, before)
	}
	if ex := s.Exec(); ex.Argv[0] != "true" || ex.Dir != "/tmp" || ex.ID != s.ID() {
		t.Fatalf("exec %#v", ex)
	}
}

// deafAgent is a fake agent that starts the first command it is asked for,
// then never reads again — guest root holding the agent's port — and, with
// flood, sends Pings without end meanwhile. net.Pipe has no buffer: every
// host write after that blocks at once, as one does once the socket and
// the port's buffers are full.
func deafAgent(t *testing.T, flood bool, opts ClientOptions) *Client {
	t.Helper()
	a, h := net.Pipe()
	t.Cleanup(func() { a.Close() })
	fakeAgent(t, a, func(c *Conn) {
		m, _ := c.Recv()
		if ex, ok := m.(Exec); ok {
			_ = c.Send(Started{ID: ex.ID, PID: 7})
		}
		for seq := uint64(0); flood; seq++ {
			if c.Send(Ping{Seq: seq}) != nil {
				return
			}
		}
	})
	cl, err := NewClient(context.Background(), h, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// A guest that stops reading the control channel is cut off once a write
// to it has waited for the write timeout: the signal that found the
// channel blocked returns, the connection ends as a violation naming the
// stall (for the caller to record and stop the VM), and later sends fail
// at once. Before the write timeout, Signal blocked for ever under the one
// write lock — and with it capsem run's --timeout, Ctrl-C and stop.
func TestClientDeafPeerIsCutOff(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flood bool
		why   string
	}{
		{"no reads", false, "the signal's own write is what blocks"},
		{"no reads, ping flood", true, "a Pong's write blocks first, the signal waits behind it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const timeout = 300 * time.Millisecond
			cl := deafAgent(t, tc.flood, ClientOptions{WriteTimeout: timeout})
			s, err := cl.Exec(context.Background(), Exec{Argv: []string{"sleep", "600"}})
			if err != nil {
				t.Fatal(err)
			}
			sent := make(chan error, 1)
			start := time.Now()
			go func() { sent <- s.Signal("KILL") }()
			select {
			case err := <-sent:
				if !errors.Is(err, ErrStalled) && !errors.Is(err, ErrClosed) {
					t.Errorf("Signal = %v, want the stall (%s)", err, tc.why)
				}
			case <-time.After(10 * timeout):
				t.Fatalf("Signal to a peer that does not read still blocks after %v (%s)", 10*timeout, tc.why)
			}
			select {
			case <-cl.Done():
			case <-time.After(10 * timeout):
				t.Fatal("the connection to a peer that does not read did not end")
			}
			if err := cl.Err(); !errors.Is(err, ErrViolation) || !errors.Is(err, ErrStalled) {
				t.Fatalf("the connection ended with %v, want ErrViolation wrapping ErrStalled", err)
			}
			t.Logf("cut off %v after the signal", time.Since(start).Round(time.Millisecond))
			if _, err := s.Wait(); !errors.Is(err, ErrClosed) {
				t.Errorf("session ended with %v, want ErrClosed", err)
			}
			begin := time.Now()
			if err := s.Signal("INT"); err == nil || time.Since(begin) > timeout/2 {
				t.Errorf("a signal after the cut: %v after %v, want an error at once", err, time.Since(begin))
			}
		})
	}
}

// While one write waits for a peer that does not read, a Ping (the
// watchdog's) ends with its context, and an Exec with its own — neither
// waits for the write timeout.
func TestClientWaitForBlockedWriteEndsWithContext(t *testing.T) {
	cl := deafAgent(t, false, ClientOptions{WriteTimeout: time.Minute})
	s, err := cl.Exec(context.Background(), Exec{Argv: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Signal("INT") }() // blocks: nobody reads
	time.Sleep(50 * time.Millisecond)
	for _, tc := range []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"ping", func(ctx context.Context) error { _, err := cl.Ping(ctx); return err }},
		{"exec", func(ctx context.Context) error { _, err := cl.Exec(ctx, Exec{Argv: []string{"true"}}); return err }},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		err := tc.call(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 2*time.Second {
			t.Errorf("%s: %v after %v, want the context's deadline after ~100ms", tc.name, err, time.Since(start))
		}
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// A guest that fills a session's output window with 1-byte frames holds
// no more host memory than the window allows (limits.go: twice it): each
// frame's bytes are copied into the inbox's buffers, not kept as one
// allocation and one slice header each. Before, a 1 MiB window of 1-byte
// frames held ~25 MiB (the frame bodies and a 24-byte header each).
func TestClientTinyFramesBoundedMemory(t *testing.T) {
	const window = 1 << 20
	written := make(chan struct{})
	cl := oneExecAgent(t, func(c *Conn, ex Exec) {
		_ = c.Send(Started{ID: ex.ID, PID: 1})
		f, _ := Encode(Stdout{ID: ex.ID, Data: []byte{'x'}})
		one, _ := AppendFrame(nil, f)
		script := bytes.Repeat(one, window)
		_, _ = c.rw.Write(script) // returns once the host has read it all (net.Pipe)
		close(written)
	})
	base := heapInUse()
	s, err := cl.Exec(context.Background(), Exec{Argv: []string{"yes"}, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	<-written
	deadline := time.Now().Add(time.Minute)
	for s.stdout.Buffered() < window && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := s.stdout.Buffered(); n != window {
		t.Fatalf("%d bytes queued, want the whole window (%d)", n, window)
	}
	grew := heapInUse() - base
	t.Logf("%d one-byte frames queued: the heap grew %.1f MiB for a %d KiB window", window, float64(grew)/(1<<20), window>>10)
	if grew > 2*window+(256<<10) {
		t.Errorf("a %d KiB window of 1-byte frames holds %.1f MiB of the host's heap; the bound is twice the window", window>>10, float64(grew)/(1<<20))
	}
	runtime.KeepAlive(s)
}
