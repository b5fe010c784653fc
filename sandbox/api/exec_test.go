package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/store"
)

// silentBackend runs commands through a real proto.Client whose agent
// takes every Exec and never answers it (a stalled guest); started says
// what each Exec call returned.
type silentBackend struct {
	cl      *proto.Client
	started chan error
	last    atomic.Pointer[proto.Session] // the last session Exec started
	asks    *ask.Broker
}

func newSilentBackend(t *testing.T) *silentBackend {
	t.Helper()
	a, h := net.Pipe()
	go func() {
		c := proto.NewConn(a)
		if _, err := c.AgentHandshake(proto.Hello{Agent: "silent"}); err != nil {
			return
		}
		_ = c.Send(proto.Ready{})
		_, _ = io.Copy(io.Discard, a)
	}()
	cl, err := proto.NewClient(context.Background(), h, proto.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); a.Close() })
	return &silentBackend{cl: cl, started: make(chan error, 4), asks: ask.New(ask.Config{})}
}

func (b *silentBackend) Exec(ctx context.Context, ex proto.Exec) (*proto.Session, error) {
	s, err := b.cl.Exec(ctx, ex)
	if s != nil {
		b.last.Store(s)
	}
	b.started <- err
	return s, err
}

func (b *silentBackend) Status() Status                               { return Status{} }
func (b *silentBackend) ReloadPolicy() (Reload, error)                { return Reload{}, nil }
func (b *silentBackend) Stop()                                        {}
func (b *silentBackend) Events(uint64, func(store.Event) error) error { return nil }
func (b *silentBackend) Done() <-chan struct{}                        { return nil }
func (b *silentBackend) StoreCopy() (StoreCopy, error)                { return StoreCopy{}, nil }
func (b *silentBackend) TakeSnapshot(context.Context, string) (Snapshot, error) {
	return Snapshot{}, errors.New("not here")
}
func (b *silentBackend) Snapshots() ([]Snapshot, error) { return nil, nil }
func (b *silentBackend) RemoveSnapshot(string) error    { return nil }
func (b *silentBackend) Suspend(context.Context) (Snapshot, error) {
	return Snapshot{}, errors.New("not here")
}
func (b *silentBackend) Ports() []Port                  { return nil }
func (b *silentBackend) Asks() *ask.Broker              { return b.asks }
func (b *silentBackend) Publish(string) (Port, error)   { return Port{}, errors.New("not here") }
func (b *silentBackend) Unpublish(string) (Port, error) { return Port{}, errors.New("not here") }
func (b *silentBackend) PutFile(context.Context, string, string, int64, io.Reader) (int64, error) {
	return 0, nil
}
func (b *silentBackend) GetFile(context.Context, string, func(int64) (io.Writer, error)) (int64, error) {
	return 0, nil
}

// An exec whose guest never starts the command ends when its client goes
// away, and after execStartTimeout when the client waits: the session is
// given up (before, serveExec waited with context.Background(): the
// handler and the session's slot were held for ever).
func TestExecStartEndsWithTheRequest(t *testing.T) {
	for _, tc := range []struct {
		name    string
		client  time.Duration // the client gives up after this
		timeout time.Duration // execStartTimeout
		want    error
		why     string
	}{
		{"client goes away", 200 * time.Millisecond, time.Minute, context.Canceled, "the request's context ends with the connection"},
		{"start deadline", time.Minute, 300 * time.Millisecond, context.DeadlineExceeded, "a client without a timeout does not hold the session for ever"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(d time.Duration) { execStartTimeout = d }(execStartTimeout)
			execStartTimeout = tc.timeout
			b := newSilentBackend(t)
			srv := httptest.NewServer(Handler(b))
			defer srv.Close()
			ctx, cancel := context.WithTimeout(context.Background(), tc.client)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+PathExec, bytes.NewReader([]byte(`{"argv":["sleep","1"]}`)))
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Logf("answer: %d %s", resp.StatusCode, strings.TrimSpace(string(body)))
			}
			select {
			case err := <-b.started:
				if !errors.Is(err, tc.want) {
					t.Fatalf("Exec ended with %v, want %v (%s)", err, tc.want, tc.why)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("the exec of a command the guest never starts was still waiting 5 s on (%s)", tc.why)
			}
			t.Logf("the exec was given up after %v", time.Since(start).Round(time.Millisecond))
		})
	}
}

// newMuteBackend is an agent that starts every command and answers every
// ping, and never reports a command's end: what guest root speaking for
// the agent can do.
func newMuteBackend(t *testing.T) *silentBackend {
	t.Helper()
	a, h := net.Pipe()
	go func() {
		c := proto.NewConn(a)
		if _, err := c.AgentHandshake(proto.Hello{Agent: "mute"}); err != nil {
			return
		}
		_ = c.Send(proto.Ready{})
		for {
			m, err := c.Recv()
			if err != nil {
				return
			}
			switch m := m.(type) {
			case proto.Exec:
				_ = c.Send(proto.Started{ID: m.ID, PID: 42})
			case proto.Ping:
				_ = c.Send(proto.Pong{Seq: m.Seq})
			}
		}
	}()
	cl, err := proto.NewClient(context.Background(), h, proto.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); a.Close() })
	return &silentBackend{cl: cl, started: make(chan error, 4), asks: ask.New(ask.Config{})}
}

// An exec's timeout holds against a guest that takes the KILL and never
// says the command ended: the request ends killGrace after the KILL, with
// the timeout's exit, and frees its session (before, waitExit waited on
// the session for ever).
func TestExecTimeoutHoldsAgainstAMuteAgent(t *testing.T) {
	b := newMuteBackend(t)
	srv := httptest.NewServer(Handler(b))
	defer srv.Close()
	start := time.Now()
	resp, err := http.Post(srv.URL+PathExec, "application/json", strings.NewReader(`{"argv":["sleep","600"],"timeout_ms":300}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	t.Logf("answer after %v: %d %s", took.Round(time.Millisecond), resp.StatusCode, strings.TrimSpace(string(body)))
	if took > killGrace+3*time.Second {
		t.Errorf("the exec took %v against a mute agent; want its timeout and killGrace (%v)", took, killGrace)
	}
	var exit BufferedExit
	if err := json.Unmarshal(body, &exit); err != nil || !exit.Exit.TimedOut || exit.Exit.Code != ExitTimeout {
		t.Errorf("exit %+v (%v), want the timeout's", exit, err)
	}
	select {
	case <-b.last.Load().Done():
	default:
		t.Error("the session is still held after the exec was given up")
	}
}

// The store copy answers under its name and under its first name, which
// clients from before VM snapshots use.
func TestStoreCopyOldPath(t *testing.T) {
	srv := httptest.NewServer(Handler(&silentBackend{}))
	defer srv.Close()
	for _, path := range []string{PathStoreCopy, PathStoreCopyOld} {
		resp, err := http.Post(srv.URL+path, "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("POST %s: %s", path, resp.Status)
		}
	}
}
