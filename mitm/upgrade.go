package mitm

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/capsem/capsem/mitm/upstream"
)

// The upgrade policy. After a 101 Switching Protocols (or a 2xx answer to
// CONNECT) the MITM stops parsing HTTP on the connection: whatever the
// guest sends next reaches the upstream without a policy decision or an
// event (only a WebSocket's frames are scanned, for secrets and [dlp]:
// wsguard.go). So the only switch capsem lets happen is a WebSocket
// handshake (RFC 6455) that is valid on the way out and answered as one on
// the way back, and it is logged. Every other Upgrade token (h2c, TLS/1.x, anything) and every
// HTTP2-Settings header is stripped before the request is forwarded, and
// the event says so; CONNECT, extended CONNECT (:protocol, RFC 8441) and
// PRI are refused; a 101 the MITM did not let through is a 502.
//
// Found by tests/mitm_smuggle_test.go against an upstream that honours any
// Upgrade: before this policy, `Upgrade: h2c` (or any token) followed by
// `GET /admin/x` on the same connection reached the upstream's /admin/
// handler past an [[http]] deny rule, with no event.

// wsGUID is RFC 6455's constant for Sec-WebSocket-Accept.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// wsAccept is the Sec-WebSocket-Accept a server that read key must answer.
func wsAccept(key string) string {
	sum := sha1.Sum([]byte(key + wsGUID))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// headerTokens splits comma-separated header values into their tokens,
// without the optional whitespace around them, as servers read lists
// (RFC 9110 §5.6.1): "a , b" and two lines "a" and "b" are both a and b.
func headerTokens(values []string) []string {
	var out []string
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.Trim(t, " \t"); t != "" {
				out = append(out, t)
			}
		}
	}
	return out
}

func hasToken(tokens []string, want string) bool {
	return slices.ContainsFunc(tokens, func(t string) bool { return strings.EqualFold(t, want) })
}

// refuseTunnel says why a request may not be forwarded at all because
// forwarding it could turn the connection into a tunnel, or "" when it
// may. Methods are compared without case: an upstream may be as lenient.
func refuseTunnel(r *http.Request) string {
	if p, ok := r.Header[":protocol"]; ok {
		return fmt.Sprintf("an extended CONNECT (:protocol %q, RFC 8441) opens a tunnel capsem cannot inspect", strings.Join(p, ","))
	}
	switch {
	case strings.EqualFold(r.Method, http.MethodConnect):
		return "CONNECT opens a tunnel capsem cannot inspect; send the requests themselves to this host"
	case strings.EqualFold(r.Method, "PRI"):
		return "PRI is HTTP/2's connection preface, not a request; capsem does not switch an HTTP/1.1 connection to HTTP/2 (negotiate h2 with ALPN instead)"
	}
	return ""
}

// upgradeCheck is what checkUpgrade did to a request.
type upgradeCheck struct {
	// wsKey is the request's Sec-WebSocket-Key when it is a WebSocket
	// handshake that may be forwarded as one; empty otherwise.
	wsKey string
	// stripped names what was removed, for the event: "Upgrade: h2c",
	// "HTTP2-Settings", …
	stripped []string
	// why says why an Upgrade: websocket was not a WebSocket handshake.
	why string
}

// detail is the event's account of a check, "" when nothing was stripped.
func (c upgradeCheck) detail() string {
	if len(c.stripped) == 0 {
		return ""
	}
	s := "stripped " + strings.Join(c.stripped, ", ") + " (capsem lets only WebSocket upgrades through"
	if c.why != "" {
		s += "; this was not a WebSocket handshake: " + c.why
	}
	return s + ")"
}

// checkUpgrade applies the upgrade policy to a request's header in place:
// it keeps Upgrade: websocket (and Connection: upgrade) only for a valid
// WebSocket handshake, and removes every other Upgrade token, every
// HTTP2-Settings header and their Connection tokens.
//
// What upstreams accept decides the rules. Go's httputil.ReverseProxy
// forwards only the first Upgrade line, and only with "upgrade" among
// Connection's tokens; lax servers switch on any line and without
// Connection, and h2c servers differ on whether HTTP2-Settings must be
// listed in Connection. So every Upgrade line counts, tokens are compared
// without case and around optional whitespace, and the Connection header
// does not matter for what is stripped.
func checkUpgrade(method string, protoAtLeast11 bool, h http.Header) upgradeCheck {
	var c upgradeCheck
	ups := headerTokens(h["Upgrade"])
	if _, ok := h["Http2-Settings"]; ok {
		delete(h, "Http2-Settings")
		c.stripped = append(c.stripped, "HTTP2-Settings")
	}
	conn := headerTokens(h["Connection"])
	if len(ups) == 0 && !hasToken(conn, "upgrade") && !hasToken(conn, "http2-settings") {
		return c
	}
	var ws string // the websocket token as the guest spelled it
	var others []string
	for _, t := range ups {
		if strings.EqualFold(t, "websocket") && ws == "" {
			ws = t
		} else {
			others = append(others, t)
		}
	}
	if ws != "" {
		c.why = wsHandshakeProblem(method, protoAtLeast11, conn, h)
		if c.why == "" {
			c.wsKey = h.Get("Sec-Websocket-Key")
		} else {
			others = append([]string{ws}, others...)
		}
	}
	if len(others) > 0 {
		c.stripped = append([]string{"Upgrade: " + strings.Join(others, ", ")}, c.stripped...)
	}
	var keep []string
	for _, t := range conn {
		switch {
		case strings.EqualFold(t, "http2-settings"):
		case strings.EqualFold(t, "upgrade") && c.wsKey == "":
		default:
			keep = append(keep, t)
		}
	}
	if c.wsKey != "" {
		h["Upgrade"] = []string{ws}
	} else {
		delete(h, "Upgrade")
	}
	if len(keep) > 0 {
		h["Connection"] = []string{strings.Join(keep, ", ")}
	} else {
		delete(h, "Connection")
	}
	return c
}

// wsHandshakeProblem says what makes a request carrying Upgrade: websocket
// not a WebSocket opening handshake (RFC 6455 §4.1), or "".
func wsHandshakeProblem(method string, protoAtLeast11 bool, conn []string, h http.Header) string {
	switch {
	case method != http.MethodGet:
		return "the method is " + method + ", not GET"
	case !protoAtLeast11:
		return "the request is not HTTP/1.1"
	case !hasToken(conn, "upgrade"):
		return "Connection does not list upgrade"
	case len(h["Sec-Websocket-Key"]) != 1:
		return "it needs exactly one Sec-WebSocket-Key"
	case len(h["Sec-Websocket-Version"]) != 1:
		return "it needs exactly one Sec-WebSocket-Version"
	}
	key, err := base64.StdEncoding.DecodeString(h.Get("Sec-Websocket-Key"))
	if err != nil || len(key) != 16 {
		return "Sec-WebSocket-Key is not 16 bytes in base64"
	}
	return ""
}

// switchRefused is the error that keeps an upstream's 101 from becoming a
// tunnel; the upstream transports refuse a 101 nobody asked for with it.
type switchRefused = upstream.SwitchRefused

// refuseSwitch says why an upstream's 101 may not become a tunnel, or ""
// when it may: only when capsem forwarded the request as a WebSocket
// handshake (wsKey) and the answer proves the upstream read it.
func refuseSwitch(wsKey string, h http.Header) error {
	if wsKey == "" {
		return upstream.UnaskedSwitch(h)
	}
	if ups := headerTokens(h["Upgrade"]); len(ups) != 1 || !strings.EqualFold(ups[0], "websocket") {
		return &switchRefused{Why: fmt.Sprintf("a WebSocket handshake was answered with Upgrade %q", strings.Join(h["Upgrade"], ", "))}
	}
	if !hasToken(headerTokens(h["Connection"]), "upgrade") {
		return &switchRefused{Why: "the answer's Connection does not list upgrade"}
	}
	if got := h.Get("Sec-Websocket-Accept"); got != wsAccept(wsKey) {
		return &switchRefused{Why: fmt.Sprintf("Sec-WebSocket-Accept %q does not match the key the guest sent", got)}
	}
	return nil
}
