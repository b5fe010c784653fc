package proto

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// every message type, with fields set, for round trips and fuzz seeds.
func sampleMessages() []Message {
	return []Message{
		Hello{Proto: Version, Agent: "0.1.0", Kernel: "6.1.0-28-cloud-amd64", Arch: "amd64", Window: 65536},
		Hello{Proto: Version, Host: "capsem dev", Time: 1700000000123456789, CA: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"},
		Ready{Uptime: 1500000000, Interface: "eth0", Addr: "198.18.0.2/24", Gateway: "198.18.0.1", DNS: []string{"198.18.0.1"}, MTU: 1500,
			Root: "erofs /dev/vda", Workspace: "/workspace", WSFS: "9p", CAFiles: []string{"/etc/ssl/certs/ca-certificates.crt"},
			Modules: []string{"virtio_net"}, Lockdown: []string{"kernel.modules_disabled=1"}, Env: []string{"PATH=/usr/bin:/bin"}, Warnings: []string{"x"}},
		Shutdown{Reason: "done"},
		Exec{ID: 7, Argv: []string{"sh", "-c", "echo hi"}, Env: []string{"TERM=xterm", "A=b=c"}, Dir: "/workspace", TTY: true, Rows: 50, Cols: 132, Window: 1 << 16},
		Started{ID: 7, PID: 42},
		Stdin{ID: 7, Data: []byte("hello\n")},
		StdinClose{ID: 7},
		Signal{ID: 7, Sig: "INT"},
		Resize{ID: 7, Rows: 40, Cols: 100},
		Stdout{ID: 7, Data: []byte{0, 1, 2, 0xff}},
		Stderr{ID: 7, Data: []byte("oops\n")},
		Exit{ID: 7, Code: 130, Signal: "INT"},
		Error{ID: 7, Msg: `exec: "nope": executable file not found in $PATH`, Code: 127},
		Error{Msg: "protocol"},
		Window{ID: 7, Stream: StreamStderr, N: 32768},
		FileEvent{Action: ActionRenamed, Path: "a/new.txt", OldPath: "a/old.txt", Size: 12, Time: 1700000000000000000},
		FileEvent{Action: ActionCreated, Path: "dir", Dir: true, Time: 1},
		ExecEvent{ID: 7, Argv: []string{"ls"}, Dir: "/workspace", PID: 42, Start: 1700000000000000000, Duration: 12345, ExitCode: 0},
		Ping{Seq: 9},
		Pong{Seq: 9},
		Freeze{Reason: "snapshot base"},
		Frozen{},
		Frozen{Refused: "the workspace /workspace is in use", Holders: []string{"1234 bash (cwd)", "99 python3 (fd 3)"}},
		Thaw{Time: 1700000000123456789, Seed: bytes.Repeat([]byte{0xa5}, MinSeed), Restored: true},
		Thawed{Uptime: 2500000000, Warnings: []string{"set clock: operation not permitted"}, Workspace: "/workspace", WSFS: "9p"},
	}
}

func TestRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	c := NewConn(&buf)
	msgs := sampleMessages()
	for _, m := range msgs {
		if err := c.Send(m); err != nil {
			t.Fatalf("send %T: %v", m, err)
		}
	}
	for _, want := range msgs {
		got, err := c.Recv()
		if err != nil {
			t.Fatalf("recv %T: %v", want, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip:\n got %#v\nwant %#v", got, want)
		}
	}
	if _, err := c.Recv(); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

func TestWireFormat(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFrame(&buf, Frame{Type: TypeStdout, ID: 0x01020304, Body: []byte("hi")}); err != nil {
		t.Fatal(err)
	}
	want := []byte{0, 0, 0, 7, byte(TypeStdout), 1, 2, 3, 4, 'h', 'i'}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("stdout frame = % x, want % x", buf.Bytes(), want)
	}
	f, err := Encode(Signal{ID: 1, Sig: "TERM"})
	if err != nil {
		t.Fatal(err)
	}
	if string(f.Body) != `{"sig":"TERM"}` || f.ID != 1 {
		t.Fatalf("signal frame = %d %s", f.ID, f.Body)
	}
	f, _ = Encode(Window{ID: 2, Stream: StreamStdin, N: 0x10000})
	if !bytes.Equal(f.Body, []byte{0, 0, 1, 0, 0}) {
		t.Fatalf("window body = % x", f.Body)
	}
}

func TestReaderErrors(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, io.EOF},
		{"partial length", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"partial header", []byte{0, 0, 0, 5, 1, 0}, io.ErrUnexpectedEOF},
		{"partial body", []byte{0, 0, 0, 9, 10, 0, 0, 0, 1, 'a'}, io.ErrUnexpectedEOF},
		{"too short", []byte{0, 0, 0, 4, 1, 0, 0, 0}, ErrFrameTooShort},
		{"zero length", []byte{0, 0, 0, 0}, ErrFrameTooShort},
		{"too large", []byte{0, 0x10, 0, 1, 1, 0, 0, 0, 0}, ErrFrameTooLarge},
		{"huge", []byte{0xff, 0xff, 0xff, 0xff}, ErrFrameTooLarge},
	}
	for _, c := range cases {
		_, err := NewReader(bytes.NewReader(c.in)).ReadFrame()
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	// The largest legal frame is read.
	big := make([]byte, MaxBody)
	var buf bytes.Buffer
	if err := WriteFrame(&buf, Frame{Type: TypeStdout, ID: 1, Body: big}); err != nil {
		t.Fatal(err)
	}
	f, err := NewReader(&buf).ReadFrame()
	if err != nil || len(f.Body) != MaxBody {
		t.Fatalf("max frame: %v, %d bytes", err, len(f.Body))
	}
	if err := WriteFrame(io.Discard, Frame{Type: TypeStdout, Body: make([]byte, MaxBody+1)}); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("writing an oversized body: %v", err)
	}
}

func TestDecodeMalformedAndUnknown(t *testing.T) {
	for _, f := range []Frame{
		{Type: TypeExec, ID: 1, Body: []byte("{")},
		{Type: TypeExec, ID: 1, Body: []byte(`{"argv":"notalist"}`)},
		{Type: TypeWindow, ID: 1, Body: []byte{1, 2}},
		{Type: TypeStdinClose, ID: 1, Body: []byte{1}},
		{Type: TypeHello, Body: []byte("[]")},
	} {
		if _, err := Decode(f); !errors.Is(err, ErrMalformed) {
			t.Errorf("Decode(%v %q) = %v, want ErrMalformed", f.Type, f.Body, err)
		}
	}
	m, err := Decode(Frame{Type: 200, ID: 3, Body: []byte("future")})
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := m.(Unknown); !ok || u.Frame.Type != 200 || u.Type() != 200 {
		t.Fatalf("unknown type decoded as %#v", m)
	}
	// An empty JSON body is the zero value; unknown fields are ignored.
	m, err = Decode(Frame{Type: TypeShutdown})
	if err != nil || m != (Shutdown{}) {
		t.Fatalf("empty shutdown: %#v %v", m, err)
	}
	m, err = Decode(Frame{Type: TypeResize, ID: 4, Body: []byte(`{"rows":1,"cols":2,"future":true}`)})
	if err != nil || m != (Resize{ID: 4, Rows: 1, Cols: 2}) {
		t.Fatalf("resize with an unknown field: %#v %v", m, err)
	}
	if _, err := Encode(nil); err == nil {
		t.Fatal("encoding nil succeeded")
	}
	// A malformed body leaves the stream in step.
	var buf bytes.Buffer
	_ = WriteFrame(&buf, Frame{Type: TypeExec, ID: 1, Body: []byte("{")})
	c := NewConn(&buf)
	_ = c.Send(Ping{Seq: 1})
	if _, err := c.Recv(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("first: %v", err)
	}
	if m, err := c.Recv(); err != nil || m != (Ping{Seq: 1}) {
		t.Fatalf("after a malformed frame: %#v %v", m, err)
	}
}

func TestTypeString(t *testing.T) {
	if TypeStdinClose.String() != "stdin-close" || Type(99).String() != "type(99)" {
		t.Fatal(TypeStdinClose.String(), Type(99).String())
	}
}

func TestHandshake(t *testing.T) {
	a, h := net.Pipe()
	defer a.Close()
	defer h.Close()
	errc := make(chan error, 1)
	var fromHost Hello
	go func() {
		var err error
		fromHost, err = NewConn(a).AgentHandshake(Hello{Agent: "a1", Kernel: "k"})
		errc <- err
	}()
	fromAgent, err := NewConn(h).HostHandshake(Hello{Host: "h1", CA: "pem"})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if fromAgent.Agent != "a1" || fromAgent.Kernel != "k" || fromAgent.Proto != Version {
		t.Fatalf("agent hello %#v", fromAgent)
	}
	if fromHost.Host != "h1" || fromHost.CA != "pem" {
		t.Fatalf("host hello %#v", fromHost)
	}
}

func TestHandshakeRefusals(t *testing.T) {
	// A peer with another version is told why, and refused.
	a, h := net.Pipe()
	defer a.Close()
	defer h.Close()
	go func() {
		ac := NewConn(a)
		_ = ac.Send(Hello{Proto: Version + 1})
		m, _ := ac.Recv()
		_ = ac.Send(m) // echo the refusal back for the check below
	}()
	hc := NewConn(h)
	if _, err := hc.HostHandshake(Hello{}); !errors.Is(err, ErrHandshake) || !strings.Contains(err.Error(), "version") {
		t.Fatalf("version mismatch: %v", err)
	}
	if m, _ := hc.Recv(); m == nil || m.Type() != TypeError {
		t.Fatalf("the refused peer was sent %#v, want an Error", m)
	}

	// Something other than Hello first.
	var buf bytes.Buffer
	_ = NewConn(&buf).Send(Exec{ID: 1})
	if _, err := NewConn(&readWriter{&buf, io.Discard}).HostHandshake(Hello{}); !errors.Is(err, ErrHandshake) {
		t.Fatalf("exec before hello: %v", err)
	}
	// The stream ends.
	if _, err := NewConn(&readWriter{&bytes.Buffer{}, io.Discard}).HostHandshake(Hello{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("empty stream: %v", err)
	}
	// An excessive window.
	buf.Reset()
	_ = NewConn(&buf).Send(Hello{Proto: Version, Window: MaxWindow + 1})
	if _, err := NewConn(&readWriter{&buf, io.Discard}).HostHandshake(Hello{}); !errors.Is(err, ErrHandshake) {
		t.Fatalf("huge window: %v", err)
	}
}

type readWriter struct {
	io.Reader
	io.Writer
}

func TestSendAfterWriteError(t *testing.T) {
	a, b := net.Pipe()
	b.Close()
	c := NewConn(a)
	if err := c.Send(Ping{}); err == nil {
		t.Fatal("send to a closed pipe succeeded")
	}
	if err := c.Send(Ping{}); err == nil {
		t.Fatal("second send succeeded")
	}
}

func TestCredit(t *testing.T) {
	c := NewCredit(10)
	if n, err := c.Take(4); n != 4 || err != nil {
		t.Fatal(n, err)
	}
	if n, _ := c.Take(100); n != 6 {
		t.Fatal(n)
	}
	got := make(chan int)
	go func() {
		n, _ := c.Take(100)
		got <- n
	}()
	select {
	case n := <-got:
		t.Fatalf("Take without credit returned %d", n)
	case <-time.After(20 * time.Millisecond):
	}
	if err := c.Add(3); err != nil {
		t.Fatal(err)
	}
	if n := <-got; n != 3 {
		t.Fatal(n)
	}
	if err := c.Add(MaxWindow + 1); !errors.Is(err, ErrWindowExceeded) {
		t.Fatalf("excess credit: %v", err)
	}
	go func() { time.Sleep(10 * time.Millisecond); c.Close(errors.New("gone")) }()
	if _, err := c.Take(1); err == nil || err.Error() != "gone" {
		t.Fatalf("after close: %v", err)
	}
}

func TestInbox(t *testing.T) {
	var mu sync.Mutex
	var acked uint32
	b := NewInbox(1024, func(n uint32) { mu.Lock(); acked += n; mu.Unlock() })
	if err := b.Push(make([]byte, 600)); err != nil {
		t.Fatal(err)
	}
	if err := b.Push(make([]byte, 500)); !errors.Is(err, ErrWindowExceeded) {
		t.Fatalf("overrun: %v", err)
	}
	p := make([]byte, 100)
	n, _ := b.Read(p)
	if n != 100 || acked != 0 {
		t.Fatalf("read %d, acked %d", n, acked)
	}
	// Consumed but unacknowledged bytes still count against the window.
	if err := b.Push(make([]byte, 500)); !errors.Is(err, ErrWindowExceeded) {
		t.Fatalf("overrun counting unacked bytes: %v", err)
	}
	n, _ = b.Read(p)
	n2, _ := b.Read(p)
	if n+n2 != 200 || acked != 300 {
		t.Fatalf("read %d, acked %d, want ack of 300 (a quarter window reached)", n+n2, acked)
	}
	if err := b.Push(make([]byte, 700)); err != nil {
		t.Fatalf("push within the returned credit: %v", err)
	}
	b.CloseWrite(nil)
	total := 0
	for {
		n, err := b.Read(make([]byte, 1000))
		total += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if total != 300+700 {
		t.Fatalf("drained %d bytes after CloseWrite", total)
	}
	if err := b.Push([]byte("x")); err != nil {
		t.Fatalf("push after close: %v", err)
	}

	b = NewInbox(0, nil)
	if b.Window() != DefaultWindow {
		t.Fatal(b.Window())
	}
	_ = b.Push([]byte("abc"))
	b.CloseWithError(errors.New("boom"))
	if _, err := b.Read(p); err == nil || err.Error() != "boom" {
		t.Fatalf("after CloseWithError: %v", err)
	}
}

// fakeAgent plays the agent's side of a connection in a test.
func fakeAgent(t *testing.T, conn net.Conn, script func(c *Conn)) {
	t.Helper()
	go func() {
		c := NewConn(conn)
		if _, err := c.AgentHandshake(Hello{Agent: "fake", Window: 1024, Features: AgentFeatures}); err != nil {
			t.Errorf("fake agent handshake: %v", err)
			return
		}
		_ = c.Send(Ready{Addr: "198.18.0.2/24"})
		script(c)
	}()
}

func TestClient(t *testing.T) {
	a, h := net.Pipe()
	defer a.Close()
	var events []Message
	var evmu sync.Mutex
	fakeAgent(t, a, func(c *Conn) {
		_ = c.Send(FileEvent{Action: ActionCreated, Path: "f"})
		for {
			m, err := c.Recv()
			if err != nil {
				return
			}
			switch m := m.(type) {
			case Exec:
				if m.Argv[0] == "missing" {
					_ = c.Send(Error{ID: m.ID, Msg: "not found", Code: 127})
					continue
				}
				_ = c.Send(Started{ID: m.ID, PID: 99})
				_ = c.Send(Stdout{ID: m.ID, Data: []byte("out")})
				_ = c.Send(Stderr{ID: m.ID, Data: []byte("err")})
			case Stdin:
				_ = c.Send(Window{ID: m.ID, Stream: StreamStdin, N: uint32(len(m.Data))})
				_ = c.Send(Stdout{ID: m.ID, Data: m.Data})
			case StdinClose:
				_ = c.Send(ExecEvent{ID: m.ID, Argv: []string{"x"}})
				_ = c.Send(Exit{ID: m.ID, Code: 3})
			case Ping:
				_ = c.Send(Pong(m))
			case Shutdown:
				c.Close()
				return
			}
		}
	})
	cl, err := NewClient(context.Background(), h, ClientOptions{Host: "test", OnEvent: func(m Message) {
		evmu.Lock()
		events = append(events, m)
		evmu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Hello().Agent != "fake" || cl.Ready().Addr != "198.18.0.2/24" {
		t.Fatalf("hello %#v ready %#v", cl.Hello(), cl.Ready())
	}
	if _, err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = cl.Exec(context.Background(), Exec{Argv: []string{"missing"}})
	var perr Error
	if !errors.As(err, &perr) || perr.Code != 127 {
		t.Fatalf("exec of a missing command: %v", err)
	}
	s, err := cl.Exec(context.Background(), Exec{Argv: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if s.PID() != 99 {
		t.Fatal(s.PID())
	}
	// 3000 bytes of stdin through a 1024-byte window.
	in := bytes.Repeat([]byte("0123456789"), 300)
	var out, errOut bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); io.Copy(&out, s.Stdout()) }()
	go func() { defer wg.Done(); io.Copy(&errOut, s.Stderr()) }()
	if _, err := s.Write(in); err != nil {
		t.Fatal(err)
	}
	if err := s.CloseStdin(); err != nil {
		t.Fatal(err)
	}
	exit, err := s.Wait()
	if err != nil || exit.Code != 3 {
		t.Fatalf("wait: %#v %v", exit, err)
	}
	wg.Wait()
	if out.String() != "out"+string(in) || errOut.String() != "err" {
		t.Fatalf("stdout %d bytes, stderr %q", out.Len(), errOut.String())
	}
	if _, err := s.Write([]byte("late")); err == nil {
		t.Fatal("stdin write after exit succeeded")
	}
	if err := cl.Shutdown("test"); err != nil {
		t.Fatal(err)
	}
	<-cl.Done()
	if !errors.Is(cl.Err(), ErrClosed) {
		t.Fatalf("after shutdown: %v", cl.Err())
	}
	if _, err := cl.Exec(context.Background(), Exec{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("exec after close: %v", err)
	}
	evmu.Lock()
	defer evmu.Unlock()
	if len(events) != 2 || events[0].Type() != TypeFileEvent || events[1].Type() != TypeExecEvent {
		t.Fatalf("events %#v", events)
	}
}

// A guest that sends more output than the window allows loses the
// connection; the host never buffers beyond the window.
func TestClientWindowViolation(t *testing.T) {
	a, h := net.Pipe()
	defer a.Close()
	fakeAgent(t, a, func(c *Conn) {
		m, _ := c.Recv()
		ex := m.(Exec)
		_ = c.Send(Started{ID: ex.ID, PID: 1})
		for i := 0; i < 3; i++ {
			_ = c.Send(Stdout{ID: ex.ID, Data: make([]byte, ex.Window/2)})
		}
		_, _ = io.Copy(io.Discard, a)
	})
	cl, err := NewClient(context.Background(), h, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.Exec(context.Background(), Exec{Argv: []string{"flood"}, Window: 4096})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Wait()
	if !errors.Is(err, ErrClosed) || !errors.Is(err, ErrWindowExceeded) {
		t.Fatalf("wait: %v", err)
	}
	if _, err := io.ReadAll(s.Stdout()); !errors.Is(err, ErrWindowExceeded) {
		t.Fatalf("stdout after a violation: %v", err)
	}
}

func TestClientHandshakeFailures(t *testing.T) {
	// The agent fails before Ready.
	a, h := net.Pipe()
	go func() {
		c := NewConn(a)
		if _, err := c.AgentHandshake(Hello{}); err == nil {
			_ = c.Send(Error{Msg: "root fs missing"})
		}
		a.Close()
	}()
	if _, err := NewClient(context.Background(), h, ClientOptions{}); err == nil || !strings.Contains(err.Error(), "root fs missing") {
		t.Fatalf("agent error before ready: %v", err)
	}
	// Nobody answers: the context ends the handshake.
	_, h = net.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := NewClient(ctx, h, ClientOptions{}); !errors.Is(err, ErrHandshake) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("silent agent: %v", err)
	}
}

// The connection ending fails running sessions but keeps their buffered
// output readable.
func TestClientConnectionLoss(t *testing.T) {
	a, h := net.Pipe()
	fakeAgent(t, a, func(c *Conn) {
		m, _ := c.Recv()
		ex := m.(Exec)
		_ = c.Send(Started{ID: ex.ID, PID: 1})
		_ = c.Send(Stdout{ID: ex.ID, Data: []byte("partial")})
		a.Close()
	})
	cl, err := NewClient(context.Background(), h, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.Exec(context.Background(), Exec{Argv: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(); !errors.Is(err, ErrClosed) {
		t.Fatalf("wait: %v", err)
	}
	out, err := io.ReadAll(s.Stdout())
	if string(out) != "partial" || !errors.Is(err, ErrClosed) {
		t.Fatalf("stdout %q, %v", out, err)
	}
}

// Small pushes are copied into the inbox's own buffers and large ones kept:
// whatever the mix and however the consumer reads, the bytes come out in
// order, and the inbox's buffers stay within twice what is queued.
func TestInboxCoalescesInOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	b := NewInbox(MaxWindow, nil)
	var want, got bytes.Buffer
	buf := make([]byte, 10_000)
	for round := 0; round < 2000; round++ {
		var n int
		switch rng.IntN(3) {
		case 0:
			n = 1 + rng.IntN(16)
		case 1:
			n = 1 + rng.IntN(smallPush)
		default:
			n = smallPush + 1 + rng.IntN(3*smallPush)
		}
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		want.Write(p)
		if err := b.Push(p); err != nil {
			t.Fatal(err)
		}
		b.mu.Lock()
		held := 0
		for _, c := range b.chunks {
			held += cap(c)
		}
		queued := b.queued
		b.mu.Unlock()
		if held > 2*queued+smallPush {
			t.Fatalf("round %d: %d bytes of buffers for %d queued", round, held, queued)
		}
		if rng.IntN(2) == 0 {
			k, _ := b.Read(buf[:1+rng.IntN(len(buf))])
			got.Write(buf[:k])
		}
	}
	b.CloseWrite(nil)
	rest, _ := io.ReadAll(b)
	got.Write(rest)
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("read %d bytes that differ from the %d pushed", got.Len(), want.Len())
	}
}
