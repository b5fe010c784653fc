package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportOCSF: capsem export --format ocsf writes one OCSF event a line
// to standard output or --out, says what it wrote on standard error, and
// refuses the SQLite export's flags with it.
func TestExportOCSF(t *testing.T) {
	dir := modelCallSession(t, "")
	out, errOut, code := runCapsem(t, "export", "--format", "ocsf", "--data", dir)
	if code != 0 || !strings.Contains(errOut, "OCSF 1.8.0 events") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i, l := range lines {
		var ev struct {
			ClassUID int `json:"class_uid"`
			Metadata struct {
				Version string `json:"version"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(l), &ev); err != nil || ev.ClassUID == 0 || ev.Metadata.Version != "1.8.0" {
			t.Errorf("line %d is not an OCSF event: %v: %s", i+1, err, l)
		}
	}
	file := filepath.Join(t.TempDir(), "events.jsonl")
	if _, errOut, code := runCapsem(t, "export", "--format", "ocsf", "--out", file, "--data", dir, "--all"); code != 0 {
		t.Fatalf("--out: exit %d: %s", code, errOut)
	}
	if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != strings.TrimSpace(out) {
		t.Errorf("--out wrote other events than standard output:\n%s\n---\n%s", b, out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "ocsf", "--sqlite", "x.db"}, "--sqlite is the SQLite export's file"},
		{[]string{"--sqlite", "x.db", "--out", "x.jsonl"}, "--out is for --format ocsf"},
		{[]string{"--format", "csv"}, `--format "csv": write sqlite or ocsf`},
	} {
		if _, errOut, code := runCapsem(t, append([]string{"export", "--data", dir}, c.args...)...); code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}
