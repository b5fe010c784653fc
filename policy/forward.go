package policy

import "strconv"

// ReasonForwarded: a flow to a [[forward]] table's name and port, carried
// to exactly its host service.
const ReasonForwarded = "forwarded"

// Forward is one [[forward]] table: the guest's connections to Name on
// Port go to exactly To on the host, and nowhere else.
//
//	[[forward]]
//	name = "db.capsem.internal"   # the name the guest dials (fake DNS answers it)
//	port = 5432                   # the port it dials
//	to   = "127.0.0.1:5432"       # an IP address and port, or "unix:/path/to.sock"
type Forward struct {
	Name string // canonical
	Port uint16
	// Network is "tcp" or "unix"; Addr is what is dialled: IP:port, or
	// the socket's absolute path.
	Network, Addr string
	// Rule is the table as one line, for events: "forward
	// db.capsem.internal:5432 -> 127.0.0.1:5432".
	Rule string
}

// forwardKey indexes Policy.forwards.
type forwardKey struct {
	name string
	port uint16
}

// Forward returns the [[forward]] table for a connection to name on port.
// Names are matched as in the decisions (case, a trailing dot). It decides
// nothing of its own: DecideFlow says forwarded for the same name and port.
func (p *Policy) Forward(name string, port uint16) (Forward, bool) {
	if !p.usable() || len(p.forwards) == 0 {
		return Forward{}, false
	}
	canon, ok := Canonical(name)
	if !ok {
		return Forward{}, false
	}
	f, ok := p.forwards[forwardKey{canon, port}]
	return f, ok
}

// Forwards returns the [[forward]] tables in file order.
func (p *Policy) Forwards() []Forward {
	if !p.usable() {
		return nil
	}
	return append([]Forward(nil), p.forwardList...)
}

// forwardedName is the first [[forward]] rule of canon, on any port, or "".
func (p *Policy) forwardedName(canon string) string {
	for _, f := range p.forwardList {
		if f.Name == canon {
			return f.Rule
		}
	}
	return ""
}

func forwardRule(name string, port uint16, to string) string {
	return "forward " + name + ":" + strconv.Itoa(int(port)) + " -> " + to
}
