package ask

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// next reads the listener's next update or fails.
func next(t *testing.T, l *Listener) Update {
	t.Helper()
	select {
	case u, ok := <-l.Updates():
		if !ok {
			t.Fatal("the listener was closed")
		}
		return u
	case <-time.After(5 * time.Second):
		t.Fatal("no update in 5 s")
	}
	return Update{}
}

func TestNobodyListening(t *testing.T) {
	b := New(Config{})
	start := time.Now()
	out := b.Ask(context.Background(), Network("a.test", 0), time.Minute)
	if out.Allowed || out.Reason != ReasonUnanswered || time.Since(start) > time.Second {
		t.Errorf("%+v after %v: want an immediate ask-unanswered denial", out, time.Since(start))
	}
}

func TestAnswers(t *testing.T) {
	var granted []string
	b := New(Config{Grant: func(q Question, answer string) error {
		if q.Name == "fails.test" {
			return errors.New("the overlay cannot be written")
		}
		granted = append(granted, answer+" "+q.Entry)
		return nil
	}})
	l := b.Listen()
	defer l.Close()
	tests := []struct {
		q       Question
		answer  string
		allowed bool
		reason  string
		errSub  string
		why     string
	}{
		{Network("a.test", 0), Once, true, ReasonAllowed, "", "allowed once"},
		{Network("b.test", 8080), Session, true, ReasonAllowed, "", "a session answer is granted first"},
		{Network("c.test", 443), Always, true, ReasonAllowed, "", "an always answer too"},
		{MCP("github", "create_issue"), Deny, false, ReasonDenied, "", "denied"},
		{Network("fails.test", 0), Always, false, ReasonDenied, "cannot be written", "a grant that fails denies, and says why"},
	}
	for _, tc := range tests {
		done := make(chan Outcome)
		go func() { done <- b.Ask(context.Background(), tc.q, time.Minute) }()
		u := next(t, l)
		if u.Type != "asked" || u.Question.Entry != tc.q.Entry || u.Question.ID == "" {
			t.Fatalf("%s: update %+v", tc.why, u)
		}
		err := b.Answer(u.Question.ID, Answer{Answer: tc.answer, By: ByCLI})
		if (err == nil) != (tc.errSub == "") || err != nil && !strings.Contains(err.Error(), tc.errSub) {
			t.Errorf("%s: Answer: %v", tc.why, err)
		}
		out := <-done
		if out.Allowed != tc.allowed || out.Reason != tc.reason || out.By != ByCLI {
			t.Errorf("%s: %+v", tc.why, out)
		}
		if u := next(t, l); u.Type != "answered" || u.Reason != tc.reason {
			t.Errorf("%s: second update %+v", tc.why, u)
		}
	}
	if strings.Join(granted, ",") != "session b.test:8080,always c.test" {
		t.Errorf("granted %q", granted)
	}
	if err := b.Answer("q1", Answer{Answer: Once}); !errors.Is(err, ErrNoQuestion) {
		t.Errorf("answering twice: %v", err)
	}
	if err := b.Answer("q9", Answer{Answer: "maybe"}); err == nil || !strings.Contains(err.Error(), `"once", "session", "always" or "deny"`) {
		t.Errorf("a bad answer: %v", err)
	}
}

func TestSharedQuestionAndTimeout(t *testing.T) {
	b := New(Config{})
	l := b.Listen()
	defer l.Close()
	var wg sync.WaitGroup
	outs := make([]Outcome, 5)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i] = b.Ask(context.Background(), Network("same.test", 0), 200*time.Millisecond)
		}()
	}
	u := next(t, l)
	wg.Wait()
	for _, o := range outs {
		if o.Allowed || o.Reason != ReasonTimeout {
			t.Errorf("%+v, want ask-timeout", o)
		}
	}
	if u2 := next(t, l); u2.Type != "answered" || u2.Question.ID != u.Question.ID || u2.Reason != ReasonTimeout {
		t.Errorf("one question for five asks, ended by its timeout: %+v", u2)
	}
	if n := len(b.Pending()); n != 0 {
		t.Errorf("%d pending after the timeout", n)
	}
	// Session answers need a Grant.
	go b.Ask(context.Background(), Network("s.test", 0), time.Minute)
	u = next(t, l)
	if err := b.Answer(u.Question.ID, Answer{Answer: Session}); err == nil || !strings.Contains(err.Error(), "keeps no session answers") {
		t.Errorf("session without Grant: %v", err)
	}
}

func TestPendingCap(t *testing.T) {
	b := New(Config{})
	l := b.Listen()
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range MaxPending {
		go b.Ask(ctx, Network("n"+strings.Repeat("x", i%5)+string(rune('a'+i%26))+time.Duration(i).String()+".test", 0), time.Minute)
	}
	for range MaxPending {
		next(t, l)
	}
	start := time.Now()
	if out := b.Ask(ctx, Network("one-more.test", 0), time.Minute); out.Reason != ReasonCapped || time.Since(start) > time.Second {
		t.Errorf("the %dth question: %+v", MaxPending+1, out)
	}
	// A late listener sees every waiting question first.
	l2 := b.Listen()
	defer l2.Close()
	for range MaxPending {
		if u := next(t, l2); u.Type != "asked" {
			t.Fatalf("%+v", u)
		}
	}
}

func TestSlowListenerDropped(t *testing.T) {
	b := New(Config{})
	l := b.Listen()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range listenerBuffer + 1 {
		// Each answered at once by its timeout of 0: an asked and an answered update.
		b.Ask(ctx, Network("t"+time.Duration(i).String()+".test", 0), 0)
		if b.Listening() == 0 {
			break
		}
	}
	if b.Listening() != 0 {
		t.Fatal("a listener that reads nothing is kept")
	}
	n := 0
	for range l.Updates() {
		n++
	}
	if n != listenerBuffer {
		t.Errorf("it got %d updates before its stream ended, want %d", n, listenerBuffer)
	}
	l.Close() // after the broker closed it: no panic
}
