package cpu

import (
	"runtime"
	"testing"
)

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Jiffies
		why  string
	}{
		{"cpu  10 1 5 100 7 2 3 4 9 9\ncpu0 10 1 5 100 7 2 3 4 9 9\n",
			Jiffies{Busy: 10 + 1 + 5 + 2 + 3, IRQ: 2 + 3, Total: 10 + 1 + 5 + 100 + 7 + 2 + 3 + 4},
			"idle, iowait and steal are not busy; irq and softirq are, and are IRQ too; guest columns are in user and nice already"},
		{"cpu  10 1 5 100\n", Jiffies{Busy: 16, Total: 116}, "an old kernel's four columns"},
		{"cpu\n", Jiffies{}, "no counters: zero, not a panic"},
		{"", Jiffies{}, "empty: zero, not a panic"},
	} {
		if got := parseStat([]byte(c.in)); got != c.want {
			t.Errorf("parseStat(%q) = %+v, want %+v: %s", c.in, got, c.want, c.why)
		}
	}
}

func TestCores(t *testing.T) {
	n := float64(runtime.NumCPU())
	for _, c := range []struct {
		d, t0, t1, want float64
		why             string
	}{
		{50, 100, 200, n / 2, "half the machine's ticks busy is half its cores"},
		{50, 200, 200, 0, "Total did not move: 0, not a division by zero"},
		{50, 300, 200, 0, "Total went back (a counter read out of order): 0"},
	} {
		if got := Cores(c.d, c.t0, c.t1); got != c.want {
			t.Errorf("Cores(%v, %v, %v) = %v, want %v: %s", c.d, c.t0, c.t1, got, c.want, c.why)
		}
	}
}
