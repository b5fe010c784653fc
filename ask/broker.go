package ask

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/capsem/capsem/policy"
)

// The kinds of question.
const (
	KindNetwork = "network" // a name (Port 0: its DNS query) or a connection to name:port
	KindMCP     = "mcp"     // a tools/call of Tool on server Name
)

// The answers a person gives.
const (
	Once    = "once"    // this query, connection or call, and nothing after it
	Session = "session" // until the sandbox stops
	Always  = "always"  // written to the sandbox's overlay: every start after this one too
	Deny    = "deny"
)

// Who answered.
const (
	ByCLI = "cli"
	ByAPI = "api"
	ByUI  = "ui"
)

// The reasons an outcome carries: the events' reasons.
const (
	ReasonAllowed    = "asked-allowed"  // a person allowed it
	ReasonDenied     = "asked-denied"   // a person denied it
	ReasonTimeout    = "ask-timeout"    // asked, not answered in time
	ReasonUnanswered = "ask-unanswered" // nobody was listening
	ReasonCapped     = "ask-capped"     // MaxPending questions were waiting
)

// MaxPending is how many questions wait at once: a person answers a few
// at a time, and a guest asking for thousands of names is refused at
// once beyond these rather than held.
const MaxPending = 64

// Question is what a person is asked. Stability: GET /v1/asks sends it as
// JSON; clients in other languages read these names.
type Question struct {
	ID   string `json:"id"`
	Kind string `json:"kind"` // KindNetwork or KindMCP
	// Name is the host name the guest asked for, or the MCP server (the
	// NAME of an [mcp.servers.NAME] or a host).
	Name string `json:"name"`
	// Port is the port of a connection; 0 for a DNS query (the name, which
	// an answer allows on port 443, as an allow entry without a port).
	Port uint16 `json:"port,omitempty"`
	Tool string `json:"tool,omitempty"` // the MCP tool
	// Entry is what an answer of "session" or "always" adds to the
	// policy: the allow entry ("pypi.org", "a.test:8080") or the MCP
	// rule ("server=github tools=create_issue").
	Entry    string    `json:"entry"`
	Asked    time.Time `json:"asked"`
	Deadline time.Time `json:"deadline"`
	Waiting  int       `json:"waiting"` // the queries, connections or calls held on it
}

// key is what makes two asks one question.
func (q Question) key() string {
	return q.Kind + "\x00" + q.Name + "\x00" + strconv.Itoa(int(q.Port)) + "\x00" + q.Tool
}

// Answer is a person's answer (POST /v1/asks/ID's body).
type Answer struct {
	Answer string `json:"answer"` // Once, Session, Always or Deny
	By     string `json:"by"`     // ByCLI, ByAPI or ByUI; "" is ByAPI
}

// Outcome is what an asker gets.
type Outcome struct {
	Allowed bool
	Answer  string // Once, Session, Always, Deny; "" when nobody answered
	By      string
	Reason  string // one of the Reason constants
}

// Detail is the outcome in words, for an event: "once, by cli".
func (o Outcome) Detail() string {
	if o.By == "" {
		return o.Reason
	}
	return o.Answer + ", by " + o.By
}

// The types of Update.
const (
	UpdateListening = "listening" // the stream's first line: the sandbox asks it from now on
	UpdateAsked     = "asked"
	UpdateAnswered  = "answered"
)

// Update is one line of a followed stream: a question asked or answered.
type Update struct {
	Type     string   `json:"type"` // UpdateListening, UpdateAsked or UpdateAnswered
	Question Question `json:"question,omitzero"`
	Outcome  *Answer  `json:"outcome,omitempty"` // for "answered": the answer, or {"answer":"deny","by":""} for a timeout
	Reason   string   `json:"reason,omitempty"`  // for "answered": the outcome's reason
}

// Config is what a Broker needs.
type Config struct {
	// Grant lays an answer of Session or Always over the policy in force
	// (Always: and keeps it in the overlay) before the askers wake; an
	// error turns the answer into a denial the answerer is told of. Nil:
	// such answers are refused (only Once and Deny are possible).
	Grant func(q Question, answer string) error
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Broker holds the questions of one sandbox.
type Broker struct {
	cfg Config

	mu        sync.Mutex
	pending   map[string]*pending // by Question.key
	byID      map[string]*pending
	listeners map[*Listener]struct{}
	next      uint64
}

type pending struct {
	q    Question
	done chan struct{} // closed when out is set
	out  Outcome
}

// New returns a Broker.
func New(cfg Config) *Broker {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Broker{cfg: cfg, pending: map[string]*pending{}, byID: map[string]*pending{}, listeners: map[*Listener]struct{}{}}
}

// Ask puts q (its Kind, Name, Port, Tool and Entry) to whoever listens
// and waits for the answer, at most timeout and while ctx lasts. Asks
// about the same thing while one waits share its question and its answer.
func (b *Broker) Ask(ctx context.Context, q Question, timeout time.Duration) Outcome {
	b.mu.Lock()
	p := b.pending[q.key()]
	if p == nil {
		if len(b.listeners) == 0 {
			b.mu.Unlock()
			return Outcome{Reason: ReasonUnanswered}
		}
		if len(b.pending) >= MaxPending {
			b.mu.Unlock()
			return Outcome{Reason: ReasonCapped}
		}
		b.next++
		now := b.cfg.Now()
		q.ID = "q" + strconv.FormatUint(b.next, 10)
		q.Asked, q.Deadline = now, now.Add(timeout)
		p = &pending{q: q, done: make(chan struct{})}
		b.pending[q.key()] = p
		b.byID[q.ID] = p
		p.q.Waiting = 1
		b.broadcastLocked(Update{Type: UpdateAsked, Question: p.q})
		// The question ends at its deadline whoever waits on it.
		time.AfterFunc(timeout, func() { b.settle(p, Outcome{Reason: ReasonTimeout}) })
	} else {
		p.q.Waiting++
	}
	b.mu.Unlock()
	select {
	case <-p.done:
		return p.out
	case <-ctx.Done():
		return Outcome{Reason: ReasonTimeout}
	}
}

// settle ends p with out, once; it reports whether it did.
func (b *Broker) settle(p *pending, out Outcome) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.byID[p.q.ID] != p {
		return false
	}
	delete(b.byID, p.q.ID)
	delete(b.pending, p.q.key())
	p.out = out
	close(p.done)
	ans := &Answer{Answer: out.Answer, By: out.By}
	if out.Answer == "" {
		ans.Answer = Deny
	}
	b.broadcastLocked(Update{Type: UpdateAnswered, Question: p.q, Outcome: ans, Reason: out.Reason})
	return true
}

// ErrNoQuestion is Answer's error for an ID that is not waiting.
var ErrNoQuestion = errors.New("ask: no such question is waiting (answered already, timed out, or never asked)")

// ErrNotKept wraps Answer's error when an answer of Session or Always
// could not be laid over the policy: the question was denied.
var ErrNotKept = errors.New("ask: the answer could not be kept")

// Answer answers question id. An answer of Session or Always is laid over
// the policy (Config.Grant) first; when that fails the question is denied
// and the error says why.
func (b *Broker) Answer(id string, a Answer) error {
	if a.By == "" {
		a.By = ByAPI
	}
	switch a.By {
	case ByCLI, ByAPI, ByUI:
	default:
		return fmt.Errorf("ask: by %q: write %q, %q or %q", a.By, ByCLI, ByAPI, ByUI)
	}
	switch a.Answer {
	case Once, Session, Always, Deny:
	default:
		return fmt.Errorf("ask: answer %q: write %q, %q, %q or %q", a.Answer, Once, Session, Always, Deny)
	}
	b.mu.Lock()
	p := b.byID[id]
	b.mu.Unlock()
	if p == nil {
		return fmt.Errorf("%w: %s", ErrNoQuestion, id)
	}
	out := Outcome{Allowed: a.Answer != Deny, Answer: a.Answer, By: a.By, Reason: ReasonAllowed}
	if !out.Allowed {
		out.Reason = ReasonDenied
	}
	var gerr error
	if a.Answer == Session || a.Answer == Always {
		if b.cfg.Grant == nil {
			gerr = fmt.Errorf("ask: this sandbox keeps no %s answers: answer %q or %q", a.Answer, Once, Deny)
		} else {
			gerr = b.cfg.Grant(p.q, a.Answer)
		}
		if gerr != nil {
			out = Outcome{Answer: Deny, By: a.By, Reason: ReasonDenied}
			gerr = fmt.Errorf("%w: %w", ErrNotKept, gerr)
		}
	}
	if !b.settle(p, out) {
		return fmt.Errorf("%w: %s", ErrNoQuestion, id)
	}
	if gerr != nil {
		return fmt.Errorf("%w; the question was denied", gerr)
	}
	return nil
}

// Pending returns the questions waiting, oldest first.
func (b *Broker) Pending() []Question {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pendingLocked()
}

func (b *Broker) pendingLocked() []Question {
	out := make([]Question, 0, len(b.byID))
	for _, p := range b.byID {
		out = append(out, p.q)
	}
	sortQuestions(out)
	return out
}

// Rule is the matched_rule of a decision a person made about q: the entry
// and who answered, "asked: pypi.org (once, by cli)"; "" when nobody did.
func (o Outcome) Rule(q Question) string {
	if o.By == "" {
		return ""
	}
	return policy.GrantRule + q.Entry + " (" + o.Detail() + ")"
}

// Settle turns a decision the policy left to a person (d.Ask) into one:
// it asks q, waiting at most timeout, and returns the decision the answer
// makes, its Rule naming who answered. A decision not left to a person
// is returned as it is; a nil Broker answers nothing (ReasonUnanswered).
func (b *Broker) Settle(ctx context.Context, q Question, timeout time.Duration, d policy.Decision) policy.Decision {
	if !d.Ask {
		return d
	}
	out := Outcome{Reason: ReasonUnanswered}
	if b != nil {
		out = b.Ask(ctx, q, timeout)
	}
	return policy.Decision{Allowed: out.Allowed, Rule: out.Rule(q), Reason: out.Reason}
}
