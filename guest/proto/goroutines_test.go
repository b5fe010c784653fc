package proto

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
)

// grownBy says how many more goroutines the process has than base (a
// runtime.NumGoroutine reading taken before): NumGoroutine's count, and
// when that is more than slack, an exact count instead.
//
// Why: runtime.NumGoroutine sums the runtime's free lists while the
// scheduler moves dead goroutines between a P's list and the global one, 32
// at a time (runtime.gcount says the result "can be inconsistent"), so a
// reading can be 32 too many — never too few: FuzzClient has read 35
// goroutines more than before a client that leaked none, and two readings
// in a row can agree on such a count, since a thread descheduled mid-move
// keeps the window open. The
// exact count stops the world (runtime.Stack of every goroutine), so it is
// taken only to confirm a high reading.
func grownBy(base, slack int) int {
	if n := runtime.NumGoroutine() - base; n <= slack {
		return n
	}
	return exactGoroutines() - base
}

// exactGoroutines counts the goroutines of a stop-the-world dump of all of
// them: one "goroutine N [state]:" line each, the first at the start and
// every other after a blank line.
func exactGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("\n\ngoroutine ")) + 1
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestExactGoroutinesCounts: the exact count sees goroutines come (within
// a few: earlier tests' goroutines may still be ending).
func TestExactGoroutinesCounts(t *testing.T) {
	before := exactGoroutines()
	stop := make(chan struct{})
	defer close(stop)
	var started sync.WaitGroup
	for range 40 {
		started.Add(1)
		go func() { started.Done(); <-stop }()
	}
	started.Wait()
	if got := exactGoroutines() - before; got < 36 || got > 44 {
		t.Errorf("exact count grew by %d with 40 goroutines started, want 40", got)
	}
}
