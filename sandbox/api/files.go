package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/capsem/capsem/guest/proto"
)

// Files travel through a command in the guest, cat, over the control
// channel's streams: binary-safe, streamed under its flow control, and
// recorded as the guest's exec_events like any other command, so a file
// put into a sandbox is in its record. The file is written beside its
// target and renamed over it, so a reader in the guest never sees half a
// file.

// putScript writes stdin to $1 (its directory made first), then sets mode
// $2 if given.
const putScript = `set -e
umask 022
d=$(dirname -- "$1")
mkdir -p -- "$d"
t="$1.capsem-part"
cat > "$t"
if [ -n "$2" ]; then chmod -- "$2" "$t"; fi
mv -f -- "$t" "$1"`

// getScript writes $1's size on stderr's first line, then the file on
// stdout.
const getScript = `[ -f "$1" ] || { echo "$1: no such regular file in the guest" >&2; exit 2; }
[ -r "$1" ] || { echo "$1: not readable" >&2; exit 2; }
stat -L -c %s -- "$1" >&2 && exec cat -- "$1"`

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
	s, err := b.Exec(context.Background(), proto.Exec{Argv: []string{"sh", "-c", putScript, "capsem-put", p, mode}, Dir: "/"})
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, "the guest could not start the copy: "+err.Error())
		return
	}
	var stderr strings.Builder
	errDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(&stderr, io.LimitReader(s.Stderr(), 64<<10))
		_, _ = io.Copy(io.Discard, s.Stderr())
		close(errDone)
	}()
	go func() { _, _ = io.Copy(io.Discard, s.Stdout()) }()
	n, cerr := io.CopyBuffer(s, r.Body, make([]byte, 256<<10))
	if cerr != nil {
		_ = s.Signal("KILL") // half a body: the temporary file is left, the target untouched
	} else {
		_ = s.CloseStdin()
	}
	exit, werr := s.Wait()
	<-errDone
	switch {
	case cerr != nil:
		WriteError(w, http.StatusBadRequest, fmt.Sprintf("the upload broke off after %d bytes (%v); %s is unchanged", n, cerr, p))
	case werr != nil || exit.Code != 0:
		msg := strings.TrimSpace(stderr.String())
		if msg == "" && werr != nil {
			msg = werr.Error()
		}
		WriteError(w, http.StatusConflict, fmt.Sprintf("the guest could not write %s: %s", p, msg))
	default:
		writeJSON(w, http.StatusCreated, map[string]any{"path": p, "size": n})
	}
}

func serveGet(b Backend, w http.ResponseWriter, r *http.Request) {
	p, ok := guestPath(w, r)
	if !ok {
		return
	}
	s, err := b.Exec(context.Background(), proto.Exec{Argv: []string{"sh", "-c", getScript, "capsem-get", p}, Dir: "/"})
	if err != nil {
		WriteError(w, http.StatusServiceUnavailable, "the guest could not start the copy: "+err.Error())
		return
	}
	defer func() {
		select {
		case <-s.Done():
		default:
			_ = s.Signal("KILL") // the client went away
		}
		_, _ = s.Wait()
	}()
	// The first line of stderr is the size; anything else there is why not.
	errs := bufio.NewReader(s.Stderr())
	line, lerr := errs.ReadString('\n')
	size, perr := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if lerr != nil || perr != nil {
		rest, _ := io.ReadAll(io.LimitReader(errs, 64<<10))
		_, _ = io.Copy(io.Discard, s.Stdout())
		msg := strings.TrimSpace(line + string(rest))
		if msg == "" {
			msg = "the guest gave no size"
		}
		WriteError(w, http.StatusNotFound, msg)
		return
	}
	go func() { _, _ = io.Copy(io.Discard, errs) }()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.WriteHeader(http.StatusOK)
	// Exactly size bytes: a file that changed size meanwhile ends the
	// response short, which the client sees as an error, never as a
	// silently different file.
	_, _ = io.CopyBuffer(w, io.LimitReader(s.Stdout(), size), make([]byte, 256<<10))
	_, _ = io.Copy(io.Discard, s.Stdout())
}
