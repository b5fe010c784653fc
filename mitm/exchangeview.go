package mitm

import (
	"cmp"
	"net/http"

	"github.com/capsem/capsem/mitm/inspect"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// The exchange as an inspector sees it: inspect.Exchange.
var _ inspect.Exchange = (*exchange)(nil)

func (ex *exchange) Policy() *policy.Policy { return ex.pol }
func (ex *exchange) Flow() *netstack.Flow   { return ex.fs.flow }
func (ex *exchange) Host() string           { return ex.fs.sni }
func (ex *exchange) Note(s string)          { ex.note(s) }

func (ex *exchange) Claim(kind string) {
	if ex.claimed == "" {
		ex.claimed = kind
	}
}

func (ex *exchange) Claimed() string { return ex.claimed }

func (ex *exchange) Refuse(status int, reason, why, advice string) {
	ex.refuse(ex.w, status, reason, why, advice)
}

func (ex *exchange) Answer(a inspect.Answer) {
	ex.ev.Decision, ex.ev.Reason, ex.ev.MatchedRule = store.Denied, a.Reason, a.Rule
	ex.answered = true
	ex.note(a.Why)
	h := ex.w.Header()
	h.Set("X-Capsem-Blocked", a.Reason)
	h.Set("Content-Type", a.ContentType)
	ex.ev.StatusCode = a.Status
	ex.w.WriteHeader(a.Status)
	ex.w.Write(a.Body)
	ex.ev.ResponseBodyPreview = cmp.Or(a.Preview, string(a.Body))
}

func (ex *exchange) MarkRefused(reason, why, rule, advice string) {
	ex.markRefused(reason, why, rule, advice)
	if ex.cancel != nil {
		ex.cancel()
	}
}

func (ex *exchange) HoldBody(r *http.Request, limit int64) (inspect.HeldBody, error) {
	h, err := ex.readHeld(ex.w, r, r.Body, limit)
	if err != nil {
		if ex.refuseHeld(ex.w, err) {
			return nil, inspect.ErrAnswered
		}
		return nil, err
	}
	return h, nil
}

func (ex *exchange) EndTap() {
	if ex.req != nil {
		ex.req.close()
	}
}

func (ex *exchange) Record(ev store.Event) {
	if ex.recorded {
		ex.p.cfg.Recorder.Append(ev)
		return
	}
	ex.queued = append(ex.queued, ev)
}
