package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// Files into and out of the guest are the Backend's (PutFile, GetFile:
// through the sandbox's transfer disk, else over the control channel);
// here they are streamed between the HTTP body and it, never held whole.

// guestPath is the path query parameter: absolute, or relative to the
// workspace.
func guestPath(w http.ResponseWriter, r *http.Request) (string, bool) {
	p := r.URL.Query().Get("path")
	if p == "" || strings.ContainsRune(p, 0) {
		WriteError(w, http.StatusBadRequest, "path=P is required: the file's path in the guest (absolute, or relative to /workspace)")
		return "", false
	}
	if !path.IsAbs(p) {
		p = path.Join("/workspace", p)
	}
	return path.Clean(p), true
}

func servePut(b Backend, w http.ResponseWriter, r *http.Request) {
	p, ok := guestPath(w, r)
	if !ok {
		return
	}
	mode := r.URL.Query().Get("mode")
	if mode != "" {
		if _, err := strconv.ParseUint(mode, 8, 32); err != nil {
			WriteError(w, http.StatusBadRequest, fmt.Sprintf("mode=%q: want octal permissions, e.g. 0644", mode))
			return
		}
	}
	n, err := b.PutFile(r.Context(), p, mode, r.ContentLength, r.Body)
	if err != nil {
		WriteError(w, http.StatusConflict, fmt.Sprintf("%s not written (%d bytes sent): %v", p, n, err))
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"path": p, "size": n})
}

// notFound is what a Backend's GetFile error says when the file was not
// there.
type notFound interface{ NotFound() bool }

func serveGet(b Backend, w http.ResponseWriter, r *http.Request) {
	p, ok := guestPath(w, r)
	if !ok {
		return
	}
	started := false
	_, err := b.GetFile(r.Context(), p, func(size int64) (io.Writer, error) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
		started = true
		return w, nil
	})
	if err == nil || started {
		// Once the answer has begun, an error can only cut it short, which
		// the client sees against Content-Length.
		return
	}
	var nf notFound
	if errors.As(err, &nf) && nf.NotFound() {
		WriteError(w, http.StatusNotFound, err.Error())
		return
	}
	WriteError(w, http.StatusServiceUnavailable, "the guest could not send "+p+": "+err.Error())
}
