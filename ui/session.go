package ui

import (
	"fmt"
	"net/http"
	"strconv"
)

// sessionPage is a session's page: its summary, the filter, the first page
// of its timeline; the rest comes from rows as the reader scrolls.
type sessionPage struct {
	Base    string
	Session sessionView
	Filter  filter
	Query   string // the filter as a query string, for the rows requests
	Page    page
}

func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	sess, err := s.src.Session(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	f := parseFilter(r.URL.Query())
	f.After = 0
	p, err := readPage(s.src, id, f)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, "session.html", sessionPage{Base: s.Base(), Session: s.view(sess), Filter: f, Query: f.query().Encode(), Page: p})
}

// rows answers the next page of a timeline as table rows, and where the
// next one starts (X-Capsem-Next) and whether the end was reached
// (X-Capsem-Done: 1), for app.js.
func (s *Server) rows(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := readPage(s.src, id, parseFilter(r.URL.Query()))
	if err != nil {
		s.fail(w, err)
		return
	}
	w.Header().Set("X-Capsem-Next", strconv.FormatUint(p.Next, 10))
	if p.Done {
		w.Header().Set("X-Capsem-Done", "1")
	}
	s.render(w, "rows", map[string]any{"Base": s.Base(), "ID": id, "Rows": p.Rows})
}

// hostsShown is how many hosts the summary shows before "N more".
const hostsShown = 12

func (s *Server) hostSummary(w http.ResponseWriter, r *http.Request) {
	sess, err := s.src.Session(r.PathValue("id"))
	if err != nil {
		s.fail(w, err)
		return
	}
	stats, err := s.hosts.get(s.src, sess)
	if err != nil {
		s.fail(w, err)
		return
	}
	top, rest := stats, []hostStat(nil)
	if len(stats) > hostsShown {
		top, rest = stats[:hostsShown], stats[hostsShown:]
	}
	s.render(w, "hosts", map[string]any{"Base": s.Base(), "ID": sess.ID, "Top": top, "Rest": rest, "BarMax": barWidth})
}

func (s *Server) modelCall(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil {
		http.Error(w, fmt.Sprintf("capsem ui: %q is not an event number", r.PathValue("seq")), http.StatusBadRequest)
		return
	}
	sess, err := s.src.Session(id)
	if err != nil {
		s.fail(w, err)
		return
	}
	v, err := modelCallView(s.src, id, seq)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.render(w, "model.html", map[string]any{"Base": s.Base(), "Session": s.view(sess), "M": v})
}
