package policy

import (
	"net/netip"
	"path/filepath"
	"strings"
)

// forwardLeaves are the string values of one [[forward]] table.
type forwardLeaves struct {
	name, to *leaf
}

// forwards checks and builds the [[forward]] tables, in file order.
func (b *builder) forwards(t *table) {
	elems := b.w.elems[t.name]
	if len(elems) == 0 {
		return
	}
	els := make([]forwardLeaves, len(elems))
	for k, l := range b.w.values(t) {
		switch k.name {
		case "name":
			els[l.elem].name = l
		case "to":
			els[l.elem].to = l
		}
	}
	decodedElems := b.cfg.elems(t)
	b.p.forwards = map[forwardKey]Forward{}
	for i := range els {
		var port int64
		hasPort := false
		if i < len(decodedElems) {
			if v := decodedElems[i].FieldByName(fieldName("port")); v.IsValid() && !v.IsNil() {
				port, hasPort = v.Elem().Int(), true
			}
		}
		reported := b.c.reportedIn(elems[i], b.w.elemEnd(t.name, i))
		b.forward(i+1, elems[i], &els[i], port, hasPort, reported)
	}
}

func (b *builder) forward(n, line int, el *forwardLeaves, port int64, hasPort, reported bool) {
	ok := !reported
	var f Forward
	switch {
	case el.name == nil && reported:
	case el.name == nil:
		b.c.add(line, "[[forward]] %d has no name; add name = \"db.capsem.internal\" (the name the guest dials)", n)
		ok = false
	default:
		canon, np, at := checkName(el.name.value)
		switch {
		case strings.ContainsRune(el.name.value, '*'):
			b.c.add(el.name.line, "forward name %q: a forward is for one exact name, not a wildcard", el.name.value)
			ok = false
		case np != nameOK:
			b.c.add(el.name.line, "forward name %q: %s", el.name.value, describeNameProblem(el.name.value, np, at))
			ok = false
		case numericTLD(canon):
			b.c.add(el.name.line, "forward name %q: write the name the guest dials, like \"db.capsem.internal\", not an address", el.name.value)
			ok = false
		case canon == MCPGatewayHost:
			b.c.add(el.name.line, "forward name %q is capsem's own MCP gateway; choose another name", el.name.value)
			ok = false
		}
		f.Name = canon
	}
	switch {
	case !hasPort && reported:
	case !hasPort:
		b.c.add(line, "[[forward]] %d has no port; add port = 5432 (the port the guest dials)", n)
		ok = false
	case port < 1 || port > 65535:
		b.c.add(line, "[[forward]] %d: port %d is not a TCP port (1 to 65535)", n, port)
		ok = false
	default:
		f.Port = uint16(port)
	}
	switch {
	case el.to == nil && reported:
	case el.to == nil:
		b.c.add(line, "[[forward]] %d has no to; add to = \"127.0.0.1:5432\" (the host service: an IP address and port, or \"unix:/path/to.sock\")", n)
		ok = false
	default:
		network, addr, problem := b.forwardTarget(el.to.value)
		if problem != "" {
			b.c.add(el.to.line, "forward to %q: %s", el.to.value, problem)
			ok = false
		}
		f.Network, f.Addr = network, addr
	}
	if !ok {
		return
	}
	key := forwardKey{f.Name, f.Port}
	if prev, dup := b.p.forwards[key]; dup {
		b.c.add(el.name.line, "[[forward]] %d forwards %s:%d, as %q does already; remove one of them", n, f.Name, f.Port, prev.Rule)
		return
	}
	to := f.Addr
	if f.Network == "unix" {
		to = "unix:" + f.Addr
	}
	f.Rule = forwardRule(f.Name, f.Port, to)
	b.p.forwards[key] = f
	b.p.forwardList = append(b.p.forwardList, f)
}

// forwardTarget parses a forward's to: IP:port ([IPv6]:port), or
// unix:PATH (absolute, or relative to the policy file's directory). A
// host name is refused: what is dialled is exactly what was written.
func (b *builder) forwardTarget(s string) (network, addr, problem string) {
	if path, ok := strings.CutPrefix(s, "unix:"); ok {
		switch {
		case strings.TrimSpace(path) == "":
			return "", "", "the socket's path is empty; write \"unix:/path/to.sock\""
		case strings.ContainsRune(path, 0):
			return "", "", "the path contains a NUL byte"
		case strings.HasPrefix(path, "~"):
			return "", "", "\"~\" is not expanded; write the full path"
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(b.dir, path)
		}
		return "unix", filepath.Clean(path), ""
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil || ap.Port() == 0 || ap.Addr().Zone() != "" {
		return "", "", "write an IP address and port, like \"127.0.0.1:5432\" or \"[::1]:5432\", or a unix socket, like \"unix:/run/app.sock\" (a host name is not resolved)"
	}
	return "tcp", ap.String(), ""
}
