package main

import (
	"bytes"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// capsem ui --open hands the desktop's opener a file, not the URL: the
// token is the key to the sessions, and every local user can read every
// process's argv (/proc/PID/cmdline). A fake opener on PATH records its
// argv: no token in it; the file it gets is ours alone (0600 in a 0700
// directory), sends the browser to the URL, and is gone when ui stops.
func TestUIOpenKeepsTheTokenOffArgv(t *testing.T) {
	opener := map[string]string{"linux": "xdg-open", "darwin": "open"}[runtime.GOOS]
	if opener == "" {
		t.Skip("capsem ui --open knows the openers of Linux and macOS only")
	}
	bin := t.TempDir()
	rec := filepath.Join(bin, "argv")
	script := "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > " + rec + ".part\nmv " + rec + ".part " + rec + "\n"
	if err := os.WriteFile(filepath.Join(bin, opener), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("TMPDIR", t.TempDir())

	var stdout, stderr lockedBuffer
	code := make(chan int, 1)
	go func() { code <- run([]string{"capsem", "ui", "--open", "--data", t.TempDir()}, &stdout, &stderr) }()
	var argv []byte
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var err error
		if argv, err = os.ReadFile(rec); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the opener was not run in 20 s; stdout %q, stderr %q", stdout.String(), stderr.String())
		}
	}
	m := regexp.MustCompile(`http://\S+/([0-9a-f]{32})/`).FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatalf("no URL with a token in %q", stdout.String())
	}
	link, token := m[0], m[1]
	if strings.Contains(string(argv), token) {
		t.Errorf("the opener's argv holds the token: %q", argv)
	}
	args := strings.Split(strings.TrimSuffix(string(argv), "\n"), "\n")
	u, err := url.Parse(args[0])
	if len(args) != 1 || err != nil || u.Scheme != "file" {
		t.Fatalf("the opener got %q, want one file: URL", args)
	}
	page, err := os.ReadFile(u.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), `http-equiv="refresh" content="0; url=`+link+`"`) {
		t.Errorf("the page does not send the browser to %s:\n%s", link, page)
	}
	for _, f := range []struct {
		path string
		mode os.FileMode
	}{{u.Path, 0o600}, {filepath.Dir(u.Path), os.ModeDir | 0o700}} {
		if fi, err := os.Lstat(f.path); err != nil || fi.Mode() != f.mode {
			t.Errorf("%s: %v %v, want %s", f.path, fi.Mode(), err, f.mode)
		}
	}
	// runUI has its SIGINT handler in place before it opens the browser.
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-code:
		if c != 0 {
			t.Errorf("capsem ui: exit %d: %s", c, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("capsem ui did not stop on SIGINT")
	}
	if _, err := os.Lstat(filepath.Dir(u.Path)); err == nil {
		t.Errorf("%s is left after capsem ui stopped", filepath.Dir(u.Path))
	}
}
