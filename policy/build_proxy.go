package policy

import (
	"net"
	"net/url"
	"strconv"
	"strings"
)

// proxy builds [upstream] proxy, no_proxy and proxy_secret. The secret
// itself is checked once the [[secret]] tables are built (proxySecretLate).
func (b *builder) proxy(t *table) {
	var raw, secret *leaf
	var noProxy []leaf
	for k, l := range b.w.values(t) {
		switch k.name {
		case "proxy":
			raw = l
		case "proxy_secret":
			secret = l
		case "no_proxy":
			noProxy = append(noProxy, *l)
		}
	}
	if raw == nil {
		if secret != nil {
			b.c.add(secret.line, "proxy_secret %q without proxy: set proxy = \"http://HOST:PORT\", or remove proxy_secret", secret.value)
		}
		if len(noProxy) > 0 {
			b.c.add(noProxy[0].line, "no_proxy without proxy: set proxy = \"http://HOST:PORT\", or remove no_proxy")
		}
		return
	}
	addr, problem := proxyAddr(raw.value)
	if problem != "" {
		b.c.add(raw.line, "proxy %q: %s", raw.value, problem)
		return
	}
	x := &Proxy{URL: raw.value, Addr: addr}
	for _, l := range noProxy {
		e, problem := parseHostOnly(l.value, "no_proxy names hosts on every port")
		if problem != "" {
			b.c.add(l.line, "no_proxy entry %q: %s", l.value, problem)
			continue
		}
		e.line = l.line
		x.NoProxy = append(x.NoProxy, l.value)
		x.noProxy = append(x.noProxy, e)
	}
	if secret != nil {
		x.Secret = secret.value
		b.proxySecret = secret
	}
	b.p.proxy = x
}

// proxyAddr checks a proxy URL and returns the host:port to dial.
func proxyAddr(s string) (string, string) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", "write it as \"http://HOST:PORT\""
	case u.Scheme == "https":
		return "", "capsem speaks to the proxy in plain HTTP (CONNECT, then TLS to the upstream inside the tunnel); write \"http://HOST:PORT\""
	case u.Scheme != "http":
		return "", "write it as \"http://HOST:PORT\""
	case u.User != nil:
		return "", "the credentials go in a [[secret]] named by proxy_secret (its value \"user:password\"), not in the file"
	case u.Hostname() == "":
		return "", "the proxy's host is missing; write \"http://HOST:PORT\""
	case u.Port() == "":
		return "", "write the proxy's port, like \"http://" + u.Hostname() + ":3128\""
	case u.Path != "" && u.Path != "/", u.RawQuery != "", u.Fragment != "":
		return "", "write only \"http://HOST:PORT\", without a path"
	}
	if p, err := strconv.ParseUint(u.Port(), 10, 16); err != nil || p == 0 {
		return "", "the port must be 1 to 65535"
	}
	if strings.ContainsAny(u.Hostname(), " \t") {
		return "", "the host has a space in it"
	}
	return net.JoinHostPort(u.Hostname(), u.Port()), ""
}

// proxySecretLate checks that proxy_secret names a [[secret]] (or a
// --secret) of the policy.
func (b *builder) proxySecretLate() {
	l := b.proxySecret
	if l == nil {
		return
	}
	for _, s := range b.p.secrets {
		if s.Name == l.value {
			return
		}
	}
	b.c.add(l.line, "proxy_secret %q names no [[secret]]; add a [[secret]] with name = %q and from_env or from_file holding \"user:password\"", l.value, l.value)
}
