package api

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"

	"github.com/capsem/capsem/guest/proto"
)

// serveSnapshots adds the snapshot paths to mux: POST/GET/DELETE
// PathSnapshots and POST PathSuspend.
func serveSnapshots(mux *http.ServeMux, b Backend) {
	mux.HandleFunc("POST "+PathSnapshots, func(w http.ResponseWriter, r *http.Request) {
		var req SnapshotRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, maxRequestJSON)).Decode(&req); err != nil && !errors.Is(err, io.EOF) {
			WriteError(w, http.StatusBadRequest, "the body is not a snapshot request ({\"tag\": \"TAG\"}): "+err.Error())
			return
		}
		snap, err := b.TakeSnapshot(r.Context(), req.Tag)
		if err != nil {
			WriteError(w, snapshotStatus(err), "no snapshot: "+err.Error())
			return
		}
		writeJSON(w, http.StatusCreated, snap)
	})
	mux.HandleFunc("GET "+PathSnapshots, func(w http.ResponseWriter, r *http.Request) {
		all, err := b.Snapshots()
		if err != nil {
			WriteError(w, http.StatusInternalServerError, err.Error())
			return
		}
		if all == nil {
			all = []Snapshot{}
		}
		writeJSON(w, http.StatusOK, all)
	})
	mux.HandleFunc("DELETE "+PathSnapshots, func(w http.ResponseWriter, r *http.Request) {
		tag := r.URL.Query().Get("tag")
		if tag == "" {
			WriteError(w, http.StatusBadRequest, "DELETE "+PathSnapshots+" needs ?tag=TAG (GET "+PathSnapshots+" lists them)")
			return
		}
		if err := b.RemoveSnapshot(tag); err != nil {
			WriteError(w, snapshotStatus(err), err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("POST "+PathSuspend, func(w http.ResponseWriter, r *http.Request) {
		snap, err := b.Suspend(r.Context())
		if err != nil {
			WriteError(w, snapshotStatus(err), "not suspended (the sandbox runs on): "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, snap)
	})
}

// The errors a Backend's snapshot methods wrap, for their HTTP status.
var (
	// ErrSnapshotExists: the tag is taken (409).
	ErrSnapshotExists = errors.New("api: the snapshot exists")
	// ErrStopping: the sandbox stops, and saves nothing more (409).
	ErrStopping = errors.New("the sandbox is stopping")
	// ErrBadTag: not a snapshot tag (400); its text begins the message
	// that says why (home.CheckTag).
	ErrBadTag = errors.New("snapshot tag")
)

// snapshotStatus is the HTTP status of a snapshot error.
func snapshotStatus(err error) int {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, proto.ErrBusy), errors.Is(err, ErrSnapshotExists), errors.Is(err, ErrStopping):
		return http.StatusConflict
	case errors.Is(err, ErrBadTag):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}
