package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capsem/capsem/store"
)

// providerFixtures are the request and response bodies of mitm/provider's
// tests, written from the providers' documented formats.
const providerFixtures = "../mitm/provider/testdata"

// modelAPI serves the provider fixtures the way the real APIs would:
// streamed (SSE) when the request asks for it, one JSON document otherwise.
func modelAPI(t *testing.T) http.Handler {
	fixture := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(providerFixtures, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	serve := func(w http.ResponseWriter, stream bool, sse, js string) {
		if stream {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range bytes.SplitAfter(fixture(sse), []byte("\n\n")) {
				w.Write(ev)
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(fixture(js))
	}
	wantsStream := func(r *http.Request) bool {
		var req struct{ Stream bool }
		b, _ := io.ReadAll(r.Body)
		json.Unmarshal(b, &req)
		return req.Stream
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/messages", func(w http.ResponseWriter, r *http.Request) {
		serve(w, wantsStream(r), "anthropic_stream.sse", "anthropic_message.json")
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		serve(w, wantsStream(r), "openai_chat_stream.sse", "openai_chat.json")
	})
	mux.HandleFunc("POST /v1/responses", func(w http.ResponseWriter, r *http.Request) {
		serve(w, wantsStream(r), "openai_responses_stream.sse", "openai_responses.json")
	})
	mux.HandleFunc("POST /v1beta/models/{call}", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		serve(w, strings.HasSuffix(r.PathValue("call"), ":streamGenerateContent"), "gemini_stream.sse", "gemini.json")
	})
	return mux
}

// TestMITMRecordsModelCallsOfEveryProvider sends each provider's request
// fixture from the guest, streamed and not, through the MITM to a fake of
// the provider's API host, and checks the model calls capsem recorded.
func TestMITMRecordsModelCallsOfEveryProvider(t *testing.T) {
	needHarness(t)
	hosts := []string{"api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"}
	upCA := newTestCA(t, "tests model API CA")
	port := startHTTPS(t, upCA, modelAPI(t), hosts...)
	var resolve []string
	for _, h := range hosts {
		resolve = append(resolve, fmt.Sprintf("%q = \"127.0.0.1:%d\"", h, port))
	}
	e := startEnv(t, fmt.Sprintf(`
[network]
default = "deny"
allow = ["api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"]
[upstream]
resolve = { %s }
ca_files = [%q]
`, strings.Join(resolve, ", "), upCA.pemPath), envOptions{})

	fixtures, _ := filepath.Abs(providerFixtures)
	prog := `
import json, sys, urllib.request
fixtures = sys.argv[1]
calls = [
  ("anthropic", "https://api.anthropic.com/v1/messages", "anthropic_request.json"),
  ("openai-chat", "https://api.openai.com/v1/chat/completions", "openai_chat_request.json"),
  ("openai-responses", "https://api.openai.com/v1/responses", "openai_responses_request.json"),
  ("google", "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:%s", "gemini_request.json"),
]
for name, url, req in calls:
    body = json.load(open(fixtures + "/" + req))
    for stream in (True, False):
        u = url
        if name == "google":
            u = url % ("streamGenerateContent?alt=sse" if stream else "generateContent")
        else:
            body["stream"] = stream
        r = urllib.request.Request(u, data=json.dumps(body).encode(), method="POST",
                                   headers={"content-type": "application/json", "x-api-key": "sk-test-key"})
        with urllib.request.urlopen(r, timeout=20) as resp:
            data = resp.read()
        print(name, "stream" if stream else "json", resp.status, len(data))
`
	out, err := e.runEnv(60*time.Second, e.trustEnv(), "python3", "-c", prog, fixtures)
	if err != nil || strings.Count(out, " 200 ") != 8 {
		t.Fatalf("guest requests: %v\n%s", err, out)
	}
	evs := e.stop()

	type key struct {
		provider, path string
		stream         bool
	}
	got := map[key]*store.ModelCall{}
	for _, ev := range evs {
		if mc := ev.ModelCall; mc != nil {
			path := mc.Path
			if mc.Provider == "google" {
				path = "gemini"
			}
			got[key{mc.Provider, path, mc.Stream}] = mc
		}
	}
	for _, want := range []struct {
		provider, path, toolMarker, response string
	}{
		{"anthropic", "/v1/messages", "tool_use", "anthropic_stream.sse"},
		{"anthropic", "/v1/messages", "tool_use", "anthropic_message.json"},
		{"openai", "/v1/chat/completions", "tool_calls", "openai_chat_stream.sse"},
		{"openai", "/v1/chat/completions", "tool_calls", "openai_chat.json"},
		{"openai", "/v1/responses", `"function_call"`, "openai_responses_stream.sse"},
		{"openai", "/v1/responses", `"function_call"`, "openai_responses.json"},
		{"google", "gemini", "functionCall", "gemini_stream.sse"},
		{"google", "gemini", "functionCall", "gemini.json"},
	} {
		stream := strings.HasSuffix(want.response, ".sse")
		mc := got[key{want.provider, want.path, stream}]
		if mc == nil {
			t.Errorf("%s %s stream=%v: no model call recorded", want.provider, want.path, stream)
			continue
		}
		resp, _ := os.ReadFile(filepath.Join(providerFixtures, want.response))
		switch {
		case mc.Model == "" || mc.StatusCode != 200:
			t.Errorf("%s: model %q status %d", want.response, mc.Model, mc.StatusCode)
		case mc.InputTokens <= 0 || mc.OutputTokens <= 0:
			t.Errorf("%s: tokens in %d out %d", want.response, mc.InputTokens, mc.OutputTokens)
		case mc.CostUSD <= 0:
			t.Errorf("%s: no cost estimate for model %q", want.response, mc.Model)
		case len(mc.ToolResults) == 0:
			t.Errorf("%s: the request's tool results were not recorded", want.response)
		case bytes.Contains(resp, []byte(want.toolMarker)) && len(mc.ToolCalls) == 0:
			t.Errorf("%s: the response's tool calls were not recorded", want.response)
		case mc.TraceID == "":
			t.Errorf("%s: no trace id", want.response)
		}
		for _, tc := range mc.ToolCalls {
			if tc.Name == "" || !json.Valid([]byte(tc.Arguments)) {
				t.Errorf("%s: tool call %+v: no name or arguments not JSON", want.response, tc)
			}
		}
	}
	// The requests themselves are net events too, with the key hashed.
	for _, ev := range evs {
		if n := ev.Net; n != nil && n.Method == "POST" {
			for _, h := range n.RequestHeaders {
				if strings.Contains(h.Value, "sk-test-key") {
					t.Errorf("API key stored in clear in %s %s", n.Domain, n.Path)
				}
			}
		}
	}
}
