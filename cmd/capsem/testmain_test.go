package main

import (
	"fmt"
	"os"
	"testing"

	"github.com/capsem/capsem/mitm/ca"
	"github.com/capsem/capsem/store"
)

// TestMain gives the tests a config directory of their own: the CA and
// the seal key that inspect trusts live there, not in the user's.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "capsem-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// openTestStore opens a store at dir whose sessions are sealed with this
// installation's key, as capsem run's are.
func openTestStore(t testing.TB, dir string) (*store.Store, error) {
	t.Helper()
	key, err := ca.LoadOrCreateSealKey("")
	if err != nil {
		t.Fatal(err)
	}
	return store.OpenWith(dir, store.Options{SealKey: key})
}
