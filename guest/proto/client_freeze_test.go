package proto

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func TestFreezeThawWire(t *testing.T) {
	for _, c := range []struct {
		m    Message
		typ  Type
		body string
		why  string
	}{
		{Freeze{Reason: "fork"}, 19, `{"reason":"fork"}`, "the next free type after Pong"},
		{Frozen{}, 20, `{}`, "frozen: nothing refused"},
		{Frozen{Refused: "busy", Holders: []string{"1 sh (cwd)"}}, 20, `{"refused":"busy","holders":["1 sh (cwd)"]}`, "refused, with who holds the workspace"},
		{Thaw{Time: 5, Seed: []byte{1, 2, 3}, Restored: true}, 21, `{"time":5,"seed":"AQID","restored":true}`, "the seed travels as base64 in JSON"},
		{Thawed{Uptime: 9, Workspace: "/workspace", WSFS: "9p"}, 22, `{"uptime_ns":9,"workspace":"/workspace","ws_fs":"9p"}`, "named like Ready's fields"},
	} {
		f, err := Encode(c.m)
		if err != nil {
			t.Fatalf("%T: %v", c.m, err)
		}
		if f.Type != c.typ || f.ID != 0 || string(f.Body) != c.body {
			t.Errorf("%T: type %d id %d body %s, want type %d body %s (%s)", c.m, f.Type, f.ID, f.Body, c.typ, c.body, c.why)
		}
	}
	// An old peer's view: a type it does not know is Unknown, not an error.
	if m, err := Decode(Frame{Type: 23, Body: []byte("{}")}); err != nil || m.Type() != 23 {
		t.Fatalf("a type after Thawed: %v %v", m, err)
	}
}

// Hold queues whole frames (copies: the caller reuses its buffer), in
// order; Release writes its message first, then them; Drop discards them.
func TestConnHold(t *testing.T) {
	var buf bytes.Buffer
	c := NewConn(&buf)
	if err := c.Hold(context.Background(), Frozen{}); err != nil {
		t.Fatal(err)
	}
	data := []byte("first")
	if err := c.Send(Stdout{ID: 1, Data: data}); err != nil {
		t.Fatal(err)
	}
	copy(data, "XXXXX")
	_ = c.Send(Exit{ID: 1, Code: 2})
	if !c.Holding() {
		t.Fatal("not holding after Hold")
	}
	if got := frames(t, Frozen{}); !bytes.Equal(buf.Bytes(), got) {
		t.Fatalf("written while holding: % x", buf.Bytes())
	}
	buf.Reset()
	if err := c.Release(context.Background(), Thawed{Uptime: 1}); err != nil {
		t.Fatal(err)
	}
	if want := frames(t, Thawed{Uptime: 1}, Stdout{ID: 1, Data: []byte("first")}, Exit{ID: 1, Code: 2}); !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("released % x\nwant     % x", buf.Bytes(), want)
	}
	if c.Holding() {
		t.Fatal("holding after Release")
	}

	buf.Reset()
	_ = c.Hold(context.Background(), nil)
	_ = c.Send(Pong{Seq: 1})
	if n := c.Drop(); n != 1 {
		t.Fatalf("dropped %d frames, want 1", n)
	}
	_ = c.Send(Pong{Seq: 2})
	_ = c.Release(context.Background(), nil)
	if want := frames(t, Pong{Seq: 2}); !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("after Drop: % x, want only what was sent after it", buf.Bytes())
	}
}

// Rebind moves a holding Conn to a new stream: what was held is written
// there on Release, the new stream is read, and a write error of the old
// one is forgotten. Not holding, it is refused.
func TestConnRebind(t *testing.T) {
	var old, next bytes.Buffer
	c := NewConn(&old)
	if err := c.Rebind(&next); err == nil {
		t.Fatal("rebind while not holding: no error")
	}
	_ = c.Hold(context.Background(), Frozen{})
	_ = c.Send(Pong{Seq: 1})
	c.werr = errors.New("the old stream broke")
	next.Write(frames(t, Thaw{Time: 5}))
	if err := c.Rebind(&next); err != nil {
		t.Fatal(err)
	}
	if m, err := c.Recv(); err != nil || m.(Thaw).Time != 5 {
		t.Fatalf("read from the new stream: %v %v", m, err)
	}
	if err := c.Release(context.Background(), Thawed{Uptime: 1}); err != nil {
		t.Fatalf("release after rebind: %v", err)
	}
	if want := frames(t, Thawed{Uptime: 1}, Pong{Seq: 1}); !bytes.Equal(next.Bytes(), want) {
		t.Fatalf("new stream got % x, want % x", next.Bytes(), want)
	}
	if want := frames(t, Frozen{}); !bytes.Equal(old.Bytes(), want) {
		t.Fatalf("old stream got % x after the rebind", old.Bytes())
	}
}

// snapAgent is a fake agent that freezes as asked (or refuses with
// refused), and reports on got every message it receives.
func snapAgent(t *testing.T, refused Frozen) (*Client, chan Message) {
	t.Helper()
	a, h := net.Pipe()
	t.Cleanup(func() { a.Close() })
	got := make(chan Message, 64)
	fakeAgent(t, a, func(c *Conn) {
		for {
			m, err := c.Recv()
			if err != nil {
				close(got)
				return
			}
			got <- m
			switch m := m.(type) {
			case Exec:
				_ = c.Send(Started{ID: m.ID, PID: 10})
			case Freeze:
				_ = c.Send(refused)
			case Thaw:
				_ = c.Send(Thawed{Uptime: 42})
			case Ping:
				_ = c.Send(Pong(m))
			}
		}
	})
	cl, err := NewClient(context.Background(), h, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl, got
}

// An agent older than snapshots ignores a Freeze: it is never sent one,
// and the caller learns at once what to do instead of waiting for ever.
func TestClientFreezeOldAgent(t *testing.T) {
	a, h := net.Pipe()
	t.Cleanup(func() { a.Close() })
	got := make(chan Message, 8)
	go func() {
		c := NewConn(a)
		if _, err := c.AgentHandshake(Hello{Agent: "old"}); err != nil {
			return
		}
		_ = c.Send(Ready{})
		for {
			m, err := c.Recv()
			if err != nil {
				return
			}
			if p, ok := m.(Ping); ok {
				_ = c.Send(Pong(p))
				continue
			}
			got <- m
		}
	}()
	cl, err := NewClient(context.Background(), h, ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	t0 := time.Now()
	if _, err := cl.Freeze(context.Background(), "test"); !errors.Is(err, ErrNoFreeze) || time.Since(t0) > time.Second {
		t.Fatalf("freeze of an agent without %q: %v after %v, want ErrNoFreeze at once", FeatureFreeze, err, time.Since(t0))
	}
	if !strings.Contains(ErrNoFreeze.Error(), "capsem image build") {
		t.Fatalf("ErrNoFreeze does not say what to do: %v", ErrNoFreeze)
	}
	if m := next(got, 100*time.Millisecond); m != nil {
		t.Fatalf("the old agent was sent %v", m.Type())
	}
	if _, err := cl.Ping(context.Background()); err != nil {
		t.Fatalf("not frozen, the client must go on: %v", err)
	}
}

// next is the next message the fake agent got, within d, or nil.
func next(got chan Message, d time.Duration) Message {
	select {
	case m := <-got:
		return m
	case <-time.After(d):
		return nil
	}
}

// Between Frozen and Thaw no frame of the host's reaches the guest: what
// the host sends meanwhile arrives after the Thaw, in order.
func TestClientFreezeHoldsSends(t *testing.T) {
	cl, got := snapAgent(t, Frozen{})
	s, err := cl.Exec(context.Background(), Exec{Argv: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	if m := next(got, time.Second); m == nil || m.Type() != TypeExec {
		t.Fatalf("agent got %v, want the exec", m)
	}
	fr, err := cl.Freeze(context.Background(), "test")
	if err != nil || fr.Refused != "" {
		t.Fatalf("freeze: %+v %v", fr, err)
	}
	if m := next(got, time.Second); m == nil || m.(Freeze).Reason != "test" {
		t.Fatalf("agent got %v, want the freeze", m)
	}
	if _, err := s.Write([]byte("held")); err != nil {
		t.Fatal(err)
	}
	if err := s.Signal("INT"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	if _, err := cl.Ping(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a ping while frozen: %v, want it to wait until its deadline", err)
	}
	cancel()
	if _, err := cl.Freeze(context.Background(), "again"); !errors.Is(err, ErrFreezing) {
		t.Fatalf("a second freeze: %v, want ErrFreezing", err)
	}
	if m := next(got, 200*time.Millisecond); m != nil {
		t.Fatalf("the guest got %v while frozen", m.Type())
	}
	th, err := cl.Thaw(context.Background(), Thaw{})
	if err != nil || th.Uptime != 42 {
		t.Fatalf("thaw: %+v %v", th, err)
	}
	var order []string
	for i := 0; i < 4; i++ {
		m := next(got, time.Second)
		if m == nil {
			t.Fatalf("after the thaw the agent got only %v", order)
		}
		order = append(order, m.Type().String())
		switch m := m.(type) {
		case Thaw:
			if len(m.Seed) != 64 || m.Restored || time.Since(time.Unix(0, m.Time)) > time.Minute {
				t.Fatalf("thaw's defaults: %d-byte seed, restored %v, time %v", len(m.Seed), m.Restored, time.Unix(0, m.Time))
			}
		case Stdin:
			if string(m.Data) != "held" {
				t.Fatalf("stdin %q", m.Data)
			}
		}
	}
	if strings.Join(order, " ") != "thaw stdin signal ping" {
		t.Fatalf("after the thaw the agent got %v, want the thaw, then the held frames in order", order)
	}
	// Not frozen any more: sends go at once.
	if _, err := cl.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A refusal leaves the guest running, and says why and who holds the
// workspace; what the host sent while waiting goes then.
func TestClientFreezeRefused(t *testing.T) {
	cl, got := snapAgent(t, Frozen{Refused: "the workspace /workspace is in use", Holders: []string{"1234 bash (cwd)", "99 python3 (fd 3)"}})
	fr, err := cl.Freeze(context.Background(), "test")
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("freeze: %v, want ErrBusy", err)
	}
	for _, want := range []string{"in use", "1234 bash (cwd)", "99 python3 (fd 3)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if len(fr.Holders) != 2 {
		t.Fatalf("frozen %+v", fr)
	}
	next(got, time.Second) // the freeze
	if _, err := cl.Ping(context.Background()); err != nil {
		t.Fatalf("ping after a refused freeze: %v", err)
	}
	// A later Freeze is allowed: the client is not frozen.
	if _, err := cl.Freeze(context.Background(), "again"); !errors.Is(err, ErrBusy) {
		t.Fatalf("second freeze: %v", err)
	}
}

// Thaw is always answered, frozen or not; its seed is checked.
func TestClientThaw(t *testing.T) {
	cl, got := snapAgent(t, Frozen{})
	for _, c := range []struct {
		seed []byte
		ok   bool
		why  string
	}{
		{nil, true, "no seed: the client draws one"},
		{make([]byte, MinSeed), true, "the smallest seed that reseeds in full"},
		{make([]byte, MaxSeed), true, "the largest"},
		{make([]byte, MinSeed-1), false, "too short to reseed the guest's generator"},
		{make([]byte, MaxSeed+1), false, "too long"},
	} {
		_, err := cl.Thaw(context.Background(), Thaw{Seed: c.seed})
		if (err == nil) != c.ok {
			t.Errorf("seed of %d bytes: %v (%s)", len(c.seed), err, c.why)
		}
		if c.ok {
			if m := next(got, time.Second); m == nil || m.Type() != TypeThaw {
				t.Errorf("agent got %v, want a thaw", m)
			}
		}
	}
}

// A Restored Thaw over the same client ends its sessions (the agent killed
// their commands) and drops what it held for them.
func TestClientThawRestoredEndsSessions(t *testing.T) {
	cl, got := snapAgent(t, Frozen{})
	s, err := cl.Exec(context.Background(), Exec{Argv: []string{"cat"}})
	if err != nil {
		t.Fatal(err)
	}
	next(got, time.Second)
	if _, err := cl.Freeze(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	next(got, time.Second)
	_ = s.Signal("TERM")
	if _, err := cl.Thaw(context.Background(), Thaw{Restored: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Wait(); !errors.Is(err, errRestored) {
		t.Fatalf("session after a restored thaw: %v", err)
	}
	if m := next(got, time.Second); m == nil || !m.(Thaw).Restored {
		t.Fatalf("agent got %v, want the restored thaw", m)
	}
	if m := next(got, 200*time.Millisecond); m != nil {
		t.Fatalf("agent got %v after a restored thaw: the frames held for the old session must be dropped", m.Type())
	}
}

// Resume speaks to a restored agent over a new stream: the Thaw is its
// first frame (no Hello), frames of the old host's sessions before the
// Thawed are ignored, and the client then runs as any.
func TestResume(t *testing.T) {
	a, h := net.Pipe()
	defer a.Close()
	first := make(chan Message, 1)
	go func() {
		c := NewConn(a)
		m, err := c.Recv()
		if err != nil {
			t.Errorf("restored agent: %v", err)
			return
		}
		first <- m
		_ = c.Send(Stdout{ID: 1, Data: []byte("an old host's output")})
		_ = c.Send(Exit{ID: 1, Code: 9})
		_ = c.Send(Thawed{Uptime: 77, Workspace: "/workspace", WSFS: "9p"})
		for {
			m, err := c.Recv()
			if err != nil {
				return
			}
			if ex, ok := m.(Exec); ok {
				_ = c.Send(Started{ID: ex.ID, PID: 3})
				_ = c.Send(Stdout{ID: ex.ID, Data: []byte("new")})
				_ = c.Send(Exit{ID: ex.ID, Code: 0})
			}
		}
	}()
	agent := Hello{Proto: Version, Agent: "restored", Window: 4096}
	ready := Ready{Addr: "198.18.0.2/24"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, th, err := Resume(ctx, h, ClientOptions{}, agent, ready, Thaw{Time: 123})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	m := <-first
	if th, ok := m.(Thaw); !ok || !th.Restored || th.Time != 123 || len(th.Seed) != 64 {
		t.Fatalf("the restored agent's first frame: %#v, want a restored Thaw", m)
	}
	if th.Uptime != 77 || th.Workspace != "/workspace" || th.WSFS != "9p" {
		t.Fatalf("thawed %+v", th)
	}
	if cl.Hello().Agent != "restored" || cl.Ready().Addr != "198.18.0.2/24" {
		t.Fatalf("hello %+v ready %+v", cl.Hello(), cl.Ready())
	}
	// Session 1 is the new host's: the old host's frames of that id came
	// before, and are not its.
	s, err := cl.Exec(ctx, Exec{Argv: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	exit, err := s.Wait()
	out.ReadFrom(s.Stdout())
	if s.ID() != 1 || err != nil || exit.Code != 0 || out.String() != "new" {
		t.Fatalf("session %d: exit %+v %v, stdout %q", s.ID(), exit, err, out.String())
	}
}

// A Resume whose agent never answers ends with its context, the stream
// closed.
func TestResumeTimeout(t *testing.T) {
	a, h := net.Pipe()
	defer a.Close()
	go io.Copy(io.Discard, a) // reads the Thaw, answers nothing
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err := Resume(ctx, h, ClientOptions{}, Hello{Proto: Version}, Ready{}, Thaw{})
	if !errors.Is(err, ErrHandshake) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("resume of a silent agent: %v", err)
	}
}

// A saved Hello is read from a snapshot's record: Resume checks it as the
// handshake checks a live one, before anything is sent.
func TestResumeRefusesBadHello(t *testing.T) {
	for _, c := range []struct {
		hello Hello
		why   string
	}{
		{Hello{Proto: Version + 1}, "another protocol version"},
		{Hello{Proto: Version, Window: MaxWindow + 1}, "a window over MaxWindow"},
	} {
		a, h := net.Pipe()
		_, _, err := Resume(context.Background(), h, ClientOptions{}, c.hello, Ready{}, Thaw{})
		a.Close()
		if !errors.Is(err, ErrHandshake) {
			t.Errorf("%s: %v, want ErrHandshake", c.why, err)
		}
	}
}
