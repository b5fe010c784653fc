package mitm

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/secret"
)

// The WebSocket guard. After an allowed upgrade the reverse proxy copies
// the connection both ways; without the guard, a guest could send over it
// what the HTTP path refuses (a placeholder to an unbound host, a real
// value, a credential under [dlp] block) and capsem would neither see nor
// stop it. So when the host's requests are scanned (the policy has
// secrets, or [dlp] is on for the host), the guest's side is read as
// frames (wsframe.go): each payload is unmasked and scanned as it arrives,
// a data message as one stream (a needle split across the frames of a
// message is found), a control frame on its own. The frames themselves go
// upstream byte for byte, never re-framed; only the bytes a match could
// still begin in are held back, as bodyGuard does for a body, and the end
// of a message decides them all.
//
// A finding closes the connection: the guest gets a close frame with 1008
// naming the secret or the detector (never the value), the upstream's
// connection is closed without the rest, and a net event records it,
// denied with the reason and matched rule the HTTP path gives. With [dlp]
// action "log" a credential is only noted (an allowed dlp-match event) and
// the frame goes on. A frame that breaks RFC 6455 is not forwarded either:
// close 1002.
//
// What the guard does not do: put a bound secret's real value in place of
// its placeholder (that changes a payload's length, so the frame; the
// placeholder goes to its own hosts as is), or scrub the upstream's frames
// (they reach the guest as sent).

// errWSRefused ends the guest-to-upstream copy of a connection the guard
// closed.
var errWSRefused = errors.New("mitm: the websocket connection was closed: a frame carried what capsem refuses to send")

// wsHeldMax bounds the guest's bytes held undecided. What a match can still
// begin in is at most a few KiB of payload (a JWT's 8 KiB at worst), but
// frames are not re-framed, so the heads of empty frames sent after it
// are held too: a guest that sends them without end is closed (1008)
// rather than buffered without end.
const wsHeldMax = 1 << 20

// wsCloseWait bounds how long the guard waits for its close frame to reach
// the guest before it ends the connection without.
const wsCloseWait = 2 * time.Second

// wsMaxLogged bounds the allowed dlp-match events ([dlp] log) of one
// connection: a stream of messages must not flood the event store.
const wsMaxLogged = 16

// wsScan is what a connection's guest frames are scanned for.
type wsScan struct {
	view     *secretView  // nil: no secrets
	scanner  *dlp.Scanner // nil: no DLP
	dlpBlock bool         // a credential closes the connection (else it is noted)
	exempt   [][]byte     // values DLP lets through (the bound secrets' own)
	host     string
}

func (s *wsScan) on() bool { return s.view != nil || s.scanner != nil }

// refuses reports whether a finding can close the connection. When it
// cannot ([dlp] "log" is all there is), the guard changes nothing that
// passes: a stream it cannot read as frames goes on unscanned, as a body
// with a Content-Encoding does, since closing it would be blocking under
// a policy that only logs.
func (s *wsScan) refuses() bool { return s.view != nil || s.dlpBlock }

// wsGuard is the upgraded upstream connection as the reverse proxy sees
// it: Write takes the guest's bytes (scanned, then forwarded), Read gives
// the upstream's (as they are, and the guard's close frame at the end).
type wsGuard struct {
	up   io.ReadWriteCloser
	scan wsScan
	// record adds an event for a finding: denied (the connection is
	// closed) or allowed (a [dlp] log match).
	record func(denied bool, reason, rule, why string)
	logf   func(msg string, args ...any)

	// Written only by Write (one goroutine: the copy to the upstream).
	in      wsParser
	scratch []byte
	pending []byte // guest bytes not forwarded yet
	pendAt  int64  // the guest stream offset of pending[0]
	taken   int64  // guest bytes taken
	headAt  int64  // the offset of the frame head being read
	n       int    // messages and control frames begun: numbers them for where
	passing bool   // the frames stopped parsing ([dlp] log only): bytes pass as they are
	msg     bool   // a data message is open
	msgName string // "ws-text-3"
	leaks   *secret.Stream
	dlp     *dlp.Stream
	msgOff  int64   // payload bytes of the message scanned
	segs    []wsSeg // where the message's payload not yet forwarded is
	ctrl    bool    // a control frame's payload is being read
	ctrlAt  int64
	ctrlBuf []byte
	logged  int
	err     error

	mu        sync.Mutex
	out       wsParser // the upstream's frames, followed: a close frame goes between two
	received  int64
	forwarded int64
	refused   bool
	closing   []byte // the close frame still to give the guest
	readDone  bool   // Read has ended: nothing more reaches the guest
	sent      chan struct{}
	sentOnce  sync.Once
	upOnce    sync.Once
}

// wsSeg is a run of a message's payload in the guest stream: n bytes at
// stream offset wire are the message's bytes from msg.
type wsSeg struct{ wire, msg, n int64 }

func newWSGuard(up io.ReadWriteCloser, s wsScan) *wsGuard {
	return &wsGuard{
		up: up, scan: s,
		in:      wsParser{guest: true},
		scratch: make([]byte, 32<<10),
		sent:    make(chan struct{}),
		record:  func(bool, string, string, string) {},
		logf:    func(string, ...any) {},
	}
}

func (g *wsGuard) counts() (sent, received int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.forwarded, g.received
}

// Write scans the guest's bytes and forwards those that are decided. It
// takes all of p (what it holds back it keeps) unless the connection is
// closed.
func (g *wsGuard) Write(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.passing {
		return g.pass(p)
	}
	total := len(p)
	for len(p) > 0 {
		var n int
		if !g.in.body {
			if g.in.hn == 0 {
				g.headAt = g.taken
			}
			k, done, err := g.in.readHead(p)
			if err != nil {
				var v *wsViolation
				errors.As(err, &v)
				if !g.scan.refuses() {
					g.logf("mitm: websocket frames no longer scanned", "why", v.why)
					g.passing = true
					g.pending = append(g.pending, p...)
					p, g.pending = g.pending, nil
					if _, err := g.pass(p); err != nil {
						return 0, err
					}
					return total, nil
				}
				g.logf("mitm: websocket closed (1002)", "why", v.why)
				return 0, g.refuse(wsCloseProtocolError, "capsem: "+v.why, g.headAt)
			}
			g.take(p[:k])
			n = k
			if done {
				if err := g.frameBegins(); err != nil {
					return 0, err
				}
			}
		} else {
			n = g.in.readBody(p, g.scratch)
			g.take(p[:n])
			if err := g.payload(g.scratch[:n]); err != nil {
				return 0, err
			}
			if !g.in.body {
				if err := g.frameEnds(); err != nil {
					return 0, err
				}
			}
		}
		p = p[n:]
	}
	if err := g.forward(g.taken); err != nil {
		return 0, err
	}
	if len(g.pending) > wsHeldMax {
		g.logf("mitm: websocket closed (1008)", "why", "too many bytes held undecided")
		return 0, g.refuse(wsClosePolicyViolation, "capsem: too many frames held undecided", g.taken)
	}
	return total, nil
}

// pass forwards p as it is.
func (g *wsGuard) pass(p []byte) (int, error) {
	n, err := g.up.Write(p)
	g.mu.Lock()
	g.forwarded += int64(n)
	g.mu.Unlock()
	if err != nil {
		g.err = err
	}
	return n, err
}

func (g *wsGuard) take(b []byte) {
	g.pending = append(g.pending, b...)
	g.taken += int64(len(b))
}

// frameBegins starts what a complete head opens: a control frame, a
// message, or the next fragment of one.
func (g *wsGuard) frameBegins() error {
	f := &g.in.f
	switch {
	case f.control():
		g.n++
		g.ctrl, g.ctrlAt, g.ctrlBuf = true, g.headAt, g.ctrlBuf[:0]
	case f.op != wsOpContinuation:
		g.n++
		g.msg, g.msgName, g.msgOff, g.segs = true, fmt.Sprintf("ws-%s-%d", wsOpName(f.op), g.n), 0, g.segs[:0]
		g.leaks, g.dlp = nil, nil
		if g.scan.view != nil {
			g.leaks = g.scan.view.leaks.Stream()
		}
		if g.scan.scanner != nil {
			g.dlp = g.scan.scanner.Stream()
		}
	}
	if f.length == 0 {
		return g.frameEnds()
	}
	return nil
}

// payload scans unmasked payload bytes of the current frame.
func (g *wsGuard) payload(b []byte) error {
	if g.ctrl {
		g.ctrlBuf = append(g.ctrlBuf, b...)
		return nil
	}
	g.segs = append(g.segs, wsSeg{wire: g.taken - int64(len(b)), msg: g.msgOff, n: int64(len(b))})
	g.msgOff += int64(len(b))
	if g.leaks != nil {
		if h, ok := g.leaks.Write(b); ok {
			return g.refuseLeak(h, g.msgName, g.wireOf(h.Offset))
		}
	}
	if g.dlp != nil {
		for _, m := range g.dlp.Write(b) {
			if err := g.dlpMatch(m, g.msgName, g.wireOf(m.Offset)); err != nil {
				return err
			}
		}
	}
	return nil
}

// frameEnds decides a control frame, whole, and the end of a message.
func (g *wsGuard) frameEnds() error {
	f := &g.in.f
	if g.ctrl {
		g.ctrl = false
		where := fmt.Sprintf("ws-%s-%d", wsOpName(f.op), g.n)
		if g.scan.view != nil {
			if h, ok := g.scan.view.leaks.Find(g.ctrlBuf); ok {
				return g.refuseLeak(h, where, g.ctrlAt)
			}
		}
		if g.scan.scanner != nil {
			for _, m := range g.scan.scanner.ScanString(string(g.ctrlBuf)) {
				if err := g.dlpMatch(m, where, g.ctrlAt); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if !f.fin {
		return nil
	}
	if g.dlp != nil {
		for _, m := range g.dlp.Close() {
			if err := g.dlpMatch(m, g.msgName, g.wireOf(m.Offset)); err != nil {
				return err
			}
		}
	}
	g.msg, g.leaks, g.dlp, g.segs = false, nil, nil, g.segs[:0]
	return nil
}

// forward sends upstream the guest bytes before bound that are decided:
// all but a head not yet complete, a control frame not yet complete, and
// the part of the open message from where a match could still begin.
func (g *wsGuard) forward(bound int64) error {
	limit := bound
	if g.in.midHead() {
		limit = g.headAt
	}
	if g.ctrl {
		limit = min(limit, g.ctrlAt)
	}
	if g.msg {
		safe := g.msgOff
		if g.leaks != nil {
			safe = min(safe, g.leaks.Safe())
		}
		if g.dlp != nil && g.scan.dlpBlock {
			safe = min(safe, g.dlp.Safe())
		}
		limit = min(limit, g.wireOf(safe))
	}
	if n := int(limit - g.pendAt); n > 0 {
		if _, err := g.up.Write(g.pending[:n]); err != nil {
			g.err = err
			return err
		}
		g.mu.Lock()
		g.forwarded += int64(n)
		g.mu.Unlock()
		g.pending = g.pending[:copy(g.pending, g.pending[n:])]
		g.pendAt = limit
		i := 0
		for i < len(g.segs) && g.segs[i].wire+g.segs[i].n <= limit {
			i++
		}
		g.segs = g.segs[:copy(g.segs, g.segs[i:])]
	}
	return nil
}

// wireOf is the guest stream offset of the open message's payload byte at
// off, or the end of what was taken when the message has no byte there yet.
func (g *wsGuard) wireOf(off int64) int64 {
	for _, s := range g.segs {
		if off < s.msg+s.n {
			return s.wire + max(0, off-s.msg)
		}
	}
	return g.taken
}

// refuseLeak closes the connection on a secret found in a frame.
// Bytes before at (where the frame or the match begins) that were decided
// before go on first.
func (g *wsGuard) refuseLeak(h secret.Hit, msg string, at int64) error {
	l := g.scan.view.leakOf(h, fmt.Sprintf("%s@%d", msg, h.Offset))
	var why, reason string
	if l.real {
		why = fmt.Sprintf("a WebSocket frame from the guest carries the real value of secret %s (%s, in %s); the guest was never given it, so it can only have leaked, and capsem closed the connection (1008)", l.secret.Name, l.form, l.where)
		reason = "capsem: the real value of secret " + l.secret.Name + " never leaves the sandbox"
	} else {
		why = fmt.Sprintf("a WebSocket frame from the guest carries the placeholder of secret %s (%s, in %s), which may go only to %s, not %s; capsem closed the connection (1008)", l.secret.Name, l.form, l.where, strings.Join(l.secret.Hosts, ", "), g.scan.host)
		reason = "capsem: secret " + l.secret.Name + " may not go to " + g.scan.host
	}
	g.record(true, l.reason(), l.secret.Name, why)
	return g.refuse(wsClosePolicyViolation, reason, at)
}

// dlpMatch closes the connection on a credential with [dlp] block, and
// notes it otherwise; at is as for refuseLeak.
func (g *wsGuard) dlpMatch(m dlp.Match, msg string, at int64) error {
	if exemptValue(g.scan.exempt, m.Value) {
		return nil
	}
	where := fmt.Sprintf("%s@%d", msg, m.Offset)
	why := fmt.Sprintf("a WebSocket frame from the guest carries what looks like a credential (detector %s, in %s), and this sandbox's [dlp] action is ", m.Detector, where)
	if g.scan.dlpBlock {
		g.record(true, ReasonDLPMatch, m.Detector+"@"+where, why+`"block": capsem closed the connection (1008)`)
		return g.refuse(wsClosePolicyViolation, "capsem: a credential ("+m.Detector+") may not be sent", at)
	}
	if g.logged < wsMaxLogged {
		g.logged++
		why += `"log": the frame went on`
		if g.logged == wsMaxLogged {
			why += "; later matches on this connection are not recorded"
		}
		g.record(false, ReasonDLPMatch, m.Detector+"@"+where, why)
	}
	return nil
}

// refuse closes the connection: the decided bytes before upTo go on (the
// frames before the one refused), nothing more, and the guest gets a close
// frame with code and reason, when the upstream's frames leave room for
// one. It returns once the frame is on its way (or wsCloseWait has
// passed), so that the reverse proxy, which ends the connection when this
// copy ends, does not cut it off.
func (g *wsGuard) refuse(code uint16, reason string, upTo int64) error {
	g.forward(upTo) // an upstream that fails now changes nothing
	g.err = errWSRefused
	g.pending = nil
	g.mu.Lock()
	g.refused = true
	g.closing = wsCloseFrame(code, reason)
	wait := !g.readDone
	g.mu.Unlock()
	// Closing the upstream also ends a Read blocked on it, which then
	// gives the guest the close frame.
	g.closeUp()
	if wait {
		t := time.NewTimer(wsCloseWait)
		select {
		case <-g.sent:
		case <-t.C:
		}
		t.Stop()
	}
	return g.err
}

// Read gives the guest the upstream's bytes as they are; once the guard
// refused, the close frame, then the end.
func (g *wsGuard) Read(p []byte) (int, error) {
	g.mu.Lock()
	if g.refused {
		defer g.mu.Unlock()
		return g.deliverClose(p)
	}
	g.mu.Unlock()
	n, err := g.up.Read(p)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.out.follow(p[:n])
	g.received += int64(n)
	if err != nil {
		if g.refused {
			if n > 0 {
				return n, nil // the close frame comes with the next Read
			}
			return g.deliverClose(p)
		}
		g.readDone = true
	}
	return n, err
}

// deliverClose gives p the rest of the close frame, or ends the stream.
// A close frame may only go between the upstream's frames: in the middle
// of one it would be read as payload, so then the guest gets none.
func (g *wsGuard) deliverClose(p []byte) (int, error) {
	if len(g.closing) > 0 && g.out.atBoundary() {
		n := copy(p, g.closing)
		g.closing = g.closing[n:]
		return n, nil
	}
	// The reverse proxy reads again only after it wrote what the last
	// Read gave: the close frame has reached the guest's connection.
	g.closing = nil
	g.readDone = true
	g.sentOnce.Do(func() { close(g.sent) })
	return 0, io.EOF
}

func (g *wsGuard) closeUp() {
	g.upOnce.Do(func() { g.up.Close() })
}

// Close closes the upstream connection.
func (g *wsGuard) Close() error {
	g.closeUp()
	return nil
}
