package store

// DNS events: field numbers 16–63. They are on disk in every store (see
// the format in codec.go): never change or reuse one; a new field takes
// the next number and becomes dnsKnown.
const (
	fDNSQName         = 16
	fDNSQType         = 17
	fDNSTransport     = 18
	fDNSDecision      = 19
	fDNSReason        = 20
	fDNSMatchedRule   = 21
	fDNSAnswer        = 22
	fDNSResolverAsked = 23
	fDNSCount         = 24
)

// The DNS block (lo inclusive, hi exclusive) and the highest number this
// build knows in it.
const dnsLo, dnsHi, dnsKnown = 16, 64, fDNSCount

func (d *DNS) appendTo(b []byte) []byte {
	b = appendString(b, fDNSQName, d.QName)
	b = appendString(b, fDNSQType, d.QType)
	b = appendString(b, fDNSTransport, string(d.Transport))
	b = appendString(b, fDNSDecision, string(d.Decision))
	b = appendString(b, fDNSReason, d.Reason)
	b = appendString(b, fDNSMatchedRule, d.MatchedRule)
	b = appendString(b, fDNSAnswer, d.Answer)
	b = appendAddr(b, fDNSResolverAsked, d.ResolverAsked)
	b = appendInt(b, fDNSCount, d.Count)
	return b
}

func (d *DNS) setField(f field) error {
	switch f.num {
	case fDNSQName:
		return setString(&f, &d.QName)
	case fDNSQType:
		return setString(&f, &d.QType)
	case fDNSTransport:
		return setIntern(&f, &d.Transport, transports)
	case fDNSDecision:
		return setIntern(&f, &d.Decision, decisions)
	case fDNSReason:
		return setString(&f, &d.Reason)
	case fDNSMatchedRule:
		return setString(&f, &d.MatchedRule)
	case fDNSAnswer:
		return setString(&f, &d.Answer)
	case fDNSResolverAsked:
		return setAddr(&f, &d.ResolverAsked)
	case fDNSCount:
		return setInt(&f, &d.Count)
	}
	return nil
}
