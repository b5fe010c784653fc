package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/capsem/capsem/mitm/internal/pricing"
	"github.com/capsem/capsem/store"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	if name == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// feed writes b to w in pieces of n bytes (all at once when n <= 0).
func feed(w io.Writer, b []byte, n int) {
	if n <= 0 {
		n = len(b) + 1
	}
	for len(b) > 0 {
		k := min(n, len(b))
		if m, err := w.Write(b[:k]); m != k || err != nil {
			panic(fmt.Sprintf("Write = %d, %v", m, err))
		}
		b = b[k:]
	}
}

type fixture struct {
	name        string
	host, path  string
	req, resp   string // testdata files
	status      int
	contentType string
	priceModel  string // the model the cost is computed for
	want        store.ModelCall
}

var fixtures = []fixture{
	{
		name: "anthropic stream", host: "api.anthropic.com", path: "/v1/messages",
		req: "anthropic_request.json", resp: "anthropic_stream.sse", status: 200,
		contentType: "text/event-stream; charset=utf-8", priceModel: "claude-sonnet-4-5-20250929",
		want: store.ModelCall{
			Provider: "anthropic", Domain: "api.anthropic.com", Model: "claude-sonnet-4-5-20250929",
			Stream: true, SystemPromptPreview: "You are a helpful assistant.\nAnswer briefly.",
			MessagesCount: 5, ToolsCount: 2, MessageID: "msg_01AbCdEf",
			TextContent:     "I'll check the weather \u2014 één moment.",
			ThinkingContent: "The user wants the weather in Paris.",
			StopReason:      "tool_use", InputTokens: 472, OutputTokens: 89, CacheReadTokens: 5000, CacheWriteTokens: 1200,
			UsageDetails: `{"cache_creation_input_tokens":1200,"cache_read_input_tokens":5000,"input_tokens":472,"output_tokens":89,"service_tier":"standard"}`,
			ToolCalls: []store.ToolCall{
				{Index: 0, CallID: "toolu_01T1x", Name: "get_weather", Arguments: `{"location": "Paris, FR", "unit": "celsius"}`, Origin: "native"},
				{Index: 1, CallID: "toolu_02Zz", Name: "mcp__fs__list", Arguments: `{}`, Origin: "mcp"},
			},
			ToolResults: []store.ToolResult{
				{CallID: "toolu_01T1x", ContentPreview: "18\u00b0C, sunny \"and\" clear"},
				{CallID: "toolu_02Zz", ContentPreview: "permission denied\n(see log)", IsError: true},
			},
		},
	},
	{
		name: "anthropic json", host: "upstream.test:8443", path: "/v1/messages",
		resp: "anthropic_message.json", status: 200, contentType: "application/json",
		priceModel: "claude-opus-4-1-20250805",
		want: store.ModelCall{
			Provider: "anthropic", Domain: "upstream.test", Model: "claude-opus-4-1-20250805",
			MessageID: "msg_013Zva2CMHLNnXjNJJKqJ2EF", TextContent: "Hi! I'll look that up.",
			ThinkingContent: "Two lookups are needed.", StopReason: "tool_use", InputTokens: 2095, OutputTokens: 503,
			UsageDetails: `{"input_tokens":2095,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":503,"service_tier":"standard"}`,
			ToolCalls: []store.ToolCall{
				{Index: 0, CallID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather", Arguments: `{"location":"San Francisco, CA","unit":"fahrenheit","days":[1,2]}`, Origin: "native"},
				{Index: 1, CallID: "toolu_01B", Name: "get_time", Arguments: `{}`, Origin: "native"},
			},
		},
	},
	{
		name: "anthropic error", host: "api.anthropic.com", path: "/v1/messages",
		resp: "anthropic_error.json", status: 529, contentType: "application/json",
		want: store.ModelCall{Provider: "anthropic", Domain: "api.anthropic.com", StopReason: "error:overloaded_error"},
	},
	{
		name: "anthropic error event", host: "api.anthropic.com", path: "/v1/messages",
		resp: "anthropic_error_stream.sse", status: 200, contentType: "text/event-stream",
		priceModel: "claude-haiku-4-5-20251001",
		want: store.ModelCall{
			Provider: "anthropic", Domain: "api.anthropic.com", Model: "claude-haiku-4-5-20251001", Stream: true,
			MessageID: "msg_err1", TextContent: "Partial", StopReason: "error:overloaded_error",
			InputTokens: 25, OutputTokens: 1, UsageDetails: `{"input_tokens":25,"output_tokens":1}`,
		},
	},
	{
		name: "openai chat stream", host: "api.openai.com", path: "/v1/chat/completions",
		req: "openai_chat_request.json", resp: "openai_chat_stream.sse", status: 200,
		contentType: "text/event-stream", priceModel: "gpt-4o-2024-08-06",
		want: store.ModelCall{
			Provider: "openai", Domain: "api.openai.com", Model: "gpt-4o", Stream: true,
			SystemPromptPreview: "You are terse.", MessagesCount: 7, ToolsCount: 2,
			MessageID: "chatcmpl-9xAbC", TextContent: "Checking both cities.", StopReason: "tool_calls",
			InputTokens: 176, OutputTokens: 45, CacheReadTokens: 1024,
			UsageDetails: `{"prompt_tokens":1200,"completion_tokens":45,"total_tokens":1245,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
			ToolCalls: []store.ToolCall{
				{Index: 0, CallID: "call_abc", Name: "get_weather", Arguments: `{"location": "Paris"}`, Origin: "native"},
				{Index: 1, CallID: "call_def", Name: "get_time", Arguments: `{"tz":"CET"}`, Origin: "native"},
			},
			ToolResults: []store.ToolResult{
				{CallID: "call_abc", ContentPreview: `{"temp":18}`},
				{CallID: "call_def", ContentPreview: "14:02"},
			},
		},
	},
	{
		name: "openai chat json", host: "api.openai.com", path: "/v1/chat/completions?x=1",
		resp: "openai_chat.json", status: 200, contentType: "application/json", priceModel: "gpt-4o-mini-2024-07-18",
		want: store.ModelCall{
			Provider: "openai", Domain: "api.openai.com", Model: "gpt-4o-mini-2024-07-18",
			MessageID: "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG", StopReason: "tool_calls", InputTokens: 82, OutputTokens: 17,
			UsageDetails: `{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`,
			ToolCalls: []store.ToolCall{
				{Index: 0, CallID: "call_1", Name: "get_weather", Arguments: `{"location":"Paris","unit":"c"}`, Origin: "native"},
				{Index: 1, CallID: "call_2", Name: "mcp__clock__now", Arguments: `{}`, Origin: "mcp"},
			},
		},
	},
	{
		name: "openai chat json text, two choices", host: "api.openai.com", path: "/v1/chat/completions",
		resp: "openai_chat_text.json", status: 200, contentType: "application/json", priceModel: "gpt-4.1-2025-04-14",
		want: store.ModelCall{
			Provider: "openai", Domain: "api.openai.com", Model: "gpt-4.1-2025-04-14", MessageID: "chatcmpl-n2",
			TextContent: "Bonjour! \U0001F44B Comment puis-je aider?", StopReason: "stop", InputTokens: 12, OutputTokens: 20,
			UsageDetails: `{"prompt_tokens":12,"completion_tokens":20,"total_tokens":32}`,
		},
	},
	{
		name: "openai error", host: "api.openai.com", path: "/v1/chat/completions",
		resp: "openai_error.json", status: 401, contentType: "application/json",
		want: store.ModelCall{Provider: "openai", Domain: "api.openai.com", StopReason: "error:invalid_request_error"},
	},
	{
		name: "openai responses stream", host: "api.openai.com", path: "/v1/responses",
		req: "openai_responses_request.json", resp: "openai_responses_stream.sse", status: 200,
		contentType: "text/event-stream", priceModel: "gpt-5-2025-08-07",
		want: store.ModelCall{
			Provider: "openai", Domain: "api.openai.com", Model: "gpt-5", Stream: true,
			SystemPromptPreview: "You are a coding agent.\nSandbox: workspace-write.", MessagesCount: 9, ToolsCount: 3,
			MessageID: "resp_67ccd2bed1ec8190", TextContent: "Looking it up.", ThinkingContent: "**Planning** the lookup",
			StopReason: "completed", InputTokens: 512, OutputTokens: 300, CacheReadTokens: 1536,
			UsageDetails: `{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1536},"output_tokens":300,"output_tokens_details":{"reasoning_tokens":256},"total_tokens":2348}`,
			ToolCalls: []store.ToolCall{
				{Index: 0, CallID: "call_XYZ", Name: "get_weather", Arguments: `{"location":"Paris"}`, Origin: "native"},
			},
			ToolResults: []store.ToolResult{{CallID: "call_3", ContentPreview: "ok\nPASS"}},
		},
	},
	{
		name: "openai responses json", host: "api.openai.com", path: "/v1/responses",
		resp: "openai_responses.json", status: 200, contentType: "application/json", priceModel: "o4-mini-2025-04-16",
		want: store.ModelCall{
			Provider: "openai", Domain: "api.openai.com", Model: "o4-mini-2025-04-16", MessageID: "resp_68af",
			TextContent: "Listing files\nnow.", ThinkingContent: "Need the file list.", StopReason: "max_output_tokens",
			InputTokens: 100, OutputTokens: 50,
			UsageDetails: `{"input_tokens":100,"input_tokens_details":{"cached_tokens":0},"output_tokens":50,"output_tokens_details":{"reasoning_tokens":32},"total_tokens":150}`,
			ToolCalls: []store.ToolCall{
				{Index: 0, CallID: "call_LS", Name: "shell", Arguments: `{"cmd":["ls","-la"]}`, Origin: "native"},
				{Index: 1, CallID: "mcp_9", Name: "ask_question", Arguments: `{"q":"x"}`, Origin: "mcp"},
			},
		},
	},
	{
		name: "gemini sse", host: "generativelanguage.googleapis.com", path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
		req: "gemini_request.json", resp: "gemini_stream.sse", status: 200, contentType: "text/event-stream",
		priceModel: "gemini-2.5-flash", want: geminiStreamWant,
	},
	{
		name: "gemini json array stream", host: "generativelanguage.googleapis.com", path: "/v1beta/models/gemini-2.5-flash:streamGenerateContent",
		req: "gemini_request.json", resp: "gemini_stream_array.json", status: 200, contentType: "application/json; charset=UTF-8",
		priceModel: "gemini-2.5-flash", want: geminiStreamWant,
	},
	{
		name: "gemini json", host: "generativelanguage.googleapis.com", path: "/v1/models/gemini-2.5-pro:generateContent",
		resp: "gemini.json", status: 200, contentType: "application/json", priceModel: "gemini-2.5-pro",
		want: store.ModelCall{
			Provider: "google", Domain: "generativelanguage.googleapis.com", Model: "gemini-2.5-pro", MessageID: "xyz789",
			TextContent: "I'll get both.", StopReason: "STOP", InputTokens: 300, OutputTokens: 40,
			UsageDetails: `{"promptTokenCount":300,"candidatesTokenCount":40,"totalTokenCount":340}`,
			ToolCalls: []store.ToolCall{
				{Index: 0, CallID: "get_weather", Name: "get_weather", Arguments: `{"location":"Paris"}`, Origin: "native"},
				{Index: 1, CallID: "get_time", Name: "get_time", Arguments: `{}`, Origin: "native"},
			},
		},
	},
	{
		name: "gemini error", host: "generativelanguage.googleapis.com", path: "/v1beta/models/gemini-2.5-pro:generateContent",
		resp: "gemini_error.json", status: 429, contentType: "application/json",
		want: store.ModelCall{Provider: "google", Domain: "generativelanguage.googleapis.com", Model: "gemini-2.5-pro", StopReason: "error:RESOURCE_EXHAUSTED"},
	},
}

var geminiStreamWant = store.ModelCall{
	Provider: "google", Domain: "generativelanguage.googleapis.com", Model: "gemini-2.5-flash", Stream: true,
	SystemPromptPreview: "You are a weather bot.", MessagesCount: 5, ToolsCount: 3, MessageID: "mEbcaPjNA6bc",
	TextContent: "Let me look that up.", ThinkingContent: "The user asks about weather.", StopReason: "STOP",
	InputTokens: 20, OutputTokens: 65, CacheReadTokens: 100,
	UsageDetails: `{"promptTokenCount":120,"candidatesTokenCount":25,"totalTokenCount":185,"cachedContentTokenCount":100,"promptTokensDetails":[{"modality":"TEXT","tokenCount":120}],"thoughtsTokenCount":40}`,
	ToolCalls: []store.ToolCall{
		{Index: 0, CallID: "get_weather", Name: "get_weather", Arguments: `{"location":"Paris","days":2}`, Origin: "native"},
	},
	ToolResults: []store.ToolResult{
		{CallID: "get_weather", ContentPreview: `{"output":{"temp":18,"sky":"clear"}}`},
		{CallID: "get_time", ContentPreview: `{"error":"timezone unknown"}`, IsError: true},
	},
}

// expected completes a fixture's want with what follows from its inputs.
func (f *fixture) expected(t testing.TB, req, resp []byte) store.ModelCall {
	w := f.want
	w.Method = "POST"
	w.Path, _, _ = strings.Cut(f.path, "?")
	w.StatusCode = f.status
	w.Duration = time.Second
	w.RequestBytes, w.ResponseBytes = int64(len(req)), int64(len(resp))
	w.RequestBodyPreview = string(req[:min(len(req), DefaultPreviewBytes)])
	if f.priceModel != "" {
		usd, ok := pricing.Cost(w.Provider, f.priceModel, w.InputTokens, w.OutputTokens, w.CacheReadTokens, w.CacheWriteTokens)
		if !ok || usd <= 0 {
			t.Fatalf("%s: no price for %s", f.name, f.priceModel)
		}
		w.CostUSD = usd
	}
	return w
}

func (f *fixture) run(t testing.TB, req, resp []byte, split func(w io.Writer, b []byte)) store.ModelCall {
	c := Detect(f.host, "POST", f.path)
	if c == nil {
		t.Fatalf("%s: Detect(%q, POST, %q) = nil", f.name, f.host, f.path)
	}
	if req != nil {
		split(c.RequestWriter(), req)
	}
	if resp != nil {
		split(c.ResponseWriter(f.status, f.contentType), resp)
	}
	return c.Finish(f.status, time.Second, int64(len(req)), int64(len(resp)))
}

func diff(got, want store.ModelCall) string {
	var out []string
	gv, wv := reflect.ValueOf(got), reflect.ValueOf(want)
	for i := 0; i < gv.NumField(); i++ {
		g, w := gv.Field(i).Interface(), wv.Field(i).Interface()
		if !reflect.DeepEqual(g, w) {
			out = append(out, fmt.Sprintf("%s:\n   got %#v\n  want %#v", gv.Type().Field(i).Name, g, w))
		}
	}
	return strings.Join(out, "\n")
}

func TestFixtures(t *testing.T) {
	for i := range fixtures {
		f := &fixtures[i]
		t.Run(f.name, func(t *testing.T) {
			req, resp := readFixture(t, f.req), readFixture(t, f.resp)
			want := f.expected(t, req, resp)
			for _, n := range []int{0, 1, 7, 100, 4096} {
				got := f.run(t, req, resp, func(w io.Writer, b []byte) { feed(w, b, n) })
				if d := diff(got, want); d != "" {
					t.Fatalf("in pieces of %d bytes:\n%s", n, d)
				}
			}
		})
	}
}

// TestSplitEverywhere cuts every fixture's bodies into two writes at every
// byte boundary, and into three at a sample of boundaries.
func TestSplitEverywhere(t *testing.T) {
	for i := range fixtures {
		f := &fixtures[i]
		t.Run(f.name, func(t *testing.T) {
			req, resp := readFixture(t, f.req), readFixture(t, f.resp)
			want := f.expected(t, req, resp)
			for _, body := range []string{"request", "response"} {
				b := resp
				if body == "request" {
					b = req
				}
				for k := 0; k <= len(b); k++ {
					got := f.run(t, req, resp, func(w io.Writer, x []byte) {
						if (body == "request") == bytes.Equal(x, req) && len(x) == len(b) {
							w.Write(x[:k])
							w.Write(x[k:])
						} else {
							w.Write(x)
						}
					})
					if d := diff(got, want); d != "" {
						t.Fatalf("%s split at %d:\n%s", body, k, d)
					}
				}
			}
			for k := 1; k < len(resp); k += 13 {
				for j := k; j < len(resp); j += 101 {
					got := f.run(t, req, resp, func(w io.Writer, x []byte) {
						if len(x) == len(resp) && bytes.Equal(x, resp) {
							w.Write(x[:k])
							w.Write(x[k:j])
							w.Write(x[j:])
						} else {
							w.Write(x)
						}
					})
					if d := diff(got, want); d != "" {
						t.Fatalf("response split at %d and %d:\n%s", k, j, d)
					}
				}
			}
		})
	}
}

func TestCRLFStream(t *testing.T) {
	f := fixtures[0]
	req, resp := readFixture(t, f.req), readFixture(t, f.resp)
	want := f.expected(t, req, nil)
	crlf := bytes.ReplaceAll(resp, []byte("\n"), []byte("\r\n"))
	want.ResponseBytes = int64(len(crlf))
	got := f.run(t, req, crlf, func(w io.Writer, b []byte) { feed(w, b, 3) })
	if d := diff(got, want); d != "" {
		t.Fatal(d)
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		host, method, path string
		provider, model    string
		stream             bool
	}{
		{"api.anthropic.com", "POST", "/v1/messages", "anthropic", "", false},
		{"api.openai.com", "post", "/v1/chat/completions", "openai", "", false},
		{"api.openai.com", "POST", "/v1/responses", "openai", "", false},
		{"fake.test", "POST", "/v1/messages?beta=true", "anthropic", "", false},
		{"generativelanguage.googleapis.com", "POST", "/v1beta/models/gemini-2.5-flash:generateContent", "google", "gemini-2.5-flash", false},
		{"generativelanguage.googleapis.com", "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent", "google", "gemini-2.5-flash", true},
		{"x", "POST", "/v1/models/gemini-2.0-flash%3AstreamGenerateContent", "google", "gemini-2.0-flash", true},
		{"x", "POST", "/v1alpha/models/gemini-3-pro-preview:generateContent", "google", "gemini-3-pro-preview", false},
	}
	for _, tt := range tests {
		c := Detect(tt.host, tt.method, tt.path)
		if c == nil {
			t.Errorf("Detect(%q, %q, %q) = nil", tt.host, tt.method, tt.path)
			continue
		}
		if c.Provider() != tt.provider || c.pathModel != tt.model || c.pathStream != tt.stream {
			t.Errorf("Detect(%q): %s %q %v", tt.path, c.Provider(), c.pathModel, c.pathStream)
		}
	}
	for _, p := range []struct{ method, path string }{
		{"GET", "/v1/messages"},
		{"POST", "/v1/messages/count_tokens"},
		{"POST", "/v1/messages/batches"},
		{"POST", "/v1/completions"},
		{"POST", "/v1/embeddings"},
		{"POST", "/v2/messages"},
		{"POST", "/v1beta/models/gemini-2.5-flash:countTokens"},
		{"POST", "/v1beta/models/gemini-2.5-flash:embedContent"},
		{"POST", "/v1beta/models/:generateContent"},
		{"POST", "/v1beta/models/a/b:generateContent"},
		{"POST", "/v1beta/models/gemini-2.5-flash"},
		{"GET", "/v1beta/models"},
		{"POST", "/"},
		{"POST", ""},
	} {
		if c := Detect("api.anthropic.com", p.method, p.path); c != nil {
			t.Errorf("Detect(%s %s) = %s, want nil", p.method, p.path, c.Provider())
		}
	}
}

// TestTruncated cuts every response (and request) short at many points:
// Finish must return what was read before the cut, without panicking or
// blocking.
func TestTruncated(t *testing.T) {
	for i := range fixtures {
		f := &fixtures[i]
		req, resp := readFixture(t, f.req), readFixture(t, f.resp)
		for cut := 0; cut < len(resp); cut += 37 {
			done := make(chan store.ModelCall, 1)
			go func() {
				done <- f.run(t, req[:min(len(req), cut)], resp[:cut], func(w io.Writer, b []byte) { w.Write(b) })
			}()
			select {
			case mc := <-done:
				if mc.Provider != f.want.Provider || len(mc.ToolCalls) > len(f.want.ToolCalls) {
					t.Fatalf("%s cut at %d: %+v", f.name, cut, mc)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s cut at %d: Finish blocked", f.name, cut)
			}
		}
	}

	// A stream cut inside a tool call's arguments keeps the call and the
	// arguments streamed so far, and the text before it.
	f := fixtures[0]
	resp := readFixture(t, f.resp)
	cut := bytes.Index(resp, []byte(`elsius`))
	mc := f.run(t, nil, resp[:cut], func(w io.Writer, b []byte) { w.Write(b) })
	if mc.TextContent != f.want.TextContent || len(mc.ToolCalls) != 1 ||
		mc.ToolCalls[0].Arguments != `{"location": "Paris, FR", "unit": "c` || mc.StopReason != "" || mc.InputTokens != 472 {
		t.Fatalf("cut inside a tool call: %+v", mc)
	}

	// A JSON body cut inside a tool_result keeps the results before it.
	f = fixtures[0]
	req := readFixture(t, f.req)
	cut = bytes.Index(req, []byte(`permission denied`))
	mc = f.run(t, req[:cut], nil, func(w io.Writer, b []byte) { w.Write(b) })
	if len(mc.ToolResults) != 2 || mc.ToolResults[0].CallID != "toolu_01T1x" || mc.ToolResults[1].CallID != "toolu_02Zz" {
		t.Fatalf("request cut inside a tool result: %+v", mc.ToolResults)
	}
}

func TestGarbage(t *testing.T) {
	inputs := [][]byte{
		[]byte("not json at all"),
		[]byte("{\"model\": \"x\", \"messages\": [{]}"),
		[]byte("data: {garbage}\n\ndata: [DONE]\n\n"),
		bytes.Repeat([]byte("[{"), 10000),
		bytes.Repeat([]byte{0xff, 0x00, '"', '\\'}, 1000),
		[]byte(`{"messages":[{"role":"user","content":[{"type":"tool_result","content":"\ud800\u0041\udc00"}]}]}`),
	}
	for _, path := range []string{"/v1/messages", "/v1/chat/completions", "/v1/responses", "/v1beta/models/g:streamGenerateContent"} {
		for _, ct := range []string{"application/json", "text/event-stream"} {
			for _, in := range inputs {
				c := Detect("h", "POST", path)
				feed(c.RequestWriter(), in, 5)
				feed(c.ResponseWriter(200, ct), in, 5)
				mc := c.Finish(200, 0, 0, 0)
				for _, s := range []string{mc.TextContent, mc.SystemPromptPreview, mc.RequestBodyPreview} {
					if len(s) > DefaultPreviewBytes {
						t.Fatalf("preview of %d bytes", len(s))
					}
				}
			}
		}
	}
}

func TestPreviewCaps(t *testing.T) {
	long := strings.Repeat("é", 10000) // 2 bytes each
	req := fmt.Sprintf(`{"model":"claude-sonnet-4-5","system":%q,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":%q}]}]}`, long, long)
	resp := fmt.Sprintf(`{"id":"m","content":[{"type":"text","text":%q},{"type":"tool_use","id":"t2","name":"n","input":{"s":%q}}],"usage":{"input_tokens":1,"output_tokens":1}}`, long, long)
	c := Detect("h", "POST", "/v1/messages")
	c.SetOptions(Options{PreviewBytes: 101, MaxToolArgBytes: 1001})
	feed(c.RequestWriter(), []byte(req), 0)
	feed(c.ResponseWriter(200, "application/json"), []byte(resp), 0)
	mc := c.Finish(200, 0, 0, 0)
	for name, s := range map[string]string{
		"system": mc.SystemPromptPreview, "text": mc.TextContent, "request body": mc.RequestBodyPreview,
		"tool result": mc.ToolResults[0].ContentPreview,
	} {
		if len(s) > 101 || len(s) < 99 || !utf8.ValidString(s) {
			t.Errorf("%s preview: %d bytes, valid UTF-8 %v", name, len(s), utf8.ValidString(s))
		}
	}
	if a := mc.ToolCalls[0].Arguments; len(a) != 1001 {
		t.Errorf("tool arguments: %d bytes, want the cap 1001", len(a))
	}
}

// TestMemoryBounded feeds a 64 MiB request and a 64 MiB streamed response and
// checks that the parser allocated a small fraction of that.
func TestMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("slow in -short mode")
	}
	const size = 64 << 20
	chunk := bytes.Repeat([]byte("abcdefgh"), 4096) // 32 KiB
	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)

	c := Detect("h", "POST", "/v1/messages")
	rw := c.RequestWriter()
	rw.Write([]byte(`{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"`))
	for n := 0; n < size; n += len(chunk) {
		rw.Write(chunk)
	}
	rw.Write([]byte(`"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"`))
	for n := 0; n < size; n += len(chunk) {
		rw.Write(chunk)
	}
	rw.Write([]byte(`"}]}]}`))

	sw := c.ResponseWriter(200, "text/event-stream")
	ev := []byte(`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"` + strings.Repeat("x", 4000) + `"}}` + "\n\n")
	sw.Write([]byte(`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n"))
	for n := 0; n < size; n += len(ev) {
		sw.Write(ev)
	}
	mc := c.Finish(200, 0, 0, 0)
	runtime.ReadMemStats(&ms1)
	if len(mc.ToolResults) != 1 || mc.MessagesCount != 2 || len(mc.TextContent) != DefaultPreviewBytes {
		t.Fatalf("parse of the large bodies: %d results, %d messages, %d bytes of text", len(mc.ToolResults), mc.MessagesCount, len(mc.TextContent))
	}
	// The SSE events are allocated as strings one by one (~4 KiB each), so
	// total allocation grows with the stream; what must stay small is what
	// is live at the end.
	if live := int64(ms1.HeapAlloc) - int64(ms0.HeapAlloc); live > 16<<20 {
		t.Fatalf("%d MiB live after parsing %d MiB", live>>20, 3*size>>20)
	}
	t.Logf("allocated %d MiB in all for %d MiB of bodies", (ms1.TotalAlloc-ms0.TotalAlloc)>>20, 3*size>>20)
}

func TestRequestDoesNotAllocatePerByte(t *testing.T) {
	chunk := bytes.Repeat([]byte("abcdefgh"), 4096)
	c := Detect("h", "POST", "/v1/messages")
	rw := c.RequestWriter()
	rw.Write([]byte(`{"messages":[{"role":"user","content":"`))
	allocs := testing.AllocsPerRun(100, func() { rw.Write(chunk) })
	if allocs > 1 {
		t.Fatalf("%v allocations per 32 KiB of a string", allocs)
	}
}

func TestConcurrentWritersAndFinish(t *testing.T) {
	f := fixtures[0]
	req, resp := readFixture(t, f.req), readFixture(t, f.resp)
	want := f.expected(t, req, resp)
	for i := 0; i < 20; i++ {
		c := Detect(f.host, "POST", f.path)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); feed(c.RequestWriter(), req, 11) }()
		go func() { defer wg.Done(); feed(c.ResponseWriter(200, f.contentType), resp, 13) }()
		wg.Wait()
		got := c.Finish(200, time.Second, int64(len(req)), int64(len(resp)))
		if d := diff(got, want); d != "" {
			t.Fatal(d)
		}
		// Writes after Finish are ignored; Finish again gives the same.
		c.ResponseWriter(200, f.contentType).Write([]byte("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"x\"}}\n\n"))
		if again := c.Finish(0, 0, 0, 0); !reflect.DeepEqual(again, got) {
			t.Fatal("a second Finish changed the result")
		}
	}
	// Finish racing with writers neither panics nor deadlocks.
	for i := 0; i < 20; i++ {
		c := Detect(f.host, "POST", f.path)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); feed(c.RequestWriter(), req, 5) }()
		go func() { defer wg.Done(); feed(c.ResponseWriter(200, f.contentType), resp, 5) }()
		c.Finish(200, 0, 0, 0)
		wg.Wait()
	}
}

func TestNoBodies(t *testing.T) {
	c := Detect("generativelanguage.googleapis.com:443", "POST", "/v1beta/models/gemini-2.5-flash:streamGenerateContent")
	mc := c.Finish(502, time.Millisecond, 0, 0)
	if mc.Model != "gemini-2.5-flash" || !mc.Stream || mc.Domain != "generativelanguage.googleapis.com" || mc.StatusCode != 502 {
		t.Fatalf("%+v", mc)
	}
}

func TestUsageDetailsIsJSON(t *testing.T) {
	for i := range fixtures {
		f := &fixtures[i]
		mc := f.run(t, readFixture(t, f.req), readFixture(t, f.resp), func(w io.Writer, b []byte) { w.Write(b) })
		if mc.UsageDetails != "" && !json.Valid([]byte(mc.UsageDetails)) {
			t.Errorf("%s: usage details %q", f.name, mc.UsageDetails)
		}
		for _, tc := range mc.ToolCalls {
			if !json.Valid([]byte(tc.Arguments)) {
				t.Errorf("%s: tool call arguments %q", f.name, tc.Arguments)
			}
		}
	}
}

// typicalAnthropicStream is a streamed answer of about 64 KiB: a thinking
// block, 400 text deltas and a tool call.
func typicalAnthropicStream() []byte {
	var b bytes.Buffer
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":2400,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":18000,\"output_tokens\":1}}}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n")
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"step %d of the plan, considering the files \"}}\n\n", i)
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := 0; i < 400; i++ {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"Here is part %d of the answer, with \\\"quotes\\\" and \\u00e9. \"}}\n\n", i)
		if i%50 == 0 {
			b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
		}
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_bench\",\"name\":\"Edit\",\"input\":{}}}\n\n")
	for i := 0; i < 30; i++ {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":2,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"%s\"}}\n\n", []string{`{\"file_path\": \"/work/main.go\", \"old_string\": \"`, `line of code `, `\", \"new_string\": \"x\"}`}[min(i, 1)+(i/29)])
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":1800}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return b.Bytes()
}

func TestTypicalStream(t *testing.T) {
	in := typicalAnthropicStream()
	c := Detect("api.anthropic.com", "POST", "/v1/messages")
	feed(c.ResponseWriter(200, "text/event-stream"), in, 1400)
	mc := c.Finish(200, 0, 0, int64(len(in)))
	if len(mc.ToolCalls) != 1 || !json.Valid([]byte(mc.ToolCalls[0].Arguments)) || mc.OutputTokens != 1800 || mc.CostUSD == 0 {
		t.Fatalf("%+v", mc)
	}
}

// BenchmarkAnthropicStream parses a typical streamed Anthropic response fed
// in 1400-byte pieces (about one TLS record each).
func BenchmarkAnthropicStream(b *testing.B) {
	in := typicalAnthropicStream()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		c := Detect("api.anthropic.com", "POST", "/v1/messages")
		feed(c.ResponseWriter(200, "text/event-stream"), in, 1400)
		c.Finish(200, 0, 0, 0)
	}
}

// BenchmarkAnthropicRequest parses a long conversation request (Claude Code
// sends the whole history each turn).
func BenchmarkAnthropicRequest(b *testing.B) {
	var buf bytes.Buffer
	buf.WriteString(`{"model":"claude-sonnet-4-5-20250929","max_tokens":32000,"stream":true,"system":[{"type":"text","text":"You are Claude Code."}],"tools":[`)
	for i := 0; i < 20; i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"name":"tool%d","description":"%s","input_schema":{"type":"object","properties":{"a":{"type":"string"}}}}`, i, strings.Repeat("describes the tool ", 20))
	}
	buf.WriteString(`],"messages":[`)
	for i := 0; i < 100; i++ {
		if i > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"role":"assistant","content":[{"type":"text","text":"%s"},{"type":"tool_use","id":"toolu_%d","name":"Read","input":{"file_path":"/x/%d.go"}}]},`, strings.Repeat("thinking out loud ", 30), i, i)
		fmt.Fprintf(&buf, `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_%d","content":"%s"}]}`, i, strings.Repeat("package main\\nfunc main() {}\\n", 40))
	}
	buf.WriteString(`]}`)
	in := buf.Bytes()
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		c := Detect("api.anthropic.com", "POST", "/v1/messages")
		feed(c.RequestWriter(), in, 16<<10)
		c.Finish(200, 0, 0, 0)
	}
}
