package mcpgate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// A call whose POST the guest abandons is cancelled on the backend: the SDK
// runs handlers on the session's context, which the POST's end does not
// cancel.
func TestAbandonedCallCancelled(t *testing.T) {
	h := newHarness(t, decider{}, Config{}, stdioServer("test", nil))
	cs := h.connect(t, "test", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	// A raw POST, so that no notifications/cancelled follows: the guest
	// just goes away, as when its connection drops.
	h.post(t, ctx, "test", cs.ID(), `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"slow","arguments":{"ms":20000}}}`)
	var ev []*store.MCPCall
	if !eventually(5*time.Second, func() bool { ev = h.rec.calls("tools/call"); return len(ev) > 0 }) {
		t.Fatal("the abandoned slow call was not ended within 5 s (it sleeps 20 s)")
	}
	if d := time.Since(start); d > 5*time.Second || ev[0].ErrorMessage == "" {
		t.Errorf("slow call event %+v after %v, want it cancelled with an error", ev[0], d)
	}
}

// Without a policy every tools/call is refused, so none is listed: the
// list fails closed as the call does.
func TestNoDeciderListsNoTools(t *testing.T) {
	h := newHarness(t, nil, Config{}, stdioServer("test", nil))
	cs := h.connect(t, "test", nil)
	if got := toolNames(t, cs); len(got) != 0 {
		t.Errorf("tools without a policy = %v, want none", got)
	}
}

type previewDecider struct {
	decider
	n int
}

func (p previewDecider) PreviewBytes() int { return p.n }

func TestPreviewFromDecider(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    Decider
		want int
		why  string
	}{
		{"policy's", previewDecider{n: 30}, 30, "the policy in force decides the preview size, so a reload changes it"},
		{"config's", decider{}, 60, "a Decider without a preview size leaves Config.PreviewBytes"},
		{"zero", previewDecider{n: 0}, 60, "a Decider's zero is no size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.d, Config{PreviewBytes: 60}, stdioServer("test", nil))
			cs := h.connect(t, "test", nil)
			if _, err := callText(t, cs, "echo", map[string]any{"text": strings.Repeat("a", 200)}); err != nil {
				t.Fatal(err)
			}
			c := h.rec.calls("tools/call")[0]
			if len(c.RequestPreview) != tc.want || len(c.ResponsePreview) != tc.want {
				t.Errorf("previews of %d and %d bytes, want %d: %s", len(c.RequestPreview), len(c.ResponsePreview), tc.want, tc.why)
			}
		})
	}
}

// The refusal of a tool with a long name embeds the name: its record is
// capped like the MITM's.
func TestLongToolNameCapped(t *testing.T) {
	long := strings.Repeat("t", 5000)
	h := newHarness(t, decider{deny: map[string]bool{long: true}}, Config{PreviewBytes: 200}, stdioServer("test", nil))
	cs := h.connect(t, "test", nil)
	if _, err := callText(t, cs, long, nil); err == nil {
		t.Fatal("the denied call succeeded")
	}
	c := h.rec.calls("tools/call")[0]
	if len(c.ToolName) != store.MCPMaxToolBytes || len(c.ErrorMessage) > 200 || c.ErrorMessage == "" || c.Decision != store.Denied {
		t.Errorf("tool_name %d bytes, error_message %d bytes, decision %v: want %d, at most 200, denied", len(c.ToolName), len(c.ErrorMessage), c.Decision, store.MCPMaxToolBytes)
	}
}
