package policy

// Proxy is [upstream] proxy: the HTTP proxy that every upstream TCP
// connection capsem makes goes through, with CONNECT and the name (the
// proxy resolves it, so the host needs no DNS of its own), except those to
// a name in no_proxy.
type Proxy struct {
	URL  string // as written: "http://proxy.corp:3128"
	Addr string // the proxy's host:port, to dial
	// Secret names the [[secret]] (proxy_secret) whose real value,
	// "user:password", is sent to the proxy as Basic credentials; "": none.
	// It is a secret like any other: read on the host, never in the guest.
	Secret  string
	NoProxy []string // as written
	noProxy []entry
}

// Bypass reports whether a connection to name goes direct, not through
// the proxy: name is in no_proxy.
func (x *Proxy) Bypass(name string) bool { return anyMatches(x.noProxy, name) }

// Proxy returns [upstream] proxy, or nil when upstream connections go
// direct.
func (p *Policy) Proxy() *Proxy {
	if !p.usable() {
		return nil
	}
	return p.proxy
}

// ProxyFor returns the proxy a connection to name goes through: Proxy,
// unless name is in its no_proxy; nil when it goes direct.
func (p *Policy) ProxyFor(name string) *Proxy {
	if x := p.Proxy(); x != nil && !x.Bypass(name) {
		return x
	}
	return nil
}

// ProxyCredentials returns "user:password", the real value of the proxy's
// secret once the policy is Bound; nil without proxy_secret.
func (p *Policy) ProxyCredentials() []byte {
	x := p.Proxy()
	if x == nil || x.Secret == "" {
		return nil
	}
	for _, s := range p.Secrets() {
		if s.Name == x.Secret {
			return s.real
		}
	}
	return nil
}
