package netstack

import (
	"context"
	"sync"
	"time"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/policy"
)

// Asker puts to a person what the policy did not foresee ([network]
// unknown = "ask"): *ask.Broker is one.
type Asker interface {
	Ask(ctx context.Context, q ask.Question, timeout time.Duration) ask.Outcome
}

// maxHeldAsks caps the DNS queries and SYNs held at once while a person
// is asked: the questions are capped at ask.MaxPending, but a guest can
// hold thousands of queries on one question. Each held query is a
// goroutine and its buffer, each held SYN a slot of MaxInFlightSYN
// (1,024); 256 leaves most of those to the flows the policy allows.
const maxHeldAsks = 256

// onceWindow is how long a name allowed once, at its DNS query, waits for
// its connection: a client dials within milliseconds of its answer; a
// minute covers one that resolves, then waits on something else.
const onceWindow = time.Minute

// asks is the stack's side of asking: held queries and SYNs, and the
// names allowed once at their DNS query whose connection has not come.
type asks struct {
	held slots

	mu   sync.Mutex
	once map[string]onceAllowed  // by canonical name
	deny map[string]deniedLookup // by canonical name
}

// deniedLookup is a name a person denied at a lookup: its other lookups
// get the same answer until until.
type deniedLookup struct {
	until time.Time
	out   ask.Outcome
}

// lookupWindow is how long an answer to a lookup answers the name's other
// lookups too: a resolver asks for A and AAAA one after the other, within
// milliseconds, and a person asked twice about one dial would answer the
// same twice; after it, the next dial asks again.
const lookupWindow = 3 * time.Second

// onceAllowed is a name allowed once at its DNS query: its one connection
// on port 443 may come until until.
type onceAllowed struct {
	until   time.Time
	lookups time.Time // the name's other lookups ride on the answer until then
	by      string    // who answered
}

// ask holds the caller while q is put to the Asker under pol's timeout.
// On an allow it returns the policy the held query or connection goes on
// under: the policy in force for an answer kept (the owner of the Asker
// laid it over before answering), pol with q's grants for "once".
func (s *Stack) ask(q ask.Question, pol *policy.Policy) (*policy.Policy, ask.Outcome) {
	if s.cfg.Asker == nil {
		return nil, ask.Outcome{Reason: ask.ReasonUnanswered}
	}
	var out ask.Outcome
	if o, ok := s.asks.recent(q); ok {
		// The name's other lookups (AAAA after A, a retry) ride on its
		// answer: until its connection comes, or a moment after a denial.
		out = o
	} else {
		if !s.asks.held.take() {
			return nil, ask.Outcome{Reason: ask.ReasonCapped}
		}
		defer s.asks.held.give()
		out = s.cfg.Asker.Ask(s.ctx, q, pol.NetworkAskTimeout())
	}
	if q.Port == 0 && out.Answer == ask.Deny {
		s.asks.denied(q.Name, out)
	}
	if !out.Allowed {
		return nil, out
	}
	if out.Answer != ask.Once {
		return s.policy.Load(), out
	}
	granted, err := pol.WithGrants(q.Grants())
	if err != nil {
		s.log.Warn("an answer could not be laid over the policy; the guest is refused", "entry", q.Entry, "err", err)
		return nil, ask.Outcome{Answer: ask.Deny, By: out.By, Reason: ask.ReasonDenied}
	}
	if q.Port == 0 {
		s.asks.allowOnce(q.Name, out.By)
	}
	return granted, out
}

// allowOnce lets the next connection to name on port 443 through without
// asking again: its DNS query was allowed once.
func (a *asks) allowOnce(name, by string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.once == nil {
		a.once = map[string]onceAllowed{}
	}
	now := time.Now()
	for n, o := range a.once { // keeps the map to the names of the last minute
		if now.After(o.until) {
			delete(a.once, n)
		}
	}
	a.once[name] = onceAllowed{until: now.Add(onceWindow), lookups: now.Add(lookupWindow), by: by}
}

// recent is the answer an earlier lookup of q's name got, when it still
// holds: for lookupWindow, and for "once" not after its connection came.
func (a *asks) recent(q ask.Question) (ask.Outcome, bool) {
	if q.Port != 0 {
		return ask.Outcome{}, false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if o, ok := a.once[q.Name]; ok && time.Now().Before(o.lookups) {
		return ask.Outcome{Allowed: true, Answer: ask.Once, By: o.by, Reason: ask.ReasonAllowed}, true
	}
	if d, ok := a.deny[q.Name]; ok && time.Now().Before(d.until) {
		return d.out, true
	}
	return ask.Outcome{}, false
}

// denied keeps a lookup's denial for the name's other lookups.
func (a *asks) denied(name string, out ask.Outcome) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.deny == nil {
		a.deny = map[string]deniedLookup{}
	}
	now := time.Now()
	for n, d := range a.deny {
		if now.After(d.until) {
			delete(a.deny, n)
		}
	}
	a.deny[name] = deniedLookup{until: now.Add(lookupWindow), out: out}
}

// takeOnce reports whether name was allowed once at its DNS query (by
// whom) and this, on port, is its connection; it uses the allowance up.
func (a *asks) takeOnce(name string, port uint16) (by string, ok bool) {
	if port != policy.DefaultPort {
		return "", false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	o, ok := a.once[name]
	delete(a.once, name)
	return o.by, ok && time.Now().Before(o.until)
}

// grantedCurrent is a once-allowed flow's Flow.Current: the policy in
// force with q's grants laid over it, made again only when the policy in
// force changes (a request decides under Current, and the MITM pools
// upstream connections per policy).
func (s *Stack) grantedCurrent(g policy.Grants) func() *policy.Policy {
	var mu sync.Mutex
	var base, granted *policy.Policy
	return func() *policy.Policy {
		now := s.policy.Load()
		mu.Lock()
		defer mu.Unlock()
		if now != base {
			base, granted = now, now
			if p, err := now.WithGrants(g); err == nil {
				granted = p
			}
		}
		return granted
	}
}
