package provider

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/capsem/capsem/mitm/internal/jsonscan"
	"github.com/capsem/capsem/mitm/internal/pricing"
	"github.com/capsem/capsem/store"
)

// Provider names, as store.ModelCall.Provider has them.
const (
	Anthropic = "anthropic"
	OpenAI    = "openai"
	Google    = "google"
)

// Limits and defaults.
const (
	DefaultPreviewBytes    = 4096
	DefaultMaxToolArgBytes = 1 << 20
	// sseMaxEvent bounds one server-sent event. OpenAI's response.completed
	// repeats the whole response, so it is generous.
	sseMaxEvent = 8 << 20
	// maxUsageBytes bounds the usage object kept as UsageDetails.
	maxUsageBytes = 64 << 10
	// maxToolCalls and maxToolResults bound the calls and results kept for
	// one model call; more are dropped.
	maxToolCalls   = 512
	maxToolResults = 512
)

type apiKind uint8

const (
	apiAnthropicMessages apiKind = iota + 1
	apiOpenAIChat
	apiOpenAIResponses
	apiGemini
)

// Options tune a Call.
type Options struct {
	// PreviewBytes caps each text preview: the system prompt, the request
	// body, the response's text and thinking, each tool result. Default
	// DefaultPreviewBytes.
	PreviewBytes int
	// MaxToolArgBytes caps the arguments kept for one tool call. Default
	// DefaultMaxToolArgBytes.
	MaxToolArgBytes int
}

func (o Options) withDefaults() Options {
	if o.PreviewBytes <= 0 {
		o.PreviewBytes = DefaultPreviewBytes
	}
	if o.MaxToolArgBytes <= 0 {
		o.MaxToolArgBytes = DefaultMaxToolArgBytes
	}
	return o
}

// Call is one model API call being parsed: the MITM feeds it the decoded
// request body and response body as they stream, then calls Finish. The
// request and the response may be fed from two goroutines at once; each
// writer must be fed from one goroutine at a time.
type Call struct {
	api        apiKind
	provider   string
	domain     string
	method     string
	path       string
	pathModel  string // Gemini: the model named in the path
	pathStream bool   // Gemini: streamGenerateContent

	opts Options

	reqMu sync.Mutex
	req   *requestParser

	respMu sync.Mutex
	resp   *responseParser

	finishOnce sync.Once
	result     store.ModelCall
}

// Detect returns a Call when method and path are those of a model API call,
// and nil otherwise. The provider is told by the path alone, so a call to a
// stand-in server under another host name is recognised too; host becomes
// the call's Domain. path must not include the query string (one is
// ignored).
//
//	POST /v1/messages                                   anthropic
//	POST /v1/chat/completions, /v1/responses            openai
//	POST /v1beta/models/{model}:generateContent         google
//	POST /v1beta/models/{model}:streamGenerateContent   google (also /v1/, /v1alpha/)
func Detect(host, method, path string) *Call {
	if !strings.EqualFold(method, "POST") {
		return nil
	}
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	c := &Call{domain: hostOnly(host), method: "POST", path: path, opts: Options{}.withDefaults()}
	switch path {
	case "/v1/messages":
		c.api, c.provider = apiAnthropicMessages, Anthropic
	case "/v1/chat/completions":
		c.api, c.provider = apiOpenAIChat, OpenAI
	case "/v1/responses":
		c.api, c.provider = apiOpenAIResponses, OpenAI
	default:
		model, stream, ok := geminiPath(path)
		if !ok {
			return nil
		}
		c.api, c.provider, c.pathModel, c.pathStream = apiGemini, Google, model, stream
	}
	return c
}

func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return strings.ToLower(strings.TrimSuffix(host, "."))
}

func geminiPath(p string) (model string, stream, ok bool) {
	p = strings.ReplaceAll(strings.ReplaceAll(p, "%3A", ":"), "%3a", ":")
	for _, prefix := range []string{"/v1beta/models/", "/v1/models/", "/v1alpha/models/"} {
		rest, found := strings.CutPrefix(p, prefix)
		if !found {
			continue
		}
		m, method, found := strings.Cut(rest, ":")
		if !found || m == "" || strings.Contains(m, "/") {
			return "", false, false
		}
		switch method {
		case "generateContent":
			return m, false, true
		case "streamGenerateContent":
			return m, true, true
		}
		return "", false, false
	}
	return "", false, false
}

// bodyScanner returns a scanner that reports a JSON body's tokens to h,
// with Gemini's keys made lowerCamelCase.
func (c *Call) bodyScanner(h handler) *jsonscan.Scanner {
	sc := jsonscan.New(c.opts.PreviewBytes, h.tok)
	sc.CamelKeys(c.api == apiGemini)
	return sc
}

// Provider returns the call's provider: anthropic, openai or google.
func (c *Call) Provider() string { return c.provider }

// SetOptions sets the call's limits; zero fields keep their defaults. Call it
// before RequestWriter and ResponseWriter.
func (c *Call) SetOptions(o Options) { c.opts = o.withDefaults() }

// RequestWriter returns the writer to feed the decoded request body to. It
// never returns an error and never blocks for long; what it keeps is bounded
// by the options, whatever the size of the body. Calling it again returns
// the same writer.
func (c *Call) RequestWriter() io.Writer {
	c.reqMu.Lock()
	defer c.reqMu.Unlock()
	if c.req == nil {
		c.req = newRequestParser(c)
	}
	return c.req
}

// ResponseWriter returns the writer to feed the decoded response body to,
// given the response's status code and Content-Type. A text/event-stream
// body is read as server-sent events, anything else as JSON; an error body
// (any status) is read the same way, its error type becoming the stop
// reason. The same guarantees as RequestWriter hold. Calling it again
// returns the same writer.
func (c *Call) ResponseWriter(status int, contentType string) io.Writer {
	c.respMu.Lock()
	defer c.respMu.Unlock()
	if c.resp == nil {
		c.resp = newResponseParser(c, contentType)
	}
	return c.resp
}

// Finish ends both bodies, completes the parse and returns the model call,
// with CostUSD from the embedded price table. Writes after Finish are
// ignored; calling Finish again returns the same result.
func (c *Call) Finish(statusCode int, d time.Duration, requestWireBytes, responseWireBytes int64) store.ModelCall {
	c.finishOnce.Do(func() {
		c.result = c.finish(statusCode, d, requestWireBytes, responseWireBytes)
	})
	return c.result
}

func (c *Call) finish(statusCode int, d time.Duration, reqBytes, respBytes int64) store.ModelCall {
	mc := store.ModelCall{
		Provider:      c.provider,
		Domain:        c.domain,
		Method:        c.method,
		Path:          c.path,
		StatusCode:    statusCode,
		Duration:      d,
		RequestBytes:  reqBytes,
		ResponseBytes: respBytes,
		Stream:        c.pathStream,
	}
	c.reqMu.Lock()
	if r := c.req; r != nil {
		r.close()
		mc.Model = r.info.model
		mc.Stream = mc.Stream || r.info.stream
		mc.SystemPromptPreview = r.info.system.String()
		mc.MessagesCount = r.info.messages
		mc.ToolsCount = r.info.tools
		mc.RequestBodyPreview = r.preview.String()
		mc.ToolResults = r.info.results()
	}
	c.reqMu.Unlock()
	if mc.Model == "" {
		mc.Model = c.pathModel
	}

	priceModel := mc.Model
	c.respMu.Lock()
	if r := c.resp; r != nil {
		r.close()
		info := &r.info
		mc.Stream = info.streamed
		mc.MessageID = info.id
		mc.TextContent = info.text.String()
		mc.ThinkingContent = info.thinking.String()
		mc.StopReason = info.stop
		if mc.StopReason == "" && info.errType != "" {
			mc.StopReason = "error:" + info.errType
		}
		if info.model != "" {
			priceModel = info.model
			if mc.Model == "" {
				mc.Model = info.model
			}
		}
		if len(info.usage) > 0 {
			var buf bytes.Buffer
			if json.Compact(&buf, info.usage) == nil {
				mc.UsageDetails = buf.String()
			}
			mc.InputTokens, mc.OutputTokens, mc.CacheReadTokens, mc.CacheWriteTokens = tokens(c.api, info.usage)
		}
		for i, t := range info.calls {
			mc.ToolCalls = append(mc.ToolCalls, store.ToolCall{
				Index:     i,
				CallID:    t.id,
				Name:      t.name,
				Arguments: string(t.args),
				Origin:    t.origin,
			})
		}
	}
	c.respMu.Unlock()

	if usd, ok := pricing.Cost(c.provider, priceModel, mc.InputTokens, mc.OutputTokens, mc.CacheReadTokens, mc.CacheWriteTokens); ok {
		mc.CostUSD = usd
	} else if priceModel != mc.Model && mc.Model != "" {
		mc.CostUSD, _ = pricing.Cost(c.provider, mc.Model, mc.InputTokens, mc.OutputTokens, mc.CacheReadTokens, mc.CacheWriteTokens)
	}
	return mc
}

// tokens reads the token counts out of a provider's usage object. Input is
// the uncached input, so that input + cache read + cache write is the whole
// prompt for every provider; output includes reasoning tokens.
func tokens(api apiKind, usage []byte) (in, out, cacheRead, cacheWrite int64) {
	var u struct {
		// Anthropic, and OpenAI's Responses API.
		InputTokens   int64 `json:"input_tokens"`
		OutputTokens  int64 `json:"output_tokens"`
		CacheRead     int64 `json:"cache_read_input_tokens"`
		CacheCreation int64 `json:"cache_creation_input_tokens"`
		InputDetails  struct {
			Cached int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		// OpenAI Chat Completions.
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
		PromptDetails    struct {
			Cached int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		// Gemini.
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
		ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
	}
	if json.Unmarshal(usage, &u) != nil {
		return 0, 0, 0, 0
	}
	switch api {
	case apiAnthropicMessages:
		in, out, cacheRead, cacheWrite = u.InputTokens, u.OutputTokens, u.CacheRead, u.CacheCreation
	case apiOpenAIChat:
		cacheRead = u.PromptDetails.Cached
		in, out = u.PromptTokens-cacheRead, u.CompletionTokens
	case apiOpenAIResponses:
		cacheRead = u.InputDetails.Cached
		in, out = u.InputTokens-cacheRead, u.OutputTokens
	case apiGemini:
		cacheRead = u.CachedContentTokenCount
		in = u.PromptTokenCount - cacheRead + u.ToolUsePromptTokenCount
		out = u.CandidatesTokenCount + u.ThoughtsTokenCount
	}
	return max(in, 0), max(out, 0), max(cacheRead, 0), max(cacheWrite, 0)
}

// copyBytes returns a copy of b (scanner buffers are reused).
func copyBytes(b []byte) []byte { return append([]byte(nil), b...) }
