package ports

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"syscall"

	"github.com/capsem/capsem/netstack"
)

// Carrier carries a connection accepted on a published port into the
// guest and records it; netstack.Stack is one (through the sandbox).
type Carrier interface {
	Inbound(ctx context.Context, client net.Conn, in netstack.Inbound) error
}

// Publisher holds a sandbox's published ports: a listener each.
// Connections are accepted only once Attach gave it the carrier; before
// that they wait in the listener's backlog, so that ports can be taken
// (and a port in use refused) before the guest boots.
type Publisher struct {
	log      *slog.Logger
	ctx      context.Context
	cancel   context.CancelFunc
	attached chan struct{}
	carrier  Carrier

	mu      sync.Mutex
	closed  bool
	entries []*entry
}

// entry is one published port: the spec as asked for, and the one in
// force (its host port picked when asked for 0).
type entry struct {
	asked, spec Spec
	ln          net.Listener
	cancel      context.CancelFunc // ends its connections
	wg          sync.WaitGroup
}

// New returns an empty Publisher; log may be nil.
func New(log *slog.Logger) *Publisher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Publisher{log: log, ctx: ctx, cancel: cancel, attached: make(chan struct{})}
}

// Attach sets the carrier and lets the listeners accept. Once only.
func (p *Publisher) Attach(c Carrier) {
	p.carrier = c
	close(p.attached)
}

// ErrNotPublished wraps the error of a Remove of a port that is not
// published.
var ErrNotPublished = errors.New("ports: not published")

// ErrInUse wraps the error of an Add whose host port is taken.
var ErrInUse = errors.New("ports: the host port is in use")

// Add listens on spec's host address and returns the spec in force (with
// the host port picked for 0). The same host port published twice by
// this sandbox, or taken by another program or sandbox, is an error that
// says so.
func (p *Publisher) Add(asked Spec) (Spec, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return Spec{}, errors.New("ports: the sandbox is stopping")
	}
	inForce := make([]Spec, len(p.entries))
	for i, e := range p.entries {
		inForce[i] = e.spec
	}
	if q, taken := Taken(inForce, asked); taken {
		return Spec{}, fmt.Errorf("ports: %s is published already (to guest port %d)", q.HostAddr(), q.GuestPort)
	}
	ln, err := net.Listen("tcp", asked.HostAddr().String())
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return Spec{}, fmt.Errorf("%w: %s (another sandbox or program listens there): publish another host port, or 0 for a free one", ErrInUse, asked.HostAddr())
		}
		return Spec{}, fmt.Errorf("ports: listen on %s: %w", asked.HostAddr(), err)
	}
	spec := asked
	if ta, ok := ln.Addr().(*net.TCPAddr); ok {
		spec.HostPort = uint16(ta.Port)
	}
	ctx, cancel := context.WithCancel(p.ctx)
	e := &entry{asked: asked, spec: spec, ln: ln, cancel: cancel}
	p.entries = append(p.entries, e)
	e.wg.Add(1)
	go p.accept(ctx, e)
	p.log.Info("port published", "spec", spec.String())
	return spec, nil
}

// accept takes e's connections, once attached, until its listener closes.
func (p *Publisher) accept(ctx context.Context, e *entry) {
	defer e.wg.Done()
	select {
	case <-p.attached:
	case <-ctx.Done():
		return
	}
	rule, detail := e.spec.String(), "published on "+e.spec.HostAddr().String()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			if ctx.Err() == nil && !errors.Is(err, net.ErrClosed) {
				p.log.Warn("a published port stopped accepting", "spec", rule, "err", err)
			}
			return
		}
		peer := netip.AddrPort{}
		if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			peer = ta.AddrPort()
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			if err := p.carrier.Inbound(ctx, c, netstack.Inbound{Port: e.spec.GuestPort, Peer: peer, Rule: rule, Detail: detail}); err != nil {
				p.log.Debug("a connection to a published port was refused", "spec", rule, "err", err)
			}
		}()
	}
}

// Remove unpublishes the port spec names (Spec.Names: its host address
// and port in force, or the spec it was published as, such as one with
// host port 0), closing its listener and its connections.
func (p *Publisher) Remove(spec Spec) (Port, error) {
	p.mu.Lock()
	i := slices.IndexFunc(p.entries, func(e *entry) bool { return e.spec.Names(spec) || e.asked.Names(spec) })
	if i < 0 {
		p.mu.Unlock()
		return Port{}, fmt.Errorf("%w: %s (capsem port NAME ls lists what is)", ErrNotPublished, spec)
	}
	e := p.entries[i]
	p.entries = slices.Delete(p.entries, i, i+1)
	p.mu.Unlock()
	e.close()
	p.log.Info("port unpublished", "spec", e.spec.String())
	return Port{Spec: e.spec, Asked: e.asked}, nil
}

func (e *entry) close() {
	e.ln.Close()
	e.cancel()
	e.wg.Wait()
}

// Port is a published port: the spec in force and the one asked for
// (which the settings keep: its host port 0 takes a free one again at the
// next start).
type Port struct {
	Spec, Asked Spec
}

// List is what is published, in the order it was.
func (p *Publisher) List() []Port {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Port, len(p.entries))
	for i, e := range p.entries {
		out[i] = Port{Spec: e.spec, Asked: e.asked}
	}
	return out
}

// Close unpublishes everything: the listeners close with the sandbox.
func (p *Publisher) Close() {
	p.mu.Lock()
	p.closed = true
	all := p.entries
	p.entries = nil
	p.mu.Unlock()
	p.cancel()
	for _, e := range all {
		e.close()
	}
}
