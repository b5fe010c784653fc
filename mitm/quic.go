package mitm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/capsem/capsem/mitm/internal/quicpeek"
	"github.com/capsem/capsem/mitm/upstream"
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/store"
)

// QUIC limits of an intercepted flow. A guest's HTTP/3 connection is one
// flow (netstack keys QUIC flows by the guest's port and the name's
// address); these keep what one flow can make the host hold small, like
// the HTTP/2 server's defaults for TCP.
const (
	// quicMaxStreams bounds the guest's concurrent request streams, as
	// for HTTP/2 (limits.go).
	quicMaxStreams = maxGuestStreams
	// quicStreamWindow and quicConnWindow bound what the guest may send
	// before capsem reads it — what one flow can park on the host when its
	// upstream stalls. quic-go grows the windows up to these as the reader
	// keeps up; its own maxima (6 and 15 MiB) would let MaxFlows stalled
	// flows hold ~60 GiB, where a guest HTTP/2 connection holds at most
	// 1 MiB (http2.Server's default). 1 and 2 MiB keep it near that. They
	// bound uploads only: a download is paced by the guest's windows.
	quicStreamWindow = 1 << 20
	quicConnWindow   = 2 << 20
	// quicIdle ends a connection nothing moved on for this long.
	quicIdle = 30 * time.Second
	// quicPeekTimeout bounds the wait for the guest's ClientHello: a client
	// sends its first flight back to back, so a flow still without one
	// after this is likelier a flood's, and frees its handshake slot (the
	// netstack's window is the same 3 s) and its buffers.
	quicPeekTimeout = 3 * time.Second
	// quicMaxDatagram is the largest guest datagram the peek reads whole:
	// QUIC clients size their Initials to the path MTU they assume (1,200
	// to 1,500 bytes); a larger one is cut and fails the peek, and the
	// client falls back to TCP.
	quicMaxDatagram = 4 << 10
)

// HandleQUIC is the netstack.DatagramFlowHandler: it intercepts a guest's
// QUIC flow to an allowed name on port 443 as HandleFlow does TLS over
// TCP. It reads the guest's Initials (package quicpeek) and refuses the
// flow — the netstack answers ICMP port unreachable, so the client falls
// back to TCP at once — when there is no SNI, the SNI is not the name the
// guest resolved, or the name is under [tls] passthrough (a QUIC flow
// cannot be spliced: capsem dials its upstreams over TCP). Otherwise it
// terminates QUIC with a leaf minted for the name (TLS 1.3, ALPN h3, no
// 0-RTT: early data is replayable) and serves HTTP/3 into the same request
// path as HTTP/1.1 and HTTP/2 (serveHTTP), forwarding upstream over HTTP/3
// when the upstream answers QUIC, else over TCP (package upstream).
func (p *Proxy) HandleQUIC(ctx context.Context, pc net.PacketConn, f *netstack.Flow) (res netstack.FlowResult) {
	res.ConnType = store.ConnQUIC
	if !p.intercepts(f.Port) || f.Local && p.cfg.MCPGateway == nil {
		// As HandleFlow would not intercept it; over TCP the guest gets
		// a splice or a refusal it can act on.
		res.Refused, res.Err = netstack.ReasonQUICUnserved, fmt.Errorf("this MITM does not serve QUIC to %s:%d", f.Name, f.Port)
		return res
	}
	held, guest, hello, err := peekInitials(pc)
	for _, d := range held {
		res.BytesSent += int64(len(d))
	}
	switch {
	case err != nil:
		res.Refused, res.Err = ReasonBadHello, fmt.Errorf("no QUIC ClientHello from the guest: %w", err)
		return res
	case hello.ServerName == "":
		res.Refused, res.Err = ReasonNoSNI, errors.New("the QUIC ClientHello names no server (SNI); capsem needs it to check the name the guest resolved")
		return res
	case hello.ServerName != strings.ToLower(f.Name):
		res.Refused, res.Err = ReasonSNIMismatch, fmt.Errorf("the QUIC ClientHello names %q but the guest sent it to the address of %q", hello.ServerName, f.Name)
		return res
	}
	pol := f.Current()
	if rule, ok := pol.Passthrough(hello.ServerName); ok {
		res.Refused, res.Err = ReasonQUICPassthrough, fmt.Errorf("%s is under [tls] passthrough (%s), which capsem splices over TCP only", hello.ServerName, rule)
		return res
	}
	roots, err := p.up.Roots(pol)
	if err != nil {
		// Refused, so that the guest falls back to TCP at once (where the
		// same error answers its requests) instead of waiting out its
		// handshake.
		res.Refused, res.Err = ReasonUpstreamError, err
		return res
	}

	rc := &replayConn{PacketConn: pc, held: held, guest: guest}
	defer func() {
		res.BytesSent, res.BytesReceived = rc.read.Load(), rc.written.Load()
	}()
	tr := &quic.Transport{Conn: rc}
	defer tr.Close()
	sni := hello.ServerName
	// One connection per flow, with the SNI the peek read. Every Initial
	// with a new connection ID would start a handshake of its own (quic-go
	// caps none per transport), and a ClientHello built from packets the
	// peek and quic-go read differently (a repeated packet number: quic-go
	// drops it, the peek does not) could name another server: both are
	// refused at the ClientHello, before a handshake holds anything.
	var helloTaken, sniDiffers atomic.Bool
	ln, err := tr.Listen(guestKeyExchange(&tls.Config{
		MinVersion: tls.VersionTLS13,
		NextProtos: []string{http3.NextProtoH3},
		GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
			if !strings.EqualFold(chi.ServerName, sni) {
				sniDiffers.Store(true)
				return nil, fmt.Errorf("mitm: the QUIC handshake names %q, the peek read %q", chi.ServerName, sni)
			}
			if !helloTaken.CompareAndSwap(false, true) {
				return nil, errors.New("mitm: one QUIC connection per flow")
			}
			return nil, nil
		},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.cfg.CA.Leaf(sni)
		},
	}), &quic.Config{
		HandshakeIdleTimeout:           HelloTimeout,
		MaxIdleTimeout:                 quicIdle,
		MaxIncomingStreams:             quicMaxStreams,
		MaxIncomingUniStreams:          16, // HTTP/3 needs three (control, QPACK encoder and decoder)
		MaxStreamReceiveWindow:         quicStreamWindow,
		MaxConnectionReceiveWindow:     quicConnWindow,
		InitialStreamReceiveWindow:     512 << 10,
		InitialConnectionReceiveWindow: 1 << 20,
		InitialPacketSize:              quicPacketSize(f.MaxDatagram),
		Allow0RTT:                      false,
	})
	if err != nil {
		res.Err = fmt.Errorf("QUIC listener: %w", err)
		return res
	}
	defer ln.Close()
	hctx, cancel := context.WithTimeout(ctx, HelloTimeout)
	conn, err := ln.Accept(hctx)
	cancel()
	ln.Close() // the flow's one connection is accepted: no other is served
	if err != nil {
		if sniDiffers.Load() {
			res.Refused = ReasonSNIMismatch
		}
		res.Err = fmt.Errorf("QUIC handshake with the guest (does it trust the capsem CA?): %w", err)
		return res
	}
	f.Established()

	fs := &flowState{flow: f, sni: sni, held: holdBudget{max: maxHeldPerFlow}}
	// Upstream over HTTP/3 when the upstream answers QUIC, else over TCP,
	// HTTP/2 when the upstream speaks it: the guest's concurrent HTTP/3
	// streams share one upstream connection, as an HTTP/2 guest's do.
	p.serveFlow(fs, upstream.GuestH3, nil, roots)
	defer func() {
		fs.active.Wait()
		fs.forward.Close()
	}()
	srv := &http3.Server{
		Handler:        http.HandlerFunc(p.serveHTTP),
		MaxHeaderBytes: 1 << 20,
		IdleTimeout:    quicIdle,
		Logger:         p.log,
		ConnContext: func(ctx context.Context, _ *quic.Conn) context.Context {
			return context.WithValue(ctx, flowKey{}, fs)
		},
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeQUICConn(conn) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		conn.CloseWithError(0, "capsem: the flow ended")
		err = <-done
	}
	if err != nil && !isQUICClose(err) {
		res.Err = err
	}
	return res
}

// peekInitials reads the guest's datagrams until its ClientHello is whole,
// within HelloTimeout and quicpeek's bounds, and returns them to be replayed
// to the QUIC server.
func peekInitials(pc net.PacketConn) (held [][]byte, guest net.Addr, hello *quicpeek.Hello, err error) {
	peek := quicpeek.New()
	pc.SetReadDeadline(time.Now().Add(quicPeekTimeout))
	defer pc.SetReadDeadline(time.Time{})
	buf := make([]byte, quicMaxDatagram)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return held, guest, nil, err
		}
		guest = addr
		d := append([]byte(nil), buf[:n]...)
		held = append(held, d)
		done, err := peek.Add(d)
		if err != nil {
			return held, guest, nil, err
		}
		if done {
			return held, guest, peek.Hello(), nil
		}
	}
}

// isQUICClose reports whether err is a connection's ordinary end: the
// guest closed it, or it went idle.
func isQUICClose(err error) bool {
	var app *quic.ApplicationError
	var idle *quic.IdleTimeoutError
	return errors.As(err, &app) || errors.As(err, &idle) || errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed)
}

// replayConn is the flow's PacketConn with the datagrams the peek read
// handed out again first, and the bytes both ways counted.
type replayConn struct {
	net.PacketConn
	guest         net.Addr // where the held datagrams came from
	mu            sync.Mutex
	held          [][]byte
	read, written atomic.Int64
}

func (c *replayConn) ReadFrom(b []byte) (int, net.Addr, error) {
	c.mu.Lock()
	if len(c.held) > 0 {
		d := c.held[0]
		c.held = c.held[1:]
		c.mu.Unlock()
		c.read.Add(int64(len(d)))
		return copy(b, d), c.guest, nil
	}
	c.mu.Unlock()
	n, addr, err := c.PacketConn.ReadFrom(b)
	c.read.Add(int64(n))
	return n, addr, err
}

func (c *replayConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	n, err := c.PacketConn.WriteTo(b, addr)
	c.written.Add(int64(n))
	return n, err
}

// SetReadBuffer and SetWriteBuffer do nothing: the flow has no socket
// buffer to size (the netstack's per-flow queue is bounded on its own).
// quic-go asks for them on every connection it serves, and logs a warning
// to the standard logger when a PacketConn lacks them.
func (c *replayConn) SetReadBuffer(int) error  { return nil }
func (c *replayConn) SetWriteBuffer(int) error { return nil }

// quicPacketSize is the size of the MITM's QUIC packets to the guest: as
// large as its link carries. quic-go grows packets from 1,280 bytes only
// by path MTU discovery, which needs a socket to set Don't Fragment on,
// and a flow's PacketConn is not one: every packet stayed at 1,280 bytes
// (~1.25 KB of data) where a TCP segment on the same link carries 1,448.
// quic-go caps it at 1,452; below 1,200 (a link too small for QUIC) it is
// left to quic-go.
func quicPacketSize(maxDatagram int) uint16 {
	if maxDatagram < 1200 {
		return 0
	}
	return uint16(min(maxDatagram, 1452))
}
