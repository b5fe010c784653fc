package storeview

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/store"
)

// TestOpenStoreCopyStaysInItsDirectory: a socket that answers with a
// snapshot outside the directory snapshots are made in (another user's
// socket in a shared fallback directory, say) is refused, and what it
// named is neither opened nor removed; one inside is read.
func TestOpenStoreCopyStaysInItsDirectory(t *testing.T) {
	dir := t.TempDir()
	snaps := filepath.Join(dir, "snapshots")
	victim := filepath.Join(dir, "precious")
	inside := filepath.Join(snaps, "1")
	st, err := store.Open(inside)
	if err != nil {
		t.Fatal(err)
	}
	w, err := st.Begin(store.Session{ID: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.End(nil); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		answer string
		ok     bool
		why    string
	}{
		{victim, false, "a directory beside the snapshots"},
		{filepath.Join(snaps, "..", "precious"), false, "a way out through .."},
		{snaps, false, "the snapshots directory itself"},
		{inside, true, "a snapshot in its directory"},
	} {
		sock := filepath.Join(dir, "api.sock")
		ln, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			json.NewEncoder(w).Encode(api.StoreCopy{Dir: c.answer, SessionID: "s1"})
		})}
		go srv.Serve(ln)
		ls, err := openStoreCopy(context.Background(), liveSocket{sock: sock, snaps: snaps, what: "capsem run s1"})
		srv.Close()
		if c.ok != (err == nil) {
			t.Errorf("%s (%s): %v", c.why, c.answer, err)
		}
		if err == nil {
			ls.close()
		} else if !strings.Contains(err.Error(), "not read, not removed") {
			t.Errorf("%s: the error does not say what was refused: %v", c.why, err)
		}
		if _, serr := os.Stat(victim); serr != nil {
			t.Fatalf("%s: the named directory was removed: %v", c.why, serr)
		}
	}
}
