package netstack

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"

	"golang.org/x/net/dns/dnsmessage"
	"gvisor.dev/gvisor/pkg/tcpip"

	"github.com/capsem/capsem/ask"
	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

// dnsTTL is the TTL of synthetic answers. An address stays with its name
// until the pool runs out (dnspool.go); only then is the least recently
// used address without a live flow given to another name.
const dnsTTL = 300

var errNoReply = errors.New("dns: no reply for this message")

// Answer builds the reply to one DNS query under pol. It never consults a
// real resolver. It returns errNoReply for messages that get no answer at
// all (responses, messages too short to carry an ID); ev describes the
// decision in every case.
func (d *FakeDNS) Answer(query []byte, pol *policy.Policy) (reply []byte, ev store.DNS, err error) {
	return d.answer(query, pol, nil, nil)
}

// askFunc holds a query while a person is asked about its name (Stack.ask).
type askFunc func(ask.Question, *policy.Policy) (*policy.Policy, ask.Outcome)

// answer is Answer with admit, when not nil, asked before any allowed
// answer: an error refuses the query with SERVFAIL (fail closed: no name
// resolves while its event cannot be recorded); and with asker, when not
// nil, asked about a name the policy says to ask about.
func (d *FakeDNS) answer(query []byte, pol *policy.Policy, admit func() error, asker askFunc) (reply []byte, ev store.DNS, err error) {
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
	refuse := func(reason string, rcode dnsmessage.RCode, q *dnsmessage.Question) ([]byte, store.DNS, error) {
		ev.Decision, ev.Reason = store.Denied, reason
		rh.RCode, rh.Authoritative = rcode, false
		ev.Answer = rcodeName(rcode)
		return buildDNS(rh, q, nil), ev, nil
	}
	if h.OpCode != 0 {
		return refuse(ReasonDNSNotSupported, dnsmessage.RCodeNotImplemented, nil)
	}
	qs, err := p.AllQuestions()
	if err != nil || len(qs) != 1 {
		return refuse(ReasonMalformedDNS, dnsmessage.RCodeFormatError, nil)
	}
	q := qs[0]
	name := presentName(q.Name.String())
	ev.QName = name
	ev.QType = typeName(q.Type)
	if q.Class != dnsmessage.ClassINET {
		return refuse(ReasonDNSClassNotIN, dnsmessage.RCodeRefused, &q)
	}
	dec := pol.DecideName(name)
	ev.MatchedRule = dec.Rule
	var asked *ask.Outcome
	if !dec.Allowed && dec.Ask && asker != nil {
		canon, _ := policy.Canonical(name) // valid: the policy asks only about host names
		aq := ask.Network(canon, 0)
		granted, out := asker(aq, pol)
		if out.By != "" {
			ev.MatchedRule = out.Rule(aq)
		}
		if !out.Allowed {
			return refuse(out.Reason, dnsmessage.RCodeNameError, &q)
		}
		pol, asked = granted, &out
		dec = pol.DecideName(name)
	}
	if !dec.Allowed {
		reason := ReasonDNSDeniedName
		switch dec.Reason {
		case policy.ReasonInvalidName:
			reason = ReasonDNSInvalidName
		case policy.ReasonSecretWrongHost:
			reason = ReasonDNSSecretInName
		}
		return refuse(reason, dnsmessage.RCodeNameError, &q)
	}
	if admit != nil {
		if err := admit(); err != nil {
			return refuse(ReasonStoreDown, dnsmessage.RCodeServerFailure, &q)
		}
	}
	if q.Type != dnsmessage.TypeA {
		ev.Decision, ev.Reason = store.Allowed, ReasonDNSEmptyAnswer
		rh.Authoritative = true
		ev.Answer = rcodeName(dnsmessage.RCodeSuccess)
		return buildDNS(rh, &q, nil), ev, nil
	}
	// The policy names the entry that allowed the name: "*.x" (with or
	// without a port) for a wildcard, the name itself otherwise, after
	// GrantRule when a person allowed it.
	wildcard := strings.HasPrefix(strings.TrimPrefix(dec.Rule, policy.GrantRule), "*.")
	a, res := d.AddrFor(name, wildcard, pol.MaxWildcardNames())
	switch res {
	case allocCapped:
		// NXDOMAIN, as for a denied name: this session will not resolve
		// the name, and a client asked REFUSED would retry every other
		// resolver it knows (all of which are capsem).
		return refuse(ReasonWildcardCap, dnsmessage.RCodeNameError, &q)
	case allocExhausted:
		return refuse(ReasonPoolExhausted, dnsmessage.RCodeServerFailure, &q)
	}
	ev.Decision, ev.Reason = store.Allowed, ReasonDNSAllowedName
	if asked != nil {
		ev.Reason = asked.Reason
	}
	rh.Authoritative = true
	ev.Answer = a.String()
	return buildDNS(rh, &q, &a), ev, nil
}

// rcodeName is what dns_events.answer says when the guest got no address:
// the RCODE's name, as dig prints it.
func rcodeName(r dnsmessage.RCode) string {
	switch r {
	case dnsmessage.RCodeSuccess:
		return "NOERROR"
	case dnsmessage.RCodeFormatError:
		return "FORMERR"
	case dnsmessage.RCodeServerFailure:
		return "SERVFAIL"
	case dnsmessage.RCodeNameError:
		return "NXDOMAIN"
	case dnsmessage.RCodeNotImplemented:
		return "NOTIMP"
	case dnsmessage.RCodeRefused:
		return "REFUSED"
	}
	return "RCODE" + strconv.Itoa(int(r))
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

func typeName(t dnsmessage.Type) string {
	return strings.TrimPrefix(t.String(), "Type")
}

// serveUDPDNS answers a UDP query sent to dst:53 from the guest's sport,
// from dst itself: whatever resolver the guest asked, capsem answers.
func (s *Stack) serveUDPDNS(dst tcpip.Address, sport uint16, payload []byte) {
	if s.cfg.Asker != nil && s.policy.Load().AskNetwork() {
		// A query may be held while a person is asked: off the frame
		// loop, which the guest's other traffic goes through.
		if !s.flowStart() {
			return
		}
		payload = append([]byte(nil), payload...) // the frame's buffer is reused
		go func() {
			defer s.flowsWG.Done()
			s.replyUDPDNS(dst, sport, payload)
		}()
		return
	}
	s.replyUDPDNS(dst, sport, payload)
}

// replyUDPDNS answers one UDP query and sends the reply.
func (s *Stack) replyUDPDNS(dst tcpip.Address, sport uint16, payload []byte) {
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

// answerDNS answers one query and records the decision (rate-limited per
// reason, every query counted).
func (s *Stack) answerDNS(query []byte, resolver netip.Addr, transport store.Transport) ([]byte, store.DNS) {
	pol := s.policy.Load()
	reply, ev, _ := s.dns.answer(query, pol, s.admit, s.ask) // reply is nil when err is set
	ev.ResolverAsked = resolver
	ev.Transport = transport
	if ev.Decision == store.Allowed {
		s.stats.DNSAllowed.Add(1)
	} else {
		s.stats.DNSDenied.Add(1)
	}
	if ev.Reason == ReasonStoreDown {
		s.stats.StoreRefusals.Add(1)
	}
	if ev.Reason == ReasonWildcardCap && s.wildCapWarned.CompareAndSwap(false, true) {
		s.log.Warn("the guest asked for more distinct names under wildcard entries than the policy allows in one session; "+
			"further new names get NXDOMAIN (raise [dns] max_wildcard_names in the policy if this session needs more)",
			"max_wildcard_names", pol.MaxWildcardNames(), "qname", ev.QName)
	}
	s.dnsLog.record(&ev)
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
