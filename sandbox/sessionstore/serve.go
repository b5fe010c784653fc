package sessionstore

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
)

// A running capsem run holds its session's store, which no other process
// can open. So that capsem sessions, inspect, export and ui can read the
// session while it runs, as they read a running sandbox's, the run serves
// the sandbox API's POST /v1/snapshot — and only that — on a socket in its
// session directory (home.SessionSocketPath).

// StoreCopyServer is a running capsem run's snapshot socket.
type StoreCopyServer struct {
	srv  *http.Server
	Sock string // where it listens
	snap string
}

// ServeStoreCopies serves r's snapshots until Close.
func (r *Store) ServeStoreCopies() (*StoreCopyServer, error) {
	id := r.W.ID()
	a := &StoreCopyServer{Sock: home.SessionSocketPath(r.Data, id), snap: home.SessionStoreCopiesDir(r.Data, id)}
	ln, err := home.ListenUnix(a.Sock)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	storeCopy := func(w http.ResponseWriter, _ *http.Request) {
		snap, err := r.StoreCopy(a.snap)
		if err != nil {
			api.WriteError(w, http.StatusInternalServerError, "no copy of the run's store: "+err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(snap)
	}
	mux.HandleFunc("POST "+api.PathStoreCopy, storeCopy)
	mux.HandleFunc("POST "+api.PathStoreCopyOld, storeCopy)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, http.StatusNotFound, fmt.Sprintf("a capsem run serves only POST %s (%s %s is a sandbox's: capsem start)", api.PathStoreCopy, r.Method, r.URL.Path))
	})
	a.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go a.srv.Serve(ln)
	return a, nil
}

// Close stops serving and removes the socket and what readers left of
// their snapshots.
func (a *StoreCopyServer) Close() {
	a.srv.Close()
	os.Remove(a.Sock)
	os.RemoveAll(a.snap)
}
