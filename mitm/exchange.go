package mitm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/mitm/inspect"
	"github.com/capsem/capsem/mitm/internal/contentcoding"
	"github.com/capsem/capsem/mitm/upstream"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// MaxDecodedForParsing bounds how much of one body is decompressed on the
// side for parsing (the guest always gets the body unchanged).
const MaxDecodedForParsing = 64 << 20

// exchange is one request and its response.
type exchange struct {
	p  *Proxy
	fs *flowState
	w  http.ResponseWriter // the guest's answer
	// pol is the policy in force when the request arrived, taken once: the
	// request's decisions and the response's preview follow the same
	// policy, even when a reload lands between the two.
	pol   *policy.Policy
	start time.Time
	ev    store.Net
	req   *tap
	resp  *tap
	once  sync.Once
	// streams are the inspectors' parts of the exchange, in the list's
	// order (inspectors.go), the guard last; on streamsArr while they fit.
	streams    []inspect.Stream
	streamsArr [4]inspect.Stream
	guardStage guardStage
	claimed    string        // the kind an inspector claimed the exchange as
	answered   bool          // capsem answered the guest itself
	recorded   bool          // the net event is appended
	queued     []store.Event // inspectors' events, recorded after the net event
	// wsKey is the Sec-WebSocket-Key of a WebSocket handshake the upgrade
	// policy let through; only then may a 101 become a tunnel.
	wsKey string
	// upReq is what the upstream transports know of the request, and
	// tell back (the response head's wire order).
	upReq upstream.Request
	// view is the policy's secrets as this request's host sees them, nil
	// when there are none; found is what the guard found (guard.go).
	view     *secretView
	scanner  *dlp.Scanner // nil: no DLP for this host
	dlpBlock bool         // a DLP match refuses the request
	found    findings
	cancel   context.CancelFunc // cancels the request upstream: the guard refused its body
	// gatewayBytes is what the MCP gateway wrote back (gateway.go).
	gatewayBytes int64
	// heldBodies are the request bodies it read whole (heldbody.go),
	// whose bytes go back to the budgets at the latest when it finishes.
	heldBodies []*heldBody
}

// exchangeOf is the exchange of a request the exchange forwards: it
// rides in the upstream package's Request, the one context value a
// forwarded request carries.
func exchangeOf(ctx context.Context) *exchange {
	if req := upstream.RequestOf(ctx); req != nil {
		ex, _ := req.Owner.(*exchange)
		return ex
	}
	return nil
}

func (p *Proxy) serveHTTP(w http.ResponseWriter, r *http.Request) {
	fs, _ := r.Context().Value(flowKey{}).(*flowState)
	if fs == nil {
		http.Error(w, "capsem: connection not known to the MITM", http.StatusInternalServerError)
		return
	}
	f := fs.flow
	pol := f.Current()
	ex := &exchange{p: p, fs: fs, w: w, pol: pol, start: time.Now()}
	ex.ev = store.Net{
		Domain:         fs.sni,
		IP:             f.Dst.Addr(),
		Port:           f.Port,
		SrcIP:          f.Guest.Addr(),
		SrcPort:        f.Guest.Port(),
		Transport:      flowTransport(f), // udp for HTTP/3
		ConnType:       store.ConnHTTPS,
		HTTPVersion:    httpVersion(r),
		Method:         r.Method,
		Path:           r.URL.Path,
		Query:          r.URL.RawQuery,
		RequestHeaders: fs.requestHeaders(r),
		Count:          1,
	}
	fs.active.Add(1)
	defer fs.active.Done()
	defer ex.finish()

	host := strings.ToLower(strings.TrimSuffix(hostOnly(r.Host), "."))
	if host != fs.sni {
		ex.deny(w, http.StatusMisdirectedRequest, ReasonHostNotSNI, "",
			fmt.Sprintf("the Host header names %q but this TLS connection is for %q; capsem refuses domain fronting", host, fs.sni))
		return
	}
	if d := pol.DecideFlow(f.Name, f.Port); !d.Allowed {
		ex.deny(w, http.StatusForbidden, d.Reason, d.Rule, "the policy no longer allows "+f.Name)
		return
	}
	if why := refuseTunnel(r); why != "" {
		ex.refuse(w, http.StatusMethodNotAllowed, ReasonTunnelRefused, why,
			"capsem reads every request on this connection and forwards none that would turn it into a tunnel it cannot see into; "+
				"the only protocol switch it allows is a WebSocket upgrade (a GET with Upgrade: websocket over HTTP/1.1). "+
				"Send the requests themselves instead.")
		return
	}
	d := pol.DecideHTTP(host, r.Method, r.URL.EscapedPath())
	ex.ev.MatchedRule = d.Rule
	if !d.Allowed {
		ex.deny(w, http.StatusForbidden, ReasonHTTPDenied, d.Rule, d.Reason)
		return
	}
	ex.ev.Decision, ex.ev.Reason = store.Allowed, d.Reason
	ex.upReq = upstream.Request{Policy: pol, Owner: ex}
	ctx := ex.withCancel(upstream.WithRequest(r.Context(), &ex.upReq))
	defer ex.cancel()
	up := checkUpgrade(r.Method, r.ProtoAtLeast(1, 1), r.Header)
	if !ex.begin(r) {
		return
	}
	ex.wsKey = up.wsKey
	ex.note(up.detail())
	if names := stripLookalikes(r.Header); len(names) > 0 {
		ex.note("stripped " + strings.Join(names, ", ") + " (an upstream may read the name as a header that frames the message)")
	}
	if err := p.admit(); err != nil {
		ex.refuse(w, http.StatusServiceUnavailable, ReasonStoreUnavailable, err.Error(),
			"capsem lets nothing through that it cannot record, and its event store cannot record now. "+
				"Tell the user: free space for capsem's event store (or fix its disk), then retry; a new session may be needed.")
		return
	}

	if f.Local {
		ex.serveGateway(w, r)
		return
	}
	ex.tapRequest(r)
	if !ex.request(r) {
		return
	}
	if ex.view != nil && ex.view.reflect != nil {
		sw := &scrubWriter{ResponseWriter: w, ex: ex}
		fs.proxy.ServeHTTP(sw, r.WithContext(ctx))
		sw.finish()
		return
	}
	fs.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// deny answers the guest with a plain-text body an agent can read and act
// on, and records the refusal: the policy does not allow the request.
func (ex *exchange) deny(w http.ResponseWriter, status int, reason, rule, why string) {
	ex.ev.MatchedRule = rule
	if rule == "" {
		rule = "(none)"
	}
	ex.reply(w, status, reason, why, fmt.Sprintf("capsem blocked this request.\n"+
		"  request: %s https://%s%s\n"+
		"  rule:    %s\n"+
		"  why:     %s\n"+
		"This sandbox only lets through what its policy allows. If the task needs this request, "+
		"ask the user to allow it in the capsem policy file (an [[http]] rule with action = \"allow\", "+
		"or the host under [network]).\n",
		ex.ev.Method, ex.fs.sni, ex.ev.Path, rule, why))
}

// refuse answers like deny a request capsem refuses whatever the policy
// says; advice tells the agent what to do instead.
func (ex *exchange) refuse(w http.ResponseWriter, status int, reason, why, advice string) {
	ex.reply(w, status, reason, why, fmt.Sprintf("capsem blocked this request.\n"+
		"  request: %s https://%s%s\n"+
		"  why:     %s\n"+
		"%s\n",
		ex.ev.Method, ex.fs.sni, ex.ev.Path, why, advice))
}

func (ex *exchange) reply(w http.ResponseWriter, status int, reason, why, body string) {
	ex.ev.Decision, ex.ev.Reason = store.Denied, reason
	ex.ev.StatusCode = status
	ex.answered = true
	ex.note(why)
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Capsem-Blocked", reason)
	w.WriteHeader(status)
	io.WriteString(w, body)
	ex.ev.ResponseBodyPreview = body
}

// note adds s to the event's Detail.
func (ex *exchange) note(s string) {
	switch {
	case s == "":
	case ex.ev.Detail == "":
		ex.ev.Detail = s
	default:
		ex.ev.Detail += "; " + s
	}
}

// finish decides the net event from what the exchange and its streams
// found, tells the streams how it ended, and records it once, before the
// events the streams recorded in Done.
func (ex *exchange) finish() {
	ex.once.Do(func() {
		ex.releaseHeld()
		mayHoldReal := ex.applyFindings()
		d := time.Since(ex.start)
		ex.ev.Duration = d
		var reqWire, respWire int64
		if ex.req != nil {
			reqWire, ex.ev.RequestBodyPreview = ex.req.close()
		}
		if ex.resp != nil {
			respWire, ex.ev.ResponseBodyPreview = ex.resp.close()
		}
		if ex.fs.flow.Local {
			reqWire, respWire = ex.ev.BytesSent, ex.gatewayBytes
		}
		ex.ev.BytesSent, ex.ev.BytesReceived = reqWire, respWire
		ex.done(inspect.Outcome{Decision: ex.ev.Decision, Reason: ex.ev.Reason, Rule: ex.ev.MatchedRule,
			Status: ex.ev.StatusCode, Duration: d, RequestBytes: reqWire, ResponseBytes: respWire})
		if ex.view != nil && mayHoldReal {
			ex.redactEvent()
		}
		ex.p.cfg.Recorder.Append(store.Event{Kind: store.KindNet, Net: &ex.ev})
		ex.recorded = true
		for _, e := range ex.queued {
			ex.p.cfg.Recorder.Append(e)
		}
		ex.queued = nil
	})
}

func (p *Proxy) reverseProxy(fs *flowState) *httputil.ReverseProxy {
	target := fs.flow.Name + ":" + strconv.Itoa(int(fs.flow.Port))
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "https"
			pr.Out.URL.Host = target
			pr.Out.Host = pr.In.Host
			if ex := exchangeOf(pr.In.Context()); ex != nil {
				ex.stripWSExtensions(pr.Out.Header) // wshooks.go: compressed frames cannot be scanned
			}
		},
		Transport:  fs.forward,
		BufferPool: bufferPool{},
		// Without it the reverse proxy logs a guest or upstream that goes
		// away mid-body to the standard logger, past --log-level.
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
		ModifyResponse: func(resp *http.Response) error {
			ex := exchangeOf(resp.Request.Context())
			if ex == nil {
				return nil
			}
			ex.ev.StatusCode = resp.StatusCode
			ex.scrubFields(resp.Header, "header")
			ex.ev.ResponseHeaders = ex.responseHeaders(resp.Header)
			if resp.StatusCode == http.StatusSwitchingProtocols {
				if err := refuseSwitch(ex.wsKey, resp.Header); err != nil {
					return err // the reverse proxy closes the upstream connection and calls ErrorHandler
				}
				if err := ex.refuseWSExtension(resp.Header); err != nil {
					return err
				}
				// The body is the upgraded connection; it is copied both
				// ways by the reverse proxy and counted in the flow event,
				// the guest's frames through the guard (wsguard.go) when
				// the host's requests are scanned.
				if ex.fs.h1heads != nil {
					ex.fs.h1heads.stopFollowing()
				}
				ex.note("upgraded to websocket")
				ex.finishUpgrade(resp)
				return nil
			}
			return ex.response(resp)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			ex := exchangeOf(r.Context())
			if ex != nil {
				if reason, _, _, _ := ex.refusal(); reason != "" {
					ex.answerRefusal(w) // the guard refused the body and cancelled the request
					return
				}
			}
			if ex != nil && ex.answerUnscanned(w, err) {
				return
			}
			var sw *switchRefused
			switched := errors.As(err, &sw)
			if ex != nil {
				ex.ev.StatusCode = http.StatusBadGateway
				ex.ev.Reason = ReasonUpstreamError
				if switched {
					ex.ev.Decision, ex.ev.Reason = store.Denied, ReasonUpstreamUpgrade
				}
				ex.note(err.Error())
			}
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if switched {
				w.Header().Set("X-Capsem-Blocked", ReasonUpstreamUpgrade)
				w.WriteHeader(http.StatusBadGateway)
				fmt.Fprintf(w, "capsem: the request was allowed but %v.\n"+
					"capsem lets a connection switch protocols only for a WebSocket upgrade answered as one, "+
					"since it could not see into anything else.\n", err)
				return
			}
			w.WriteHeader(http.StatusBadGateway)
			fmt.Fprintf(w, "capsem: the request was allowed but the upstream failed: %v\n", err)
		},
	}
}

// responseHeaders is the response's header for the event: in wire order
// when the upstream path read the head and it matches, sorted otherwise.
func (ex *exchange) responseHeaders(h http.Header) []store.Header {
	if ex.upReq.Wire != nil {
		if out, ok := inWireOrder(h, ex.upReq.Wire); ok {
			return recordFields(out)
		}
	}
	return recordHeaders(h)
}

// requestHeaders is the request's header for the event: in wire order when
// the connection's head reader parsed the head, sorted otherwise.
func (fs *flowState) requestHeaders(r *http.Request) []store.Header {
	var out []store.Header
	switch {
	case fs.h1heads != nil:
		out = fs.h1heads.match(r)
	case fs.h2heads != nil:
		out = fs.h2heads.match(r)
	}
	if out != nil {
		return recordFields(out)
	}
	return recordHeaders(r.Header)
}

// tap passes a body through unchanged while counting it, keeping a bounded
// preview and feeding a parser, both with the content coding removed.
type tap struct {
	rc      io.ReadCloser
	n       int64
	preview limitedBuffer
	parser  io.Writer
	dec     io.WriteCloser
	mu      sync.Mutex
	closed  bool
}

func newTap(rc io.ReadCloser, encoding string, previewBytes int, parser io.Writer) *tap {
	t := &tap{rc: rc, parser: parser}
	t.preview.max = previewBytes
	if previewBytes > 0 || parser != nil {
		if dec, err := contentcoding.NewDecoder(encoding, sideWriter{t}, MaxDecodedForParsing); err == nil {
			t.dec = dec
		}
	}
	return t
}

func (t *tap) Read(b []byte) (int, error) {
	n, err := t.rc.Read(b)
	if n > 0 {
		t.mu.Lock()
		t.n += int64(n)
		if t.dec != nil {
			if t.parser == nil && t.preview.full() {
				t.dec.Close()
				t.dec = nil
			} else {
				t.dec.Write(b[:n])
			}
		}
		t.mu.Unlock()
	}
	return n, err
}

func (t *tap) Close() error {
	return t.rc.Close()
}

// close ends the side decoding (the parser has all it will get) and
// returns the bytes counted so far and the preview. A request body may
// still be read after the handler is done (by the upstream writer, which
// may outlive it), hence the lock.
func (t *tap) close() (n int64, preview string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		if t.dec != nil {
			t.dec.Close()
			t.dec = nil
		}
	}
	return t.n, t.preview.String()
}

// sideWriter receives decoded body bytes.
type sideWriter struct{ t *tap }

func (s sideWriter) Write(b []byte) (int, error) {
	s.t.preview.Write(b)
	if s.t.parser != nil {
		s.t.parser.Write(b)
	}
	return len(b), nil
}

// limitedBuffer keeps the first max bytes written to it. It is written
// from the side decoder's goroutine while the body's reader asks whether it
// is full, hence the lock.
type limitedBuffer struct {
	max int
	mu  sync.Mutex
	buf []byte
}

func (l *limitedBuffer) Write(b []byte) (int, error) {
	l.mu.Lock()
	if room := l.max - len(l.buf); room > 0 {
		l.buf = append(l.buf, b[:min(room, len(b))]...)
	}
	l.mu.Unlock()
	return len(b), nil
}

func (l *limitedBuffer) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buf) >= l.max
}

func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}

// bufferPool lends the reverse proxy 256 KiB copy buffers. sync.Pool
// holds pointers (a slice put in an interface allocates), and
// httputil.BufferPool gives back the slice alone: the pointer a buffer
// came in is kept in a pool of empty ones and carries the next buffer
// given back, so neither Get nor Put allocates once both pools are warm
// (Put(&b) allocated 24 bytes a request).
type bufferPool struct{}

var (
	copyBuffers = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}
	emptyBoxes  = sync.Pool{New: func() any { return new([]byte) }}
)

func (bufferPool) Get() []byte {
	bp := copyBuffers.Get().(*[]byte)
	b := *bp
	*bp = nil
	emptyBoxes.Put(bp)
	return b
}

func (bufferPool) Put(b []byte) {
	bp := emptyBoxes.Get().(*[]byte)
	*bp = b
	copyBuffers.Put(bp)
}
