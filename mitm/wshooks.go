package mitm

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/capsem/capsem/store"
)

// The exchange's WebSocket hooks: what the guard (wsguard.go) scans an
// upgraded connection for, the handshake's extensions it strips and
// refuses, and the wrapping of the upgraded connection once the 101 is
// through.

// wsScanOf is what ex's host is scanned for, as ex.guard decided it.
func (ex *exchange) wsScanOf() wsScan {
	s := wsScan{view: ex.view, host: ex.fs.sni}
	if ex.scanner != nil {
		s.scanner, s.dlpBlock, s.exempt = ex.scanner, ex.dlpBlock, ex.view.exempt()
	}
	return s
}

// stripWSExtensions removes Sec-WebSocket-Extensions from a WebSocket
// handshake on its way upstream when the frames are to be scanned. The
// extension every client offers, permessage-deflate (RFC 7692), compresses
// payloads with a window kept across messages: a compressed frame cannot
// be scanned without inflating the whole connection, and a guard that let
// it through would fail open. Without the offer the upstream cannot
// negotiate it, and payloads are plain (only slower to send).
func (ex *exchange) stripWSExtensions(h http.Header) {
	if ex.wsKey == "" {
		return
	}
	if s := ex.wsScanOf(); !s.on() {
		return
	}
	if _, ok := h["Sec-Websocket-Extensions"]; ok {
		delete(h, "Sec-Websocket-Extensions")
		ex.note("stripped Sec-WebSocket-Extensions (capsem scans the frames, and cannot scan compressed ones)")
	}
}

// refuseWSExtension refuses a 101 that negotiated an extension on a
// connection whose frames are to be scanned and a finding would close:
// capsem did not offer one, so the upstream breaks RFC 6455 §9.1, and its
// frames could not be read.
func (ex *exchange) refuseWSExtension(h http.Header) error {
	if ext := h.Values("Sec-Websocket-Extensions"); len(ext) > 0 {
		if s := ex.wsScanOf(); s.refuses() {
			return &switchRefused{Why: fmt.Sprintf("it negotiated Sec-WebSocket-Extensions %q, which capsem did not offer and cannot scan", strings.Join(ext, ", "))}
		}
	}
	return nil
}

// finishUpgrade records the upgrade's event and wraps the upgraded
// upstream connection (resp's body) so that the guest's bytes written to
// it are scanned; it leaves the body as it is when nothing is scanned. A
// finding adds an event of its own, like the upgrade's but for its
// decision.
func (ex *exchange) finishUpgrade(resp *http.Response) {
	up, ok := resp.Body.(io.ReadWriteCloser)
	s := ex.wsScanOf()
	if ext := resp.Header.Get("Sec-Websocket-Extensions"); ext != "" && s.on() {
		// Only when nothing could close the connection (refuseWSExtension).
		ex.note("the upstream negotiated " + ext + ": the frames are not scanned")
		ok = false
	}
	if !ok || !s.on() {
		ex.finish()
		return
	}
	ex.note("the guest's frames are scanned")
	ex.finish()
	base := ex.ev
	base.RequestBodyPreview, base.ResponseBodyPreview = "", ""
	g := newWSGuard(up, s)
	g.record = func(denied bool, reason, rule, why string) {
		ev := base
		ev.Decision, ev.Reason, ev.MatchedRule = store.Allowed, reason, rule
		if denied {
			ev.Decision = store.Denied
		}
		ev.Detail = "websocket: " + why
		ev.Duration = time.Since(ex.start)
		ev.BytesSent, ev.BytesReceived = g.counts()
		ex.p.cfg.Recorder.Append(store.Event{Kind: store.KindNet, Net: &ev})
	}
	g.logf = func(msg string, args ...any) {
		ex.p.log.Info(msg, append([]any{"domain", ex.fs.sni, "path", base.Path}, args...)...)
	}
	resp.Body = g
}
