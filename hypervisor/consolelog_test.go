package hypervisor

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConsoleLogCap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int64
		writes  []string
		want    string // the file after Close
		dropped int64
		why     string
	}{
		{"under the cap", 16, []string{"boot\n", "ok\n"}, "boot\nok\n", 0, "a quiet guest's log is whole"},
		{"head then tail, no drop", 16, []string{"0123456789ab", "cd"}, "0123456789abcd", 0, "the tail follows the head with nothing between"},
		{"drops the middle", 16, []string{"0123456789ab", "cdefghijklmnopqrstuvwxyz"},
			"0123456789ab\n[capsem: the console log is capped; 20 bytes were dropped here, the last 4 follow]\nwxyz", 20,
			"the boot and the latest lines are what a person reads"},
		{"ring wraps over several writes", 16, []string{"0123456789ab", "cd", "ef", "gh", "ij"},
			"0123456789ab\n[capsem: the console log is capped; 4 bytes were dropped here, the last 4 follow]\nghij", 4,
			"the ring keeps the order of the latest bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "console.log")
			l, err := CreateConsoleLog(path, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.writes {
				if n, err := l.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("write %q: %d %v", w, n, err)
				}
			}
			if got := l.Dropped(); got != tc.dropped {
				t.Fatalf("dropped %d, want %d (%s)", got, tc.dropped, tc.why)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if string(got) != tc.want {
				t.Fatalf("log %q, want %q (%s)", got, tc.want, tc.why)
			}
		})
	}
}

// A guest writing without end fills the log to the cap and no further.
func TestConsoleLogFlood(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	l, err := CreateConsoleLog(path, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	l.Copy(bytes.NewReader(bytes.Repeat([]byte("flood\n"), 3<<20)))
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 1<<20+200 {
		t.Fatalf("the log grew to %d bytes with a 1 MiB cap", st.Size())
	}
	b, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(b), "flood\n") || !strings.Contains(string(b), "bytes were dropped here") {
		t.Fatalf("log does not end with the latest output after a marker")
	}
}

func TestConsoleHint(t *testing.T) {
	for _, c := range []struct {
		log, want, why string
	}{
		{"", "", "no log kept: nothing to point at"},
		{"/run/c.log", " (console log: /run/c.log)", "a boot error says where the guest's own account is"},
	} {
		if got := (&Config{ConsoleLog: c.log}).ConsoleHint(); got != c.want {
			t.Errorf("ConsoleHint(%q) = %q, want %q: %s", c.log, got, c.want, c.why)
		}
	}
}
