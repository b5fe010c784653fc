package netstack

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/dns/dnsmessage"
	"gvisor.dev/gvisor/pkg/tcpip"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// dnsTTL is the TTL of synthetic answers. Addresses are stable for the whole
// session, so a long TTL is safe.
const dnsTTL = 300

// FakeDNS hands out one synthetic address from 198.19.0.0/16 per allowed
// name, stable for the life of the stack (policy reloads included), and maps
// addresses back to names when the guest dials them. It never asks a real
// resolver anything.
type FakeDNS struct {
	mu     sync.Mutex
	byName map[string]netip.Addr
	byAddr map[netip.Addr]string
	next   uint32 // offset into the pool of the next address to hand out
}

// NewFakeDNS returns an empty table.
func NewFakeDNS() *FakeDNS {
	return &FakeDNS{byName: map[string]netip.Addr{}, byAddr: map[netip.Addr]string{}, next: 1}
}

// poolSize excludes the network (.0.0) and broadcast (.255.255) addresses.
const poolSize = 1<<16 - 1

// AddrFor returns the synthetic address for name, allocating one if needed.
// ok is false when the pool is exhausted.
func (d *FakeDNS) AddrFor(name string) (netip.Addr, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a, ok := d.byName[name]; ok {
		return a, true
	}
	if d.next >= poolSize {
		return netip.Addr{}, false
	}
	base := PoolPrefix.Addr().As4()
	n := binary.BigEndian.Uint32(base[:]) + d.next
	d.next++
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], n)
	a := netip.AddrFrom4(b)
	d.byName[name] = a
	d.byAddr[a] = name
	return a, true
}

// NameOf returns the name a synthetic address was handed out for.
func (d *FakeDNS) NameOf(a netip.Addr) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n, ok := d.byAddr[a]
	return n, ok
}

var errNoReply = errors.New("dns: no reply for this message")

// Answer builds the reply to one DNS query under pol. It never consults a
// real resolver. It returns errNoReply for messages that get no answer at
// all (responses, messages too short to carry an ID); ev describes the
// decision in every case.
func (d *FakeDNS) Answer(query []byte, pol *policy.Policy) (reply []byte, ev store.DNS, err error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		ev.Decision, ev.Reason = store.Denied, ReasonMalformedDNS
		return nil, ev, errNoReply
	}
	if h.Response {
		ev.Decision, ev.Reason = store.Denied, ReasonMalformedDNS
		return nil, ev, errNoReply
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	if h.OpCode != 0 {
		ev.Decision, ev.Reason = store.Denied, ReasonDNSNotSupported
		rh.RCode = dnsmessage.RCodeNotImplemented
		return buildDNS(rh, nil, nil), ev, nil
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		ev.Decision, ev.Reason = store.Denied, ReasonMalformedDNS
		rh.RCode = dnsmessage.RCodeFormatError
		return buildDNS(rh, nil, nil), ev, nil
	}
	q := qs[0]
	name := normalizeName(q.Name.String())
	ev.QName = name
	ev.QType = typeName(q.Type)
	if q.Class != dnsmessage.ClassINET {
		ev.Decision, ev.Reason = store.Denied, ReasonDNSClassNotIN
		rh.RCode = dnsmessage.RCodeRefused
		return buildDNS(rh, &q, nil), ev, nil
	}
	dec := pol.DecideName(name)
	ev.MatchedRule = dec.Rule
	if !dec.Allowed {
		ev.Decision, ev.Reason = store.Denied, ReasonDNSDeniedName
		rh.RCode = dnsmessage.RCodeNameError
		return buildDNS(rh, &q, nil), ev, nil
	}
	ev.Decision = store.Allowed
	rh.Authoritative = true
	if q.Type != dnsmessage.TypeA {
		ev.Reason = ReasonDNSEmptyAnswer
		return buildDNS(rh, &q, nil), ev, nil
	}
	a, ok := d.AddrFor(name)
	if !ok {
		ev.Decision, ev.Reason = store.Denied, ReasonPoolExhausted
		rh.RCode = dnsmessage.RCodeServerFailure
		rh.Authoritative = false
		return buildDNS(rh, &q, nil), ev, nil
	}
	ev.Reason = ReasonDNSAllowedName
	ev.Answer = a.String()
	return buildDNS(rh, &q, &a), ev, nil
}

func buildDNS(h dnsmessage.Header, q *dnsmessage.Question, a *netip.Addr) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 128), h)
	b.EnableCompression()
	if q != nil {
		if err := b.StartQuestions(); err != nil {
			return nil
		}
		if err := b.Question(*q); err != nil {
			return nil
		}
		if a != nil {
			if err := b.StartAnswers(); err != nil {
				return nil
			}
			rh := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL}
			if err := b.AResource(rh, dnsmessage.AResource{A: a.As4()}); err != nil {
				return nil
			}
		}
	}
	out, err := b.Finish()
	if err != nil {
		return nil
	}
	return out
}

func normalizeName(n string) string {
	return strings.ToLower(strings.TrimSuffix(n, "."))
}

func typeName(t dnsmessage.Type) string {
	return strings.TrimPrefix(t.String(), "Type")
}

// serveUDPDNS answers a UDP query sent to dst:53 from the guest's sport,
// from dst itself: whatever resolver the guest asked, capsem answers.
func (s *Stack) serveUDPDNS(dst tcpip.Address, sport uint16, payload []byte) {
	s.stats.DNSQueries.Add(1)
	reply, ev := s.answerDNS(payload, addrOf(dst), store.TransportUDP)
	if reply == nil {
		return
	}
	if len(reply) > 512 {
		reply = truncateDNS(reply)
	}
	out := appendUDPFrame(make([]byte, 0, 64+len(reply)), s.guestLink(), s.link.mac,
		dst, guestAddr, udpPortDNS, sport, reply)
	if err := s.link.writeFrame(out); err != nil {
		s.log.Warn("dns reply not sent", "err", err, "qname", ev.QName)
	}
}

// answerDNS answers one query and records the decision.
func (s *Stack) answerDNS(query []byte, resolver netip.Addr, transport store.Transport) ([]byte, store.DNS) {
	reply, ev, err := s.dns.Answer(query, s.policy.Load())
	ev.ResolverAsked = resolver
	ev.Transport = transport
	if ev.Decision == store.Allowed {
		s.stats.DNSAllowed.Add(1)
	} else {
		s.stats.DNSDenied.Add(1)
	}
	s.cfg.Recorder.Append(store.Event{Kind: store.KindDNS, DNS: &ev})
	if err != nil {
		return nil, ev
	}
	return reply, ev
}

// truncateDNS keeps only the header with TC set, telling the client to
// retry over TCP. Capsem's answers never get this big; this is a guard.
func truncateDNS(reply []byte) []byte {
	out := append([]byte(nil), reply[:12]...)
	out[2] |= 0x02
	for i := 4; i < 12; i++ {
		out[i] = 0
	}
	return out
}

// serveTCPDNS answers length-prefixed queries on a TCP connection the guest
// opened to any address on port 53.
func (s *Stack) serveTCPDNS(c net.Conn, resolver netip.Addr) {
	defer c.Close()
	var lenBuf [2]byte
	buf := make([]byte, 0, 512)
	for {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, lenBuf[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(lenBuf[:]))
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		s.stats.DNSQueries.Add(1)
		reply, _ := s.answerDNS(buf, resolver, store.TransportTCP)
		if reply == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(reply)), uint16(len(reply)))
		out = append(out, reply...)
		c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}
