package ui

import (
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/capsem/capsem/store"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Server serves the viewer's pages under /TOKEN/.
type Server struct {
	src   Source
	token string
	tmpl  *template.Template
	mux   *http.ServeMux
	hosts hostCache
	log   *slog.Logger
	asks  Asks // nil: no questions page (ServeAsks)
}

// New serves src's sessions to requests whose path starts with /token/.
// The token must be long and random: it is all that keeps another local
// user out.
func New(src Source, token string, log *slog.Logger) (*Server, error) {
	if len(token) < 16 {
		return nil, errors.New("ui: the access token must be at least 16 characters")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tmpl, err := template.New("").Funcs(templateFuncs).ParseFS(templateFiles, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	s := &Server{src: src, token: token, tmpl: tmpl, mux: http.NewServeMux(), log: log}
	static, _ := fs.Sub(staticFiles, "static")
	s.mux.Handle("GET /{tok}/static/", http.StripPrefix("/"+token+"/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{tok}/{$}", s.sessions)
	s.mux.HandleFunc("GET /{tok}/s/{id}", s.session)
	s.mux.HandleFunc("GET /{tok}/s/{id}/rows", s.rows)
	s.mux.HandleFunc("GET /{tok}/s/{id}/hosts", s.hostSummary)
	s.mux.HandleFunc("GET /{tok}/s/{id}/m/{seq}", s.modelCall)
	s.mux.HandleFunc("GET /{tok}/asks", s.askPage)
	s.mux.HandleFunc("POST /{tok}/asks/{sandbox}/{id}", s.answer)
	return s, nil
}

// Base is the path every page's links start with.
func (s *Server) Base() string { return "/" + s.token + "/" }

// securityHeaders: nothing from another origin, no inline script or style
// (guest text is never markup, and cannot become script even if it were),
// no framing, and no Referer carrying the token to another site.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cache-Control", "no-store")
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w.Header())
	if !loopbackHost(r.Host) {
		http.Error(w, "capsem ui: answers only requests for a loopback address or localhost, not "+strconv.Quote(r.Host), http.StatusMisdirectedRequest)
		return
	}
	tok, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if subtle.ConstantTimeCompare([]byte(tok), []byte(s.token)) != 1 {
		http.Error(w, "capsem ui: this address needs the access token: open the URL capsem ui printed", http.StatusForbidden)
		return
	}
	if r.URL.Path == "/"+s.token {
		http.Redirect(w, r, s.Base(), http.StatusFound)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// loopbackHost says whether a request's Host names this machine's loopback:
// a page on another site that resolves its own name to 127.0.0.1 (DNS
// rebinding) sends its own name here, and is refused.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) render(w http.ResponseWriter, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.tmpl.ExecuteTemplate(w, name, data); err != nil {
		s.log.Error("ui: rendering a page", "page", name, "err", err)
	}
}

// fail answers an error: a session or event that is not there is a 404,
// anything else (the store) a 500 saying what failed.
func (s *Server) fail(w http.ResponseWriter, err error) {
	if errors.Is(err, store.ErrNotFound) {
		http.Error(w, "capsem ui: "+err.Error(), http.StatusNotFound)
		return
	}
	s.log.Error("ui: reading the store", "err", err)
	http.Error(w, "capsem ui: reading the sessions failed: "+err.Error(), http.StatusInternalServerError)
}

var templateFuncs = template.FuncMap{
	"time": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"clock": func(t time.Time) string { return t.Local().Format("15:04:05.000") },
	"cost":  costText,
	"size":  store.FormatSize,
	"dur": func(d time.Duration) string {
		if d >= time.Second {
			return d.Round(100 * time.Millisecond).String()
		}
		return d.Round(time.Millisecond).String()
	},
	"kinds": func() []string { return rowKinds },
	"hd":    func(base, title string) map[string]string { return map[string]string{"Base": base, "Title": title} },
	// hdr is hd for a page that reloads itself every refresh seconds.
	"hdr": func(base, title, refresh string) map[string]string {
		return map[string]string{"Base": base, "Title": title, "Refresh": refresh}
	},
	"hostsData": func(base, id string, barMax int, hosts []hostStat) map[string]any {
		return map[string]any{"Base": base, "ID": id, "BarMax": barMax, "Hosts": hosts}
	},
	"rowsData": func(base, id string, rows []row) map[string]any {
		return map[string]any{"Base": base, "ID": id, "Rows": rows}
	},
	"icon": func(k string) string { return rowIcons[k] },
}
