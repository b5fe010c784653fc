package mitm

import (
	"io"
	"net/http"

	"github.com/capsem/capsem/mitm/inspect"
	"github.com/capsem/capsem/mitm/internal/contentcoding"
)

// The exchange drives its streams through the hooks of package inspect, in
// the order of the list (inspectors.go), the guard last.

// begin asks every inspector, in order, whether the exchange interests
// it; false when one refused the request (the later ones are not asked).
func (ex *exchange) begin(r *http.Request) bool {
	ex.streams = ex.streamsArr[:0]
	for _, in := range ex.p.inspectors {
		s := in.Begin(ex, r)
		if s != nil {
			ex.streams = append(ex.streams, s)
		}
		if ex.answered {
			return false
		}
	}
	ex.guardStage.ex = ex
	ex.streams = append(ex.streams, &ex.guardStage)
	return true
}

// tapRequest puts the request body's copy in place: counted, previewed,
// decoded for the streams that want it.
func (ex *exchange) tapRequest(r *http.Request) {
	var parser writers
	for _, s := range ex.streams {
		parser.add(s.Tap())
	}
	ex.req = newTap(r.Body, contentcoding.Of(r.Header), ex.pol.PreviewBytes(), parser.joined())
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = ex.req
	}
}

// request runs the streams' Request hooks in order; false when one
// answered the guest (the later ones never see the request).
func (ex *exchange) request(r *http.Request) bool {
	for _, s := range ex.streams {
		if !s.Request(r) || ex.answered {
			return false
		}
	}
	return true
}

// response runs the streams' Response hooks in reverse order on an
// upstream's response, then puts the response body's copy in place.
func (ex *exchange) response(resp *http.Response) error {
	var parser writers
	for i := len(ex.streams) - 1; i >= 0; i-- {
		w, err := ex.streams[i].Response(resp)
		if err != nil {
			return err // ErrorHandler answers 502
		}
		parser.add(w)
	}
	ex.resp = newTap(resp.Body, contentcoding.Of(resp.Header), ex.pol.PreviewBytes(), parser.joined())
	resp.Body = ex.resp
	return nil
}

// done tells every stream, in order, how the exchange ended.
func (ex *exchange) done(o inspect.Outcome) {
	for _, s := range ex.streams {
		s.Done(o)
	}
}

// guardStage is the secrets and DLP guard as the chain's last stream.
type guardStage struct {
	inspect.Nop
	ex *exchange
}

func (g *guardStage) Request(r *http.Request) bool { return g.ex.guard(g.ex.w, r) }

func (g *guardStage) Response(resp *http.Response) (io.Writer, error) {
	return nil, g.ex.scrubResponse(resp)
}

// writers gathers the streams' copies of a body: one is written to as it
// is (no MultiWriter to allocate for the usual single reader), several
// through a MultiWriter.
type writers struct {
	first io.Writer
	more  []io.Writer
}

func (ws *writers) add(w io.Writer) {
	switch {
	case w == nil:
	case ws.first == nil:
		ws.first = w
	default:
		ws.more = append(ws.more, w)
	}
}

func (ws *writers) joined() io.Writer {
	if ws.more == nil {
		return ws.first
	}
	return io.MultiWriter(append([]io.Writer{ws.first}, ws.more...)...)
}
