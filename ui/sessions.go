package ui

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/capsem/capsem/store"
)

// sessionView is a session as the pages show it.
type sessionView struct {
	ID         string
	Started    time.Time
	Duration   time.Duration
	Running    bool // no end recorded: running, or its writer died
	Live       bool // being written now: the page follows it
	Name       string
	Exit       string // the exit code, or "" without one
	Events     int64
	Allowed    int64
	Denied     int64
	ModelCalls int64
	InTokens   int64
	OutTokens  int64
	Cost       float64
	Lost       int64
}

func viewOf(s store.Session) sessionView {
	v := sessionView{ID: s.ID, Started: s.StartedAt, Running: s.EndedAt.IsZero(), Events: s.Counts.Events,
		Allowed: s.Counts.Allowed, Denied: s.Counts.Denied, ModelCalls: s.Counts.Kinds[store.KindModelCall],
		InTokens: s.Counts.InputTokens, OutTokens: s.Counts.OutputTokens, Cost: s.Counts.CostUSD, Lost: s.Counts.Lost}
	if !v.Running {
		v.Duration = s.EndedAt.Sub(s.StartedAt)
	}
	if s.ExitCode != nil {
		v.Exit = strconv.Itoa(*s.ExitCode)
	}
	v.Name = strings.Join(s.Command, " ")
	if s.Sandbox != "" {
		v.Name = "sandbox " + s.Sandbox + ": " + v.Name
	}
	v.Name = preview(v.Name, 200)
	return v
}

// text is what the session list's filter looks in.
func (v sessionView) Text() string {
	return strings.ToLower(v.ID + " " + v.Name + " " + v.Exit)
}

// view is viewOf with Live from the source.
func (s *Server) view(sess store.Session) sessionView {
	v := viewOf(sess)
	if ls, ok := s.src.(LiveSource); ok {
		v.Live = ls.Live(sess.ID)
	}
	return v
}

func (s *Server) sessions(w http.ResponseWriter, r *http.Request) {
	list, err := s.src.Sessions()
	if err != nil {
		s.fail(w, err)
		return
	}
	held := int64(len(list))
	if cs, ok := s.src.(CountedSource); ok {
		if held, err = cs.SessionCount(); err != nil {
			s.fail(w, err)
			return
		}
	}
	q := strings.ToLower(strings.TrimSpace(r.URL.Query().Get("q")))
	views := make([]sessionView, 0, len(list))
	for _, sess := range list {
		v := s.view(sess)
		if q == "" || strings.Contains(v.Text(), q) {
			views = append(views, v)
		}
	}
	s.render(w, "sessions.html", map[string]any{"Base": s.Base(), "Sessions": views, "Q": r.URL.Query().Get("q"), "Total": len(list),
		"Held": held, "Cut": held > int64(len(list))})
}
