package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/mitm/provider"
	"github.com/capsem/capsem/store"
)

// TestInspectOpenAICompatibleHost: a model call of an OpenAI-compatible
// API served from a host other than api.openai.com (a self-hosted model
// server), which the MITM's parser recognises by its path, passes
// inspect's provider check; a call whose provider its path does not say
// fails it.
func TestInspectOpenAICompatibleHost(t *testing.T) {
	call := provider.Detect("llm.internal.example:8000", "POST", "/v1/chat/completions")
	if call == nil {
		t.Fatal("provider.Detect does not recognise /v1/chat/completions on llm.internal.example")
	}
	call.RequestWriter().Write([]byte(`{"model":"qwen3-coder","messages":[{"role":"user","content":"hi"}]}`))
	call.ResponseWriter(200, "application/json").Write([]byte(`{"id":"chatcmpl-1","model":"qwen3-coder",
		"choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],
		"usage":{"prompt_tokens":5,"completion_tokens":1}}`))
	mc := call.Finish(200, time.Second, 100, 200)

	for _, tc := range []struct {
		edit func(*store.ModelCall)
		code int
		why  string
	}{
		{func(*store.ModelCall) {}, 0, "as the parser recorded it"},
		{func(m *store.ModelCall) { m.Provider = provider.Anthropic }, 1, "anthropic on an OpenAI path"},
	} {
		dir := t.TempDir()
		st, err := openTestStore(t, dir)
		if err != nil {
			t.Fatal(err)
		}
		w, err := st.Begin(store.Session{Command: []string{"opencode"}})
		if err != nil {
			t.Fatal(err)
		}
		m := mc
		tc.edit(&m)
		w.Append(store.Event{ModelCall: &m})
		if err := w.End(nil); err != nil {
			t.Fatal(err)
		}
		st.Close()
		var stdout, stderr bytes.Buffer
		code := run([]string{"capsem", "inspect", "--data", dir}, &stdout, &stderr)
		if code != tc.code {
			t.Errorf("%s (%s on %s): exit %d, want %d:\n%s%s", tc.why, m.Provider, m.Domain, code, tc.code, stdout.String(), stderr.String())
		}
		if tc.code != 0 && !strings.Contains(stdout.String(), "llm.internal.example") {
			t.Errorf("%s: the failed check does not name the host:\n%s", tc.why, stdout.String())
		}
	}
}
