package mitm

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/capsem/capsem/mitm/inspect"
	"github.com/capsem/capsem/store"
)

// probe is a test inspector that writes down which hooks ran, what of the
// request body it saw, and refuses where it is told to.
type probe struct {
	name          string
	refuseBegin   bool
	refuseRequest bool
	log           *hookLog
}

type hookLog struct {
	mu    sync.Mutex
	calls []string
	tap   map[string]*bytes.Buffer
	out   map[string]inspect.Outcome
}

func (l *hookLog) add(s string) {
	l.mu.Lock()
	l.calls = append(l.calls, s)
	l.mu.Unlock()
}

func (l *hookLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.calls, " ")
}

func (p *probe) Begin(x inspect.Exchange, r *http.Request) inspect.Stream {
	p.log.add(p.name + ".begin")
	if p.refuseBegin {
		x.Refuse(http.StatusForbidden, "probe-refused", p.name+" refused at begin", "none")
		return nil
	}
	return &probeStream{p: p, x: x}
}

type probeStream struct {
	p *probe
	x inspect.Exchange
}

func (s *probeStream) Tap() io.Writer {
	s.p.log.mu.Lock()
	defer s.p.log.mu.Unlock()
	b := &bytes.Buffer{}
	s.p.log.tap[s.p.name] = b
	return lockedWriter{&s.p.log.mu, b}
}

func (s *probeStream) Request(r *http.Request) bool {
	s.p.log.add(s.p.name + ".request")
	if s.p.refuseRequest {
		s.x.Refuse(http.StatusForbidden, "probe-refused", s.p.name+" refused the request", "none")
		return false
	}
	return true
}

func (s *probeStream) Response(*http.Response) (io.Writer, error) {
	s.p.log.add(s.p.name + ".response")
	return nil, nil
}

func (s *probeStream) Done(o inspect.Outcome) {
	s.p.log.add(s.p.name + ".done")
	s.p.log.mu.Lock()
	s.p.log.out[s.p.name] = o
	s.p.log.mu.Unlock()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// The chain runs in the list's order: the request down it, the response
// up it, Done down it for every stream begun; a refusal by an earlier
// inspector ends the request there — the later ones are not begun (a
// refusal at Begin) or never see the request nor its body (a refusal at
// Request), the upstream never sees it, and the event is the core's
// denied one.
func TestChainRunsInOrder(t *testing.T) {
	cases := []struct {
		name        string
		first       probe
		wantCalls   string
		wantStatus  int
		wantForward bool
		secondTap   string
	}{
		{"allowed", probe{}, "first.begin second.begin first.request second.request second.response first.response first.done second.done", http.StatusOK, true, "the body"},
		{"refused at begin", probe{refuseBegin: true}, "first.begin", http.StatusForbidden, false, ""},
		{"refused at request", probe{refuseRequest: true}, "first.begin second.begin first.request first.done second.done", http.StatusForbidden, false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := &memRecorder{}
			tp := startTestProxy(t, rec, http.HandlerFunc(hello))
			log := &hookLog{tap: map[string]*bytes.Buffer{}, out: map[string]inspect.Outcome{}}
			first, second := c.first, probe{}
			first.name, first.log = "first", log
			second.name, second.log = "second", log
			tp.p.inspectors = []inspect.Inspector{&first, &second}

			resp, err := tp.guestClient().Post("https://api.test/chain", "text/plain", strings.NewReader("the body"))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.wantStatus {
				t.Errorf("status %d, want %d", resp.StatusCode, c.wantStatus)
			}
			ev := waitNet(t, rec, "/chain")
			if got := log.String(); got != c.wantCalls {
				t.Errorf("hooks ran as\n  %s\nwant\n  %s", got, c.wantCalls)
			}
			if (tp.hits.Load() > 0) != c.wantForward {
				t.Errorf("upstream reached %d times, want forwarded %v", tp.hits.Load(), c.wantForward)
			}
			log.mu.Lock()
			got := ""
			if b := log.tap["second"]; b != nil {
				got = b.String()
			}
			o, done := log.out["second"]
			log.mu.Unlock()
			if got != c.secondTap {
				t.Errorf("the second inspector saw the body %q, want %q", got, c.secondTap)
			}
			if c.wantForward {
				if ev.Decision != store.Allowed || o.Decision != store.Allowed || o.Status != http.StatusOK {
					t.Errorf("event %s %s, outcome %+v: want allowed", ev.Decision, ev.Reason, o)
				}
				return
			}
			if ev.Decision != store.Denied || ev.Reason != "probe-refused" {
				t.Errorf("event %s %s, want denied probe-refused", ev.Decision, ev.Reason)
			}
			if done && (o.Decision != store.Denied || o.Reason != "probe-refused") {
				t.Errorf("the second inspector's outcome %+v, want the core's denial", o)
			}
		})
	}
}

// A stream that marks a refusal while the body streams stops it: the first
// refusal marked wins, and the guest gets the core's 403.
func TestChainMarkRefusedFirstWins(t *testing.T) {
	rec := &memRecorder{}
	tp := startTestProxy(t, rec, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		hello(w, r)
	}))
	tp.p.inspectors = []inspect.Inspector{marker{"first-mark"}, marker{"second-mark"}}
	resp, err := tp.guestClient().Post("https://api.test/mark", "text/plain", strings.NewReader(strings.Repeat("x", 64<<10)))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Capsem-Blocked") != "first-mark" || !strings.Contains(string(body), "advice of first-mark") {
		t.Errorf("%d %q %q, want 403 first-mark with its advice", resp.StatusCode, resp.Header.Get("X-Capsem-Blocked"), body)
	}
	ev := waitNet(t, rec, "/mark")
	if ev.Decision != store.Denied || ev.Reason != "first-mark" || ev.MatchedRule != "rule-first-mark" {
		t.Errorf("event %s %s %s, want denied first-mark", ev.Decision, ev.Reason, ev.MatchedRule)
	}
}

// marker marks a refusal on the first body bytes its tap sees.
type marker struct{ reason string }

func (m marker) Begin(x inspect.Exchange, _ *http.Request) inspect.Stream {
	return &markerStream{m: m, x: x}
}

type markerStream struct {
	inspect.Nop
	m    marker
	x    inspect.Exchange
	once sync.Once
}

func (s *markerStream) Tap() io.Writer { return s }

func (s *markerStream) Write(b []byte) (int, error) {
	s.once.Do(func() {
		s.x.MarkRefused(s.m.reason, "the body was "+s.m.reason+"ed", "rule-"+s.m.reason, "advice of "+s.m.reason)
	})
	return len(b), nil
}
