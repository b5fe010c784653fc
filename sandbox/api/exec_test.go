package api

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/store"
)

// silentBackend runs commands through a real proto.Client whose agent
// takes every Exec and never answers it (a stalled guest); started says
// what each Exec call returned.
type silentBackend struct {
	cl      *proto.Client
	started chan error
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
	return &silentBackend{cl: cl, started: make(chan error, 4)}
}

func (b *silentBackend) Exec(ctx context.Context, ex proto.Exec) (*proto.Session, error) {
	s, err := b.cl.Exec(ctx, ex)
	b.started <- err
	return s, err
}

func (b *silentBackend) Status() Status                               { return Status{} }
func (b *silentBackend) ReloadPolicy() (Reload, error)                { return Reload{}, nil }
func (b *silentBackend) Stop()                                        {}
func (b *silentBackend) Events(uint64, func(store.Event) error) error { return nil }
func (b *silentBackend) Done() <-chan struct{}                        { return nil }
func (b *silentBackend) Snapshot() (Snapshot, error)                  { return Snapshot{}, nil }
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
