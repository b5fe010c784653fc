package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/guest/proto"
	"github.com/capsem/capsem/store"
	"github.com/capsem/capsem/store/sqliteexport"
)

// Backend is the sandbox a Handler serves.
type Backend interface {
	// Status is the sandbox as it is now.
	Status() Status
	// Exec starts a command in the guest; the session's exec record is
	// the backend's to keep.
	Exec(ctx context.Context, ex proto.Exec) (*proto.Session, error)
	// ReloadPolicy reads the sandbox's policy file again and swaps it in,
	// or keeps the policy in force and says why (file:line).
	ReloadPolicy() (Reload, error)
	// Stop begins powering the guest off; the supervisor exits once the
	// session is recorded. It returns at once.
	Stop()
	// Events calls fn with each recorded event of the session after
	// sequence number after.
	Events(after uint64, fn func(store.Event) error) error
	// Done is closed when the sandbox is stopping: no events follow.
	Done() <-chan struct{}
	// StoreCopy writes a read-only copy of the event store.
	StoreCopy() (StoreCopy, error)
	// TakeSnapshot saves the guest as snapshot tag ("": the time) and
	// lets it go on.
	TakeSnapshot(ctx context.Context, tag string) (Snapshot, error)
	// Snapshots lists the sandbox's snapshots, oldest first.
	Snapshots() ([]Snapshot, error)
	// RemoveSnapshot removes snapshot tag (fs.ErrNotExist wrapped when
	// there is none).
	RemoveSnapshot(tag string) error
	// Suspend saves the guest and stops the sandbox; the next start
	// resumes it.
	Suspend(ctx context.Context) (Snapshot, error)
	// Ports are the published ports in force.
	Ports() []Port
	// Publish publishes spec (ports.ParseSpec) and keeps it in the
	// settings; errors wrap ports.ErrBadSpec or ports.ErrInUse.
	Publish(spec string) (Port, error)
	// Unpublish unpublishes spec's host port and drops it from the
	// settings; ports.ErrNotPublished when it is not published.
	Unpublish(spec string) (Port, error)
	// PutFile writes body (size bytes, -1 when unknown) to path in the
	// guest, mode "" keeping the default; it returns the bytes taken.
	PutFile(ctx context.Context, path, mode string, size int64, body io.Reader) (int64, error)
	// Asks is the broker of the guest's questions ([network] unknown =
	// "ask"), the same for the sandbox's life.
	Asks() *ask.Broker
	// GetFile copies the guest's file at path to what open returns, open
	// being called once with its size; an error with NotFound() true says
	// it was not there.
	GetFile(ctx context.Context, path string, open func(size int64) (io.Writer, error)) (int64, error)
}

// maxRequestJSON caps a JSON request body: an ExecRequest with its argv
// and environment.
const maxRequestJSON = 1 << 20

// followPoll is how often a followed event stream looks for new events.
// Events reach the store in group commits every few milliseconds; a
// quarter second is what a person watching a log does not notice.
const followPoll = 250 * time.Millisecond

// Handler serves the API over b.
func Handler(b Backend) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathSandbox, func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, b.Status()) })
	mux.HandleFunc("POST "+PathExec, func(w http.ResponseWriter, r *http.Request) { serveExec(b, w, r) })
	mux.HandleFunc("POST "+PathPolicyReload, func(w http.ResponseWriter, r *http.Request) {
		rl, err := b.ReloadPolicy()
		if err != nil {
			WriteError(w, http.StatusUnprocessableEntity, "the policy in force is kept: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, rl)
	})
	mux.HandleFunc("POST "+PathStop, func(w http.ResponseWriter, r *http.Request) {
		b.Stop()
		writeJSON(w, http.StatusAccepted, map[string]string{"state": "stopping"})
	})
	storeCopy := func(w http.ResponseWriter, r *http.Request) {
		snap, err := b.StoreCopy()
		if err != nil {
			WriteError(w, http.StatusInternalServerError, "no copy of the event store: "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, snap)
	}
	mux.HandleFunc("POST "+PathStoreCopy, storeCopy)
	mux.HandleFunc("POST "+PathStoreCopyOld, storeCopy)
	serveSnapshots(mux, b)
	servePorts(mux, b)
	ServeAsks(mux, b.Asks(), b.Done())
	mux.HandleFunc("GET "+PathEvents, func(w http.ResponseWriter, r *http.Request) { serveEvents(b, w, r) })
	mux.HandleFunc("PUT "+PathFiles, func(w http.ResponseWriter, r *http.Request) { servePut(b, w, r) })
	mux.HandleFunc("GET "+PathFiles, func(w http.ResponseWriter, r *http.Request) { serveGet(b, w, r) })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, http.StatusNotFound, fmt.Sprintf("no %s %s in this API: see docs/API.md (GET %s, POST %s, POST %s, POST %s, GET %s, PUT/GET %s, POST %s, POST/GET/DELETE %s, POST %s, GET/POST/DELETE %s, GET %s, POST %s/ID)",
			r.Method, r.URL.Path, PathSandbox, PathExec, PathPolicyReload, PathStop, PathEvents, PathFiles, PathStoreCopy, PathSnapshots, PathSuspend, PathPorts, PathAsks, PathAsks))
	})
	return mux
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// WriteError answers with an ErrorBody.
func WriteError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg})
}

// serveEvents streams the session's events as NDJSON, one line per row
// of the SQLite export ({"table": …, its columns…}); with follow=1 it goes
// on with new events until the sandbox stops or the client goes.
func serveEvents(b Backend, w http.ResponseWriter, r *http.Request) {
	var after uint64
	if s := r.URL.Query().Get("since"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			WriteError(w, http.StatusBadRequest, fmt.Sprintf("since=%q: want the sequence number of the last event seen (0 for all)", s))
			return
		}
		after = n
	}
	follow := r.URL.Query().Get("follow") == "1"
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	send := func(ev store.Event) error {
		for _, row := range sqliteexport.EventRows(ev) {
			row.Columns["table"] = row.Table
			if err := enc.Encode(row.Columns); err != nil {
				return err
			}
		}
		after = ev.Seq
		return nil
	}
	for {
		err := b.Events(after, send)
		if flusher != nil {
			flusher.Flush()
		}
		if err != nil || !follow {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-b.Done():
			_ = b.Events(after, send) // what came since the last look
			return
		case <-time.After(followPoll):
		}
	}
}

// startError answers for a command that could not be started: an exit
// with the shell's code when the guest gave one (127 not found), else an
// error.
func startError(err error) (Exit, bool) {
	var perr proto.Error
	if errors.As(err, &perr) && perr.Code != 0 {
		return Exit{Code: perr.Code, Error: perr.Msg}, true
	}
	return Exit{}, false
}
