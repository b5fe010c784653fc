package netstack

import (
	"net/netip"
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/store"
)

func mustPolicy(t testing.TB, text string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("test.toml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func query(t testing.TB, name string, typ dnsmessage.Type) []byte {
	t.Helper()
	b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 0x4242, RecursionDesired: true})
	b.StartQuestions()
	b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: typ, Class: dnsmessage.ClassINET})
	out, err := b.Finish()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func parseReply(t *testing.T, b []byte) (dnsmessage.Header, []dnsmessage.Resource) {
	t.Helper()
	var p dnsmessage.Parser
	h, err := p.Start(b)
	if err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	if _, err := p.AllQuestions(); err != nil {
		t.Fatal(err)
	}
	ans, err := p.AllAnswers()
	if err != nil {
		t.Fatal(err)
	}
	return h, ans
}

const dnsTestPolicy = `
[network]
allow = ["api.example.com", "*.cdn.example", "alt.example:8080"]
deny = ["bad.cdn.example"]
`

func TestFakeDNSAnswers(t *testing.T) {
	pol := mustPolicy(t, dnsTestPolicy)
	d := NewFakeDNS()
	cases := []struct {
		name     string
		typ      dnsmessage.Type
		rcode    dnsmessage.RCode
		answers  int
		decision store.Decision
	}{
		{"api.example.com.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1, store.Allowed},
		{"API.Example.COM.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1, store.Allowed},
		{"x.y.cdn.example.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1, store.Allowed},
		{"alt.example.", dnsmessage.TypeA, dnsmessage.RCodeSuccess, 1, store.Allowed},
		{"api.example.com.", dnsmessage.TypeAAAA, dnsmessage.RCodeSuccess, 0, store.Allowed},
		{"api.example.com.", dnsmessage.TypeTXT, dnsmessage.RCodeSuccess, 0, store.Allowed},
		{"cdn.example.", dnsmessage.TypeA, dnsmessage.RCodeNameError, 0, store.Denied},
		{"bad.cdn.example.", dnsmessage.TypeA, dnsmessage.RCodeNameError, 0, store.Denied},
		{"bad.cdn.example.", dnsmessage.TypeAAAA, dnsmessage.RCodeNameError, 0, store.Denied},
		{"evil.example.", dnsmessage.TypeTXT, dnsmessage.RCodeNameError, 0, store.Denied},
		{"4.3.2.1.in-addr.arpa.", dnsmessage.TypePTR, dnsmessage.RCodeNameError, 0, store.Denied},
	}
	for _, c := range cases {
		reply, ev, err := d.Answer(query(t, c.name, c.typ), pol)
		if err != nil {
			t.Fatalf("%s %v: %v", c.name, c.typ, err)
		}
		h, ans := parseReply(t, reply)
		if h.ID != 0x4242 || !h.Response || h.RCode != c.rcode || len(ans) != c.answers {
			t.Errorf("%s %v: id %#x response %v rcode %v answers %d; want rcode %v answers %d",
				c.name, c.typ, h.ID, h.Response, h.RCode, len(ans), c.rcode, c.answers)
		}
		if ev.Decision != c.decision {
			t.Errorf("%s %v: event decision %s, want %s", c.name, c.typ, ev.Decision, c.decision)
		}
		if c.answers == 1 {
			a := netip.AddrFrom4(ans[0].Body.(*dnsmessage.AResource).A)
			if !PoolPrefix.Contains(a) || ev.Answer != a.String() {
				t.Errorf("%s: answer %s (event %q), want an address in %s", c.name, a, ev.Answer, PoolPrefix)
			}
		}
	}
	a1, _ := d.AddrFor("api.example.com", false, 10)
	a2, _ := d.AddrFor("api.example.com", false, 10)
	if a1 != a2 {
		t.Errorf("address not stable: %s, %s", a1, a2)
	}
	if n, ok := d.NameOf(a1); !ok || n != "api.example.com" {
		t.Errorf("NameOf(%s) = %q, %v", a1, n, ok)
	}
}

func TestFakeDNSRejectsOddMessages(t *testing.T) {
	pol := mustPolicy(t, dnsTestPolicy)
	d := NewFakeDNS()
	if _, _, err := d.Answer([]byte{1, 2, 3}, pol); err == nil {
		t.Error("a 3-byte message got a reply")
	}
	resp := query(t, "api.example.com.", dnsmessage.TypeA)
	resp[2] |= 0x80 // QR: a response, not a query
	if _, _, err := d.Answer(resp, pol); err == nil {
		t.Error("a response message got a reply")
	}
	notify := query(t, "api.example.com.", dnsmessage.TypeA)
	notify[2] |= 4 << 3 // opcode NOTIFY
	reply, ev, err := d.Answer(notify, pol)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := parseReply(t, reply); h.RCode != dnsmessage.RCodeNotImplemented || ev.Decision != store.Denied {
		t.Errorf("opcode NOTIFY: rcode %v decision %s", h.RCode, ev.Decision)
	}
	chaos := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7})
	chaos.StartQuestions()
	chaos.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("version.bind."), Type: dnsmessage.TypeTXT, Class: dnsmessage.ClassCHAOS})
	cq, _ := chaos.Finish()
	reply, _, _ = d.Answer(cq, pol)
	if h, _ := parseReply(t, reply); h.RCode != dnsmessage.RCodeRefused {
		t.Errorf("CHAOS query: rcode %v, want REFUSED", h.RCode)
	}
}

func TestFakeDNSAnswerSaysWhatTheGuestGot(t *testing.T) {
	pol := mustPolicy(t, dnsTestPolicy)
	d := NewFakeDNS()
	chaos := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 7})
	chaos.StartQuestions()
	chaos.Question(dnsmessage.Question{Name: dnsmessage.MustNewName("version.bind."), Type: dnsmessage.TypeTXT, Class: dnsmessage.ClassCHAOS})
	cq, _ := chaos.Finish()
	notify := query(t, "api.example.com.", dnsmessage.TypeA)
	notify[2] |= 4 << 3
	twoQuestions := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 8})
	twoQuestions.StartQuestions()
	for _, n := range []string{"a.example.", "b.example."} {
		twoQuestions.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(n), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
	}
	tq, _ := twoQuestions.Finish()
	for _, c := range []struct {
		msg            []byte
		answer, reason string
		why            string
	}{
		{query(t, "evil.example.", dnsmessage.TypeA), "NXDOMAIN", ReasonDNSDeniedName, "the schema promises NXDOMAIN for a denied name, not NULL"},
		{query(t, "api.example.com.", dnsmessage.TypeAAAA), "NOERROR", ReasonDNSEmptyAnswer, "an allowed name with no records of the type: NOERROR, no answer"},
		{cq, "REFUSED", ReasonDNSClassNotIN, "class CHAOS is refused"},
		{notify, "NOTIMP", ReasonDNSNotSupported, "opcodes other than QUERY"},
		{tq, "FORMERR", ReasonMalformedDNS, "one question per query, as every resolver sends"},
		{query(t, "-bad-.example.", dnsmessage.TypeA), "NXDOMAIN", ReasonDNSInvalidName, "not a host name: denied, and said so"},
	} {
		_, ev, err := d.Answer(c.msg, pol)
		if err != nil || ev.Answer != c.answer || ev.Reason != c.reason || ev.Decision != store.Denied && c.answer != "NOERROR" {
			t.Errorf("answer %q reason %q decision %s err %v; want %q, %q (%s)", ev.Answer, ev.Reason, ev.Decision, err, c.answer, c.reason, c.why)
		}
	}
	if _, ev, err := d.Answer([]byte{1, 2, 3}, pol); err == nil || ev.Answer != "" {
		t.Errorf("a message that gets no reply: answer %q err %v; want no answer recorded", ev.Answer, err)
	}
}

func TestFakeDNSWildcardCap(t *testing.T) {
	pol := mustPolicy(t, `[network]
allow = ["*.wild.example", "exact.example"]
[dns]
max_wildcard_names = 3
`)
	d := NewFakeDNS()
	for i, c := range []struct {
		name   string
		rcode  dnsmessage.RCode
		reason string
		why    string
	}{
		{"a.wild.example.", dnsmessage.RCodeSuccess, ReasonDNSAllowedName, "first wildcard name"},
		{"b.wild.example.", dnsmessage.RCodeSuccess, ReasonDNSAllowedName, "second"},
		{"c.wild.example.", dnsmessage.RCodeSuccess, ReasonDNSAllowedName, "third: the cap"},
		{"d.wild.example.", dnsmessage.RCodeNameError, ReasonWildcardCap, "fourth distinct name: beyond the cap, NXDOMAIN"},
		{"A.wild.example.", dnsmessage.RCodeSuccess, ReasonDNSAllowedName, "a name already answered is answered again (case is folded)"},
		{"exact.example.", dnsmessage.RCodeSuccess, ReasonDNSAllowedName, "exact names do not count against the cap"},
	} {
		reply, ev, err := d.Answer(query(t, c.name, dnsmessage.TypeA), pol)
		if err != nil {
			t.Fatal(err)
		}
		if h, _ := parseReply(t, reply); h.RCode != c.rcode || ev.Reason != c.reason {
			t.Errorf("%d %s: rcode %v reason %s; want %v %s (%s)", i, c.name, h.RCode, ev.Reason, c.rcode, c.reason, c.why)
		}
	}
	if _, ev, _ := d.Answer(query(t, "d.wild.example.", dnsmessage.TypeA), pol); ev.Answer != "NXDOMAIN" || ev.Decision != store.Denied {
		t.Errorf("capped name: answer %q decision %s", ev.Answer, ev.Decision)
	}
}

// FuzzDNSServer feeds arbitrary bytes to the fake DNS server: it must never
// panic, and any reply must parse and echo the query's ID.
func FuzzDNSServer(f *testing.F) {
	f.Add(query(f, "api.example.com.", dnsmessage.TypeA))
	f.Add(query(f, "evil.example.", dnsmessage.TypeTXT))
	f.Add(query(f, "x.cdn.example.", dnsmessage.TypeAAAA))
	f.Add([]byte{0, 1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0})
	pol := mustPolicy(f, dnsTestPolicy)
	d := NewFakeDNS()
	f.Fuzz(func(t *testing.T, q []byte) {
		reply, _, err := d.Answer(q, pol)
		if err != nil {
			return
		}
		var p dnsmessage.Parser
		h, perr := p.Start(reply)
		if perr != nil {
			t.Fatalf("reply does not parse: %v", perr)
		}
		if len(q) >= 2 && h.ID != uint16(q[0])<<8|uint16(q[1]) {
			t.Fatalf("reply ID %#x does not echo query ID", h.ID)
		}
		if !h.Response {
			t.Fatal("reply without QR")
		}
	})
}
