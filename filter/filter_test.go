package filter

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

type memRecorder struct {
	mu  sync.Mutex
	evs []store.Event
}

func (m *memRecorder) Append(ev store.Event) { m.mu.Lock(); m.evs = append(m.evs, ev); m.mu.Unlock() }
func (m *memRecorder) Admit() error          { return nil }

func newFilter(t *testing.T, pol *policy.Policy) *Filter {
	t.Helper()
	authority, err := ca.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f, err := New(Config{Policy: pol, Recorder: &memRecorder{}, Authority: authority})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestReloadPutsTheFileInForceAndABrokenFileKeepsThePrevious(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "policy.toml")
	if err := os.WriteFile(path, []byte("[network]\nallow = [\"example.com\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFilter(t, policy.DenyAll())
	if f.Policy().DecideFlow("example.com", 443).Allowed {
		t.Fatal("DenyAll allows example.com")
	}
	p, err := f.Reload(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Policy() != p || !p.DecideFlow("example.com", 443).Allowed {
		t.Fatalf("after Reload the policy in force is %v, want the file's", f.Policy().Source)
	}
	if err := os.WriteFile(path, []byte("[network]\nallow = [\"foo*.com\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Reload(path); err == nil {
		t.Fatal("Reload of a broken file: no error")
	}
	if f.Policy() != p {
		t.Fatal("a broken file replaced the policy in force")
	}
}

func TestCloseTwice(t *testing.T) {
	f := newFilter(t, policy.DenyAll())
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestReloadKeepsThePlaceholdersTheGuestHolds(t *testing.T) {
	t.Setenv("FILTER_TEST_TOKEN", "the-real-value-of-the-token")
	path := filepath.Join(t.TempDir(), "policy.toml")
	write := func(allow string) {
		t.Helper()
		body := "[network]\nallow = [\"" + allow + "\"]\n\n[[secret]]\nname = \"TOKEN\"\nfrom_env = \"FILTER_TEST_TOKEN\"\nhosts = [\"api.example.com\"]\n"
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.example.com")
	first, err := LoadPolicy(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ph := first.Placeholders()["TOKEN"]
	if ph == "" {
		t.Fatal("LoadPolicy: the secret has no placeholder")
	}
	f := newFilter(t, first)
	write("b.example.com")
	p, err := f.Reload(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Placeholders()["TOKEN"]; got != ph {
		t.Errorf("after Reload the placeholder is %q, want the one the guest holds, %q", got, ph)
	}
	if !f.Policy().DecideFlow("b.example.com", 443).Allowed {
		t.Error("the reloaded file is not in force")
	}
}
