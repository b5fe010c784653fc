package provider

import (
	"fmt"
	"sync"
	"testing"

	"github.com/capsem/capsem/store"
)

func call(results []string, calls ...string) *store.ModelCall {
	mc := &store.ModelCall{}
	for _, r := range results {
		mc.ToolResults = append(mc.ToolResults, store.ToolResult{CallID: r})
	}
	for i, c := range calls {
		mc.ToolCalls = append(mc.ToolCalls, store.ToolCall{Index: i, CallID: c})
	}
	return mc
}

func TestTracerLoop(t *testing.T) {
	tr := NewTracer(100)
	c1 := call(nil, "a", "b")
	tr.Assign(c1)
	if len(c1.TraceID) != 32 {
		t.Fatalf("trace id %q", c1.TraceID)
	}
	c2 := call([]string{"a", "b"}, "c")
	tr.Assign(c2)
	c3 := call([]string{"c"})
	tr.Assign(c3)
	if c2.TraceID != c1.TraceID || c3.TraceID != c1.TraceID {
		t.Fatalf("one loop got traces %s %s %s", c1.TraceID, c2.TraceID, c3.TraceID)
	}
	c4 := call([]string{"unknown"}, "d")
	tr.Assign(c4)
	c5 := call(nil)
	tr.Assign(c5)
	if c4.TraceID == c1.TraceID || c5.TraceID == c1.TraceID || c4.TraceID == c5.TraceID {
		t.Fatal("unrelated calls share a trace")
	}
	c := call([]string{"d"})
	tr.Assign(c)
	if c.TraceID != c4.TraceID {
		t.Fatal("a loop that started with unknown results is not followed")
	}
	// A trace id already set is kept, and its calls are remembered under it.
	c6 := call(nil, "e")
	c6.TraceID = "preset"
	tr.Assign(c6)
	c = call([]string{"e"})
	tr.Assign(c)
	if c6.TraceID != "preset" || c.TraceID != "preset" {
		t.Fatal("a preset trace id was not kept")
	}
}

func TestTracerBounded(t *testing.T) {
	tr := NewTracer(2)
	c1 := call(nil, "x", "y", "z") // x is evicted
	tr.Assign(c1)
	if tr.ll.Len() != 2 || len(tr.byID) != 2 {
		t.Fatalf("%d entries, %d ids, limit 2", tr.ll.Len(), len(tr.byID))
	}
	c := call([]string{"x"})
	tr.Assign(c)
	if c.TraceID == c1.TraceID {
		t.Fatal("an evicted call id still linked")
	}
	// A result that is used is kept fresh.
	tr = NewTracer(2)
	tr.Assign(call(nil, "p"))
	for i := 0; i < 10; i++ {
		tr.Assign(call([]string{"p"}, fmt.Sprint("q", i)))
	}
	if _, ok := tr.byID["p"]; !ok {
		t.Fatal("the most recently answered call id was evicted")
	}
}

func TestTracerConcurrent(t *testing.T) {
	tr := NewTracer(4096)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := call(nil, fmt.Sprintf("g%d-0", g))
			tr.Assign(prev)
			for i := 1; i < 200; i++ {
				c := call([]string{fmt.Sprintf("g%d-%d", g, i-1)}, fmt.Sprintf("g%d-%d", g, i))
				tr.Assign(c)
				if c.TraceID != prev.TraceID {
					t.Errorf("goroutine %d step %d left its loop", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
}
