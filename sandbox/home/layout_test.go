package home

import (
	"path/filepath"
	"strings"
	"testing"
)

// The API socket sits in the sandbox's directory when the path fits a
// unix socket address, else under $XDG_RUNTIME_DIR/capsem, one per
// directory.
func TestSocketPath(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	short := New("/home/u/.local/share/capsem", "dev")
	if got := short.SocketPath(); got != "/home/u/.local/share/capsem/sandboxes/dev/api.sock" {
		t.Errorf("short: %s", got)
	}
	deep := "/home/u/" + strings.Repeat("very-long-directory/", 5)
	a, b := New(deep+"a", "dev"), New(deep+"b", "dev")
	pa, pb := a.SocketPath(), b.SocketPath()
	if filepath.Dir(pa) != "/run/user/1000/capsem" || len(pa) > MaxSocketPath || !strings.HasPrefix(filepath.Base(pa), "dev-") {
		t.Errorf("long: %s (%d bytes)", pa, len(pa))
	}
	if pa == pb {
		t.Errorf("two data directories share the socket %s", pa)
	}
}

func TestSandboxNames(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
		why  string
	}{
		{"dev", true, "letters"},
		{"task-17", true, "a dash inside"},
		{"0", true, "one digit"},
		{strings.Repeat("a", 63), true, "63 is the most"},
		{strings.Repeat("a", 64), false, "64 is one too many"},
		{"-x", false, "no leading dash"},
		{"Dev", false, "no capitals"},
		{"a_b", false, "no underscore"},
		{"a/b", false, "never a path"},
		{"..", false, "never a path"},
		{"", false, "not empty"},
	} {
		if err := CheckName(c.name); (err == nil) != c.ok {
			t.Errorf("CheckName(%q) = %v, want ok=%v (%s)", c.name, err, c.ok, c.why)
		}
	}
}
