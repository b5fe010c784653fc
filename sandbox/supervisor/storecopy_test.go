package supervisor

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/capsem/capsem/sandbox/api"
	"github.com/capsem/capsem/sandbox/home"
	"github.com/capsem/capsem/sandbox/sessionstore"
	"github.com/capsem/capsem/store"
)

// An event recorded just before a checkpoint is in it, whoever answers
// POST /v1/snapshot: a running sandbox's supervisor (capsem inspect and
// ui of a running sandbox) or a running capsem run. The store commits in
// groups (here after up to 1 s): a checkpoint that does not sync first
// misses the newest events.
func TestStoreCopyHasTheNewestEvent(t *testing.T) {
	for _, tc := range []struct {
		name string
		take func(t *testing.T, data string, rs *sessionstore.Store) api.StoreCopy
	}{
		{"sandbox supervisor", func(t *testing.T, data string, rs *sessionstore.Store) api.StoreCopy {
			sup := &supervisor{dir: home.New(data, "sb"), rs: rs}
			snap, err := sup.StoreCopy()
			if err != nil {
				t.Fatal(err)
			}
			return snap
		}},
		{"capsem run", func(t *testing.T, data string, rs *sessionstore.Store) api.StoreCopy {
			ra, err := rs.ServeStoreCopies()
			if err != nil {
				t.Fatal(err)
			}
			defer ra.Close()
			hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", ra.Sock)
			}}}
			resp, err := hc.Post("http://capsem"+api.PathStoreCopy, "application/json", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var snap api.StoreCopy
			if err := json.NewDecoder(resp.Body).Decode(&snap); err != nil || resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %v", resp.Status, err)
			}
			// The checkpoint goes with the run's snapshots directory when
			// the socket closes: read it before.
			checkHasEvent(t, snap)
			return api.StoreCopy{}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			rs, err := sessionstore.Open(data, store.Session{Command: []string{"test"}}, store.Options{CommitLinger: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer rs.End(nil)
			rs.W.Append(store.Event{Time: time.Now(), Agent: &store.Agent{State: store.AgentSilent, Detail: "just before the checkpoint"}})
			if snap := tc.take(t, data, rs); snap.Dir != "" {
				checkHasEvent(t, snap)
			}
		})
	}
}

// checkHasEvent opens snap and wants the test's event in it.
func checkHasEvent(t *testing.T, snap api.StoreCopy) {
	t.Helper()
	st, err := store.OpenReadOnly(snap.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	found := false
	err = st.EventsAfter(snap.SessionID, 0, func(ev store.Event) error {
		found = found || ev.Agent != nil && ev.Agent.Detail == "just before the checkpoint"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Errorf("the event appended just before the checkpoint is not in it (%s)", filepath.Base(snap.Dir))
	}
}
