package provider

import (
	"container/list"
	"crypto/rand"
	"encoding/hex"
	"sync"

	"github.com/capsem/capsem/store"
)

// DefaultTracerCallIDs is the number of tool call ids a Tracer remembers
// when NewTracer is given zero or less.
const DefaultTracerCallIDs = 4096

// Tracer assigns trace ids across tool loops: a model call whose tool
// results answer tool calls seen in an earlier call gets that call's trace
// id; any other call starts a new trace. It remembers the most recently seen
// tool call ids, at most maxCallIDs of them, and is safe for concurrent use.
//
// Gemini's calls and results are matched by function name (see Detect), so
// two of its loops that use the same function in a session may share a trace.
type Tracer struct {
	mu    sync.Mutex
	max   int
	ll    *list.List // of *traceEntry, most recent first
	byID  map[string]*list.Element
	fresh func() string
}

type traceEntry struct {
	callID, traceID string
}

// NewTracer returns a Tracer that remembers up to maxCallIDs tool call ids.
func NewTracer(maxCallIDs int) *Tracer {
	if maxCallIDs <= 0 {
		maxCallIDs = DefaultTracerCallIDs
	}
	return &Tracer{max: maxCallIDs, ll: list.New(), byID: map[string]*list.Element{}, fresh: newTraceID}
}

func newTraceID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Assign sets mc.TraceID, unless it is already set, and remembers mc's tool
// calls under it.
func (t *Tracer) Assign(mc *store.ModelCall) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if mc.TraceID == "" {
		for _, r := range mc.ToolResults {
			if el, ok := t.byID[r.CallID]; ok && r.CallID != "" {
				mc.TraceID = el.Value.(*traceEntry).traceID
				t.ll.MoveToFront(el)
				break
			}
		}
	}
	if mc.TraceID == "" {
		mc.TraceID = t.fresh()
	}
	for _, c := range mc.ToolCalls {
		if c.CallID == "" {
			continue
		}
		if el, ok := t.byID[c.CallID]; ok {
			el.Value.(*traceEntry).traceID = mc.TraceID
			t.ll.MoveToFront(el)
			continue
		}
		t.byID[c.CallID] = t.ll.PushFront(&traceEntry{callID: c.CallID, traceID: mc.TraceID})
		for t.ll.Len() > t.max {
			old := t.ll.Back()
			t.ll.Remove(old)
			delete(t.byID, old.Value.(*traceEntry).callID)
		}
	}
}
