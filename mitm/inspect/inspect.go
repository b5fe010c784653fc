package inspect

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// Inspector is one kind of inspection, made once per Proxy.
type Inspector interface {
	// Begin sees an allowed request's head before anything of its body
	// is read, and returns the exchange's stream, or nil when the
	// exchange does not interest it. It may refuse the request already
	// (x.Refuse); the core then asks no later inspector. The head is as
	// the core's upgrade check left it: an Upgrade header remains on a
	// WebSocket handshake capsem lets through, and on nothing else.
	Begin(x Exchange, r *http.Request) Stream
}

// Stream is an inspector's part of one exchange.
type Stream interface {
	// Tap returns where the request body is copied as it is read (by a
	// stream's Request that holds it, or by the upstream), with its
	// content coding removed: what the guest sent, beneath the secrets
	// guard's substitutions. Every stream's Tap gets the same bytes; a
	// body no one read when a stream refused reaches none. Nil: not
	// wanted.
	Tap() io.Writer
	// Request runs in list order once every stream's Tap is in place and
	// before the request is forwarded; it may read or hold the body
	// (x.HoldBody) and replace r.Body. It returns false when it answered
	// the guest itself (x.Refuse or x.Answer): the request goes no
	// further, and no later stream sees it.
	Request(r *http.Request) bool
	// Response runs in reverse list order on the upstream's response
	// (not a 101) before the guest gets it; it may replace resp.Body, and
	// returns where the response body is copied, decoded (nil: not
	// wanted). An error refuses the response: the guest gets a 502, and
	// no stream before it in the list sees the response.
	Response(resp *http.Response) (io.Writer, error)
	// Done runs in list order when the exchange ends, with the outcome
	// the core decided; events it records with x.Record follow the
	// exchange's net event.
	Done(o Outcome)
}

// Exchange is what an inspector sees of one exchange, and the ways it may
// act on it.
type Exchange interface {
	// Policy is the policy in force when the request arrived, taken
	// once: the request's decisions and its response's follow it.
	Policy() *policy.Policy
	// Flow is the guest connection the request came on.
	Flow() *netstack.Flow
	// Host is the server name of the guest's connection (the SNI, which
	// the request's Host matches), in lower case.
	Host() string
	// Note adds s to the event's detail.
	Note(s string)
	// Claim says the exchange's content is kind's (a model call, say);
	// Claimed is the first kind claimed, "" when none. A later inspector
	// reads it to leave alone what an earlier one understood.
	Claim(kind string)
	Claimed() string
	// Refuse answers the guest with capsem's plain-text refusal (status,
	// the reason in X-Capsem-Blocked, why, and what to do instead).
	Refuse(status int, reason, why, advice string)
	// Answer answers the guest in place of the upstream, in the form of
	// the stream's own protocol: a refusal under a.Reason.
	Answer(a Answer)
	// MarkRefused refuses the request while its body streams: the first
	// refusal marked wins, the request is cancelled upstream, and the
	// guest gets capsem's 403 with advice.
	MarkRefused(reason, why, rule, advice string)
	// HoldBody reads the request's body whole, up to limit bytes, within
	// the budgets of held bodies and their deadline. When a budget is
	// spent or the body is late the core has answered the guest (503,
	// 408) and the error is ErrAnswered; another error is the stream's to
	// answer. A body longer than limit comes back Over.
	HoldBody(r *http.Request, limit int64) (HeldBody, error)
	// EndTap ends the decoding of the request body's copy: every Tap has
	// all it will get of what was read so far.
	EndTap()
	// Record appends ev to the session's log after the exchange's net
	// event.
	Record(ev store.Event)
}

// ErrAnswered is HoldBody's error when the core answered the guest.
var ErrAnswered = errors.New("inspect: the core answered the guest")

// HeldBody is a request body read whole. Reading it gives its bytes and
// then, when Over, the rest of the body; closing it gives its bytes back
// to the budgets (not closing the request's body).
type HeldBody interface {
	io.ReadCloser
	// Bytes is the body as held (up to the limit).
	Bytes() []byte
	// Over reports whether the body goes on past the limit.
	Over() bool
}

// Answer is a stream's own answer to the guest, a refusal.
type Answer struct {
	Status      int
	Reason      string // the event's reason and X-Capsem-Blocked
	Rule        string // the event's matched rule
	Why         string // noted in the event's detail
	ContentType string
	Body        []byte
	// Preview is what the event records of the body; empty: Body.
	Preview string
}

// Outcome is how an exchange ended, as the core decided it.
type Outcome struct {
	Decision store.Decision
	Reason   string
	Rule     string
	Status   int // 0: no response
	Duration time.Duration
	// RequestBytes and ResponseBytes are the bodies' bytes on the wire.
	RequestBytes, ResponseBytes int64
}

// Nop is an embeddable Stream that does nothing, for streams that need a
// few of the hooks only.
type Nop struct{}

func (Nop) Tap() io.Writer                             { return nil }
func (Nop) Request(*http.Request) bool                 { return true }
func (Nop) Response(*http.Response) (io.Writer, error) { return nil, nil }
func (Nop) Done(Outcome)                               {}
