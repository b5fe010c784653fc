package provider

import (
	"fmt"
	"testing"
)

// FuzzCall feeds arbitrary bodies to each API: no panic, previews within
// their caps, and the same model call however the bodies are cut.
func FuzzCall(f *testing.F) {
	for i, fx := range fixtures {
		f.Add(uint8(i), readFixture(f, fx.req), readFixture(f, fx.resp), uint16(i*31))
	}
	paths := []string{"/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1beta/models/gemini-2.5-flash:streamGenerateContent"}
	types := []string{"text/event-stream", "application/json"}
	f.Fuzz(func(t *testing.T, which uint8, req, resp []byte, cut uint16) {
		path := paths[int(which)%len(paths)]
		ct := types[int(which/4)%len(types)]
		run := func(split bool) string {
			c := Detect("h", "POST", path)
			c.SetOptions(Options{PreviewBytes: 64, MaxToolArgBytes: 256})
			for _, p := range []struct {
				w  interface{ Write([]byte) (int, error) }
				in []byte
			}{{c.RequestWriter(), req}, {c.ResponseWriter(200, ct), resp}} {
				if split {
					k := int(cut) % (len(p.in) + 1)
					p.w.Write(p.in[:k])
					p.w.Write(p.in[k:])
				} else {
					p.w.Write(p.in)
				}
			}
			mc := c.Finish(200, 0, 0, 0)
			for _, s := range []string{mc.TextContent, mc.ThinkingContent, mc.SystemPromptPreview, mc.RequestBodyPreview} {
				if len(s) > 64 {
					t.Fatalf("a preview of %d bytes", len(s))
				}
			}
			for _, tc := range mc.ToolCalls {
				if len(tc.Arguments) > 256 {
					t.Fatalf("arguments of %d bytes", len(tc.Arguments))
				}
			}
			return fmt.Sprintf("%#v", mc)
		}
		if a, b := run(false), run(true); a != b {
			t.Fatalf("cut at %d:\n%s\nwhole:\n%s", cut, b, a)
		}
	})
}
