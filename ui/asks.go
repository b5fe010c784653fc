package ui

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/capsem/capsem/ask"
)

// Asks are the questions running sandboxes wait on ([network] unknown =
// "ask"), and the way to answer them: capsem ui follows every running
// sandbox's questions while it runs, so they ask rather than refuse.
type Asks interface {
	// Following lists the running sandboxes whose questions come here.
	Following() []string
	// Questions lists what waits, oldest first.
	Questions() []SandboxQuestion
	// Answer answers question id of sandbox: once, session, always or
	// deny, given by the UI.
	Answer(sandbox, id, answer string) error
}

// SandboxQuestion is a question and the sandbox that asks it.
type SandboxQuestion struct {
	Sandbox string
	ask.Question
}

// ServeAsks gives the questions' page (GET /TOKEN/asks) and its answers
// (POST /TOKEN/asks/SANDBOX/ID) their questions: without it the page says
// that nothing here asks (an exported file).
func (s *Server) ServeAsks(a Asks) { s.asks = a }

func (s *Server) askPage(w http.ResponseWriter, r *http.Request) {
	var qs []SandboxQuestion
	var following []string
	if s.asks != nil {
		qs, following = s.asks.Questions(), s.asks.Following()
	}
	s.render(w, "asks.html", map[string]any{"Base": s.Base(), "Questions": qs, "Answers": []string{ask.Once, ask.Session, ask.Always, ask.Deny},
		"Error": r.URL.Query().Get("error"), "Asks": s.asks != nil, "Following": following})
}

// answer takes a button's form. The page's own origin only: the token in
// the path keeps out who does not know it, and a form another site posts
// here (cross-site request forgery, with a token leaked from a history
// or a log) carries that site's Origin, or a Sec-Fetch-Site that is not
// same-origin, and is refused.
func (s *Server) answer(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "capsem ui: an answer is taken only from capsem ui's own page (the request's Origin is another site's)", http.StatusForbidden)
		return
	}
	if s.asks == nil {
		http.Error(w, "capsem ui: no sandbox runs here to answer (an exported file)", http.StatusNotFound)
		return
	}
	a := r.PostFormValue("answer")
	back := s.Base() + "asks"
	if err := s.asks.Answer(r.PathValue("sandbox"), r.PathValue("id"), a); err != nil {
		back += "?error=" + url.QueryEscape(err.Error())
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

// sameOrigin reports whether r comes from a page of this server. A
// browser that sends Sec-Fetch-Site (every current one) says so there;
// Origin is "null" on the pages' posts, which send no Referer
// (Referrer-Policy: no-referrer), so it decides only for an older
// browser, which must name this server.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin"
	}
	u, err := url.Parse(r.Header.Get("Origin"))
	return err == nil && u.Scheme == "http" && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}
