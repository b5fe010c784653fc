package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/capsem/capsem/store"
)

func TestExportUsageAndErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.db")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export", "--data", dir}, exitUsage, "sqlite"},
		{[]string{"export", "--sqlite", out, "--data", dir, "--all", "--session", "x"}, exitUsage, "not both"},
		{[]string{"export", "--sqlite", out, "--data", dir, "stray"}, exitUsage, "unexpected argument"},
		{[]string{"export", "--sqlite", out, "--data", filepath.Join(dir, "none")}, 1, "none"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"capsem"}, c.args...), &stdout, &stderr); code != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, code, stderr.String(), c.code, c.want)
		}
	}
}

func TestExportNewestSessionByDefault(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"20260101T000000Z-aaaaaa", "20260102T000000Z-bbbbbb"} {
		w, err := st.Begin(store.Session{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		w.Append(store.Event{DNS: &store.DNS{QName: id, QType: "A", Decision: store.Denied}})
		if err := w.End(nil); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	out := filepath.Join(t.TempDir(), "out.db")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"capsem", "export", "--sqlite", out, "--data", dir}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "exported 1 session(s), 1 events") {
		t.Errorf("output %q", stdout.String())
	}
	if code := run([]string{"capsem", "export", "--sqlite", out, "--data", dir}, &stdout, &stderr); code == 0 {
		t.Error("an existing file was overwritten without --force")
	}
	if code := run([]string{"capsem", "export", "--sqlite", out, "--data", dir, "--all", "--force"}, &stdout, &stderr); code != 0 {
		t.Errorf("--all --force: exit %d: %s", code, stderr.String())
	}
}
