package cpu

import (
	"os"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64
		why  string
	}{
		{"1234 (capsem-net) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 99 0 0",
			3, "utime 250 + stime 50 ticks at USER_HZ 100 are 3 s"},
		{"1234 (a) b (c) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 99 0 0",
			3, "a command name with spaces and parentheses: the fields start after the last ')'"},
		{"1234 (capsem-net) S 1 1234", 0, "a line cut short: 0, not a panic"},
		{"no parenthesis at all", 0, "not a stat line: 0"},
		{"", 0, "empty: 0"},
	} {
		if got := parseProcStat([]byte(c.in)); got != c.want {
			t.Errorf("parseProcStat(%q) = %v, want %v: %s", c.in, got, c.want, c.why)
		}
	}
}

func TestProcSeconds(t *testing.T) {
	if got := ProcSeconds(0); got != 0 {
		t.Errorf("ProcSeconds(0) = %v, want 0: pid 0 stands for no process", got)
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// Burn CPU until the kernel's tick counts it (10 ms at USER_HZ 100),
	// for at most two seconds: this process's own seconds must not read 0.
	for deadline := time.Now().Add(2 * time.Second); ProcSeconds(os.Getpid()) == 0; {
		if time.Now().After(deadline) {
			t.Fatal("ProcSeconds(self) is still 0 after 2 s of CPU")
		}
	}
}
