package modelcall

import (
	"io"
	"net/http"

	"github.com/capsem/capsem/mitm/inspect"
	"github.com/capsem/capsem/mitm/provider"
	"github.com/capsem/capsem/store"
)

// Kind is what an exchange carrying a model call is claimed as
// (inspect.Exchange.Claim): a later inspector knows it is not its own.
const Kind = "model-call"

// minPreview is the smallest preview a call's parser keeps, whatever the
// policy's preview_bytes: the tool calls and results are read from it.
const minPreview = 256

// Inspector finds the model calls among the requests.
type Inspector struct {
	tracer *provider.Tracer // links a call's tool results to the call that asked for them
}

// New returns the inspector.
func New() *Inspector { return &Inspector{tracer: provider.NewTracer(4096)} }

// Begin is inspect.Inspector's.
func (in *Inspector) Begin(x inspect.Exchange, r *http.Request) inspect.Stream {
	call := provider.Detect(x.Host(), r.Method, r.URL.Path)
	if call == nil {
		return nil
	}
	call.SetOptions(provider.Options{PreviewBytes: max(x.Policy().PreviewBytes(), minPreview)})
	x.Claim(Kind)
	return &stream{in: in, x: x, call: call}
}

type stream struct {
	inspect.Nop
	in   *Inspector
	x    inspect.Exchange
	call *provider.Call
}

func (s *stream) Tap() io.Writer { return s.call.RequestWriter() }

func (s *stream) Response(resp *http.Response) (io.Writer, error) {
	return s.call.ResponseWriter(resp.StatusCode, resp.Header.Get("Content-Type")), nil
}

// Done records the call when the request went upstream.
func (s *stream) Done(o inspect.Outcome) {
	if o.Decision != store.Allowed {
		return
	}
	mc := s.call.Finish(o.Status, o.Duration, o.RequestBytes, o.ResponseBytes)
	s.in.tracer.Assign(&mc)
	s.x.Record(store.Event{Kind: store.KindModelCall, ModelCall: &mc})
}
