package mcp

import (
	"fmt"
	"sync"
	"testing"
)

func TestMCPTrackerBounds(t *testing.T) {
	var mu sync.Mutex
	recorded := map[*mcpCall]int{}
	tr := newMCPTracker(func(c *mcpCall) {
		mu.Lock()
		recorded[c]++
		mu.Unlock()
	})
	// A guest that opens sessions and leaves every request waiting (its
	// own server answers 202 and never responds).
	var calls []*mcpCall
	for s := 0; s < 40; s++ {
		sess := tr.session(fmt.Sprintf("host\x00sid\x00%d", s))
		for i := 0; i < 500; i++ {
			c := &mcpCall{}
			c.rec.RequestID = fmt.Sprint(i)
			calls = append(calls, c)
			tr.wait(sess, c.rec.RequestID, c)
		}
	}
	tr.mu.Lock()
	pending, n := tr.pending, 0
	for _, s := range tr.sessions {
		n += len(s.pending)
	}
	tr.mu.Unlock()
	if pending != n || pending > mcpMaxPendingAll {
		t.Errorf("pending count %d, held %d, cap %d", pending, n, mcpMaxPendingAll)
	}
	// Every request is recorded once: now if it was forgotten, at close if
	// it still waited; a late response finds a forgotten one gone.
	if c := tr.claim(tr.session("host\x00sid\x000"), "1"); c != nil {
		t.Errorf("a request of an evicted session was claimed after it was recorded")
	}
	tr.close()
	for _, c := range calls {
		if recorded[c] != 1 {
			t.Fatalf("a request recorded %d times", recorded[c])
		}
	}
}
