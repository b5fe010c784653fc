package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What capsem mcp serve refuses before it serves anything.
func TestMCPServeRefuses(t *testing.T) {
	data := t.TempDir()
	file := filepath.Join(data, "p.toml")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		why  string
		dir  string // the working directory
		args []string
		want string
	}{
		{"created sandboxes would share the host's root", "/", []string{"--allow-create"}, "would share / with every sandbox"},
		{"a policy that is not there", data, []string{"--policy", filepath.Join(data, "none.toml")}, "--policy"},
		{"a workspace that is a file", data, []string{"--workspace", file}, "not a directory"},
		{"HTTP off loopback", data, []string{"--http", "0.0.0.0:0"}, "loopback only"},
		{"a prefix no name starts with", data, []string{"--prefix", "-x"}, "prefix"},
		{"an argument", data, []string{"stray"}, "takes only flags"},
	} {
		t.Run(c.why, func(t *testing.T) {
			t.Chdir(c.dir)
			var stdout, stderr bytes.Buffer
			args := append([]string{"capsem", "mcp", "serve", "--data", data}, c.args...)
			if code := run(args, &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), c.want) || stdout.Len() != 0 {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d mentioning %q", c.args, code, stdout.String(), stderr.String(), exitUsage, c.want)
			}
		})
	}
}
