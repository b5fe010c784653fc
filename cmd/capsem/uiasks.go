package main

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/ui"
)

// uiAskScan is how often capsem ui looks for sandboxes that started, to
// follow their questions: a sandbox started a second ago asks nobody for
// at most that second (its questions are refused at once meanwhile).
const uiAskScan = time.Second

// uiAsks follows the questions of every running sandbox of a data
// directory for capsem ui (ui.Asks): while it follows one, that sandbox
// asks rather than refuses.
type uiAsks struct {
	data string

	mu        sync.Mutex
	following map[string]bool                    // sandbox names with a follower
	pending   map[string]map[string]ask.Question // sandbox → id → question
}

// followAsks starts following data's running sandboxes until ctx ends.
func followAsks(ctx context.Context, data string) *uiAsks {
	a := &uiAsks{data: data, following: map[string]bool{}, pending: map[string]map[string]ask.Question{}}
	go func() {
		t := time.NewTicker(uiAskScan)
		defer t.Stop()
		for {
			a.scan(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return a
}

// scan follows the running sandboxes not followed yet.
func (a *uiAsks) scan(ctx context.Context) {
	dirs, err := home.List(a.data)
	if err != nil {
		return
	}
	for _, d := range dirs {
		if !d.Locked() {
			continue
		}
		a.mu.Lock()
		started := a.following[d.Name]
		a.following[d.Name] = true
		a.mu.Unlock()
		if !started {
			go a.follow(ctx, d)
		}
	}
}

// follow keeps sandbox d's questions until its stream ends (it stopped).
func (a *uiAsks) follow(ctx context.Context, d home.Dir) {
	client := api.NewClient(d.SocketPath())
	defer client.Close()
	_ = client.FollowAsks(ctx, func(u ask.Update) error {
		a.mu.Lock()
		defer a.mu.Unlock()
		qs := a.pending[d.Name]
		if qs == nil {
			qs = map[string]ask.Question{}
			a.pending[d.Name] = qs
		}
		switch u.Type {
		case ask.UpdateAsked:
			qs[u.Question.ID] = u.Question
		case ask.UpdateAnswered:
			delete(qs, u.Question.ID)
		}
		return nil
	})
	a.mu.Lock()
	delete(a.following, d.Name)
	delete(a.pending, d.Name)
	a.mu.Unlock()
}

// Following is ui.Asks': the sandboxes whose questions are followed.
func (a *uiAsks) Following() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for name, ok := range a.following {
		if ok && a.pending[name] != nil {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Questions is ui.Asks': every question waiting, oldest first.
func (a *uiAsks) Questions() []ui.SandboxQuestion {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []ui.SandboxQuestion
	for name, qs := range a.pending {
		for _, q := range qs {
			out = append(out, ui.SandboxQuestion{Sandbox: name, Question: q})
		}
	}
	slices.SortFunc(out, func(x, y ui.SandboxQuestion) int { return x.Asked.Compare(y.Asked) })
	return out
}

// Answer is ui.Asks': the answer goes to the sandbox's API, given by the UI.
func (a *uiAsks) Answer(sandbox, id, answer string) error {
	if err := home.CheckName(sandbox); err != nil {
		return err
	}
	client := api.NewClient(home.New(a.data, sandbox).SocketPath())
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return client.Answer(ctx, id, ask.Answer{Answer: answer, By: ask.ByUI})
}
