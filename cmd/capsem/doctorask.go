package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/sandbox"
	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
)

// doctorAsked is a name the doctor's policy does not name, backed by the
// doctor's upstream: the ask test's.
const doctorAsked = "asked.doctor.test"

// doctorAskTimeout is the doctor's ask_timeout while it asks: long enough
// for the test, short enough that a broken one does not hang the suite.
const doctorAskTimeout = 20

// doctorAsks is the ask test's host side: the run's sandbox's questions
// served as the sandbox API serves them (api.ServeAsks on a unix socket
// of the doctor's own), and the doctor's policy with [network] unknown =
// "ask", put in force while a test asks and taken back after.
type doctorAsks struct {
	mu     sync.Mutex
	sb     *sandbox.Sandbox
	base   *policy.Policy
	asking *policy.Policy
	sock   string
	srv    *http.Server
}

// askingPolicy is polText with [network] unknown = "ask".
func askingPolicy(name, polText string) (*policy.Policy, error) {
	text := strings.Replace(polText, "[network]\n", fmt.Sprintf("[network]\nunknown = \"ask\"\nask_timeout = %d\n", doctorAskTimeout), 1)
	return policy.Parse(name, []byte(text))
}

// attach serves sb's questions on a socket in dir.
func (d *doctorAsks) attach(sb *sandbox.Sandbox, dir string) error {
	sock := filepath.Join(dir, "asks.sock")
	ln, err := home.ListenUnix(sock)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	api.ServeAsks(mux, sb.Asks(), nil)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	d.mu.Lock()
	d.sb, d.sock, d.srv = sb, sock, srv
	d.mu.Unlock()
	return nil
}

func (d *doctorAsks) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.srv != nil {
		_ = d.srv.Close()
	}
}

// serve is the upstream's /ask?name=N&answer=A: the doctor's policy asks
// while the guest's request lasts; with answer "none" nobody listens,
// else an API client follows the questions and answers N's with A. The
// lines it streams: "asking" once the policy asks (and, answering, the
// client listens), "answered ID" when it answered.
func (d *doctorAsks) serve(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	sb, sock := d.sb, d.sock
	d.mu.Unlock()
	name, answer := r.URL.Query().Get("name"), r.URL.Query().Get("answer")
	if sb == nil || name == "" || answer == "" {
		http.Error(w, "/ask needs ?name=N&answer=once|session|deny|none, and the doctor's sandbox", http.StatusBadRequest)
		return
	}
	if err := sb.SetPolicy(d.asking); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer func() { _ = sb.SetPolicy(d.base) }()
	flusher, _ := w.(http.Flusher)
	line := func(s string) {
		fmt.Fprintln(w, s)
		if flusher != nil {
			flusher.Flush()
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*doctorAskTimeout*time.Second)
	defer cancel()
	if answer == "none" {
		line("asking")
		<-ctx.Done() // the guest closes the request when its test is done
		return
	}
	client := api.NewClient(sock)
	defer client.Close()
	errAnswered := errors.New("answered")
	err := client.FollowAsks(ctx, func(u ask.Update) error {
		switch {
		case u.Type == ask.UpdateListening:
			line("asking")
		case u.Type == ask.UpdateAsked && u.Question.Name == name:
			if err := client.Answer(ctx, u.Question.ID, ask.Answer{Answer: answer, By: ask.ByAPI}); err != nil {
				return err
			}
			line("answered " + u.Question.ID)
			<-ctx.Done() // the policy asks, and the client listens, until the guest is done
			return errAnswered
		}
		return nil
	})
	if err != nil && !errors.Is(err, errAnswered) && ctx.Err() == nil {
		line("error " + err.Error())
	}
}
