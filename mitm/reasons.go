package mitm

import (
	"github.com/capsem/capsem/netstack"
	"github.com/capsem/capsem/policy"
)

// The reasons the MITM gives: for a flow it refuses after reading the
// ClientHello (netstack records the flow with FlowResult.Refused), and for
// a request, in its event (store.Net.Reason) and in the X-Capsem-Blocked
// header of the answer the guest gets.
//
// Stability: these strings are the vocabulary users query (the SQLite
// export's reason column, `capsem inspect`), and tests outside this
// repository match on them. A value never changes; a new one is added here,
// to Reasons, and to the README's table of event reasons (reasons_test.go
// checks that the three agree).
const (
	// Flows: the ClientHello is read before anything is decrypted.

	ReasonBadHello    = "tls-bad-client-hello" // no TLS ClientHello within HelloTimeout, or one that does not parse: the flow is cut
	ReasonNoSNI       = "tls-no-sni"           // a ClientHello that names no server: the flow is cut
	ReasonSNIMismatch = "tls-sni-mismatch"     // a ClientHello naming another server than the name the guest resolved: the flow is cut

	// Requests.

	ReasonHostNotSNI = "http-host-not-sni" // a Host other than the connection's server name (domain fronting): 421
	// ReasonHTTPDenied: an [[http]] rule denied the request, or the policy
	// refused it as invalid or ambiguous; the event's detail says which
	// (policy's denied-by-rule, invalid-request, ambiguous-path): 403.
	ReasonHTTPDenied = "http-denied"
	// ReasonTunnelRefused: CONNECT, extended CONNECT (:protocol) or PRI,
	// which would make the connection a tunnel capsem cannot inspect: 405.
	ReasonTunnelRefused = "http-tunnel-refused"
	// ReasonUpstreamError: the request was allowed but the upstream failed
	// (TLS, connection, protocol): the guest gets a 502 and the event stays
	// allowed.
	ReasonUpstreamError = "upstream-error"
	// ReasonUpstreamUpgrade: the upstream answered 101 Switching Protocols
	// to a request that was not a WebSocket handshake capsem let through,
	// or answered one wrongly; the guest gets a 502, not a tunnel.
	ReasonUpstreamUpgrade = "upstream-upgrade-refused"
	// ReasonStoreUnavailable: the event store cannot record, so nothing is
	// forwarded (fail closed): 503. The netstack refuses flows for the same
	// reason, under the same name, which is its constant.
	ReasonStoreUnavailable = netstack.ReasonStoreDown
	// ReasonSecretWrongHost: the request carries a secret's placeholder
	// (raw, percent-encoded, base64, base64url or hex) and goes to a host
	// that is not one of the secret's: 403, naming the secret.
	ReasonSecretWrongHost = policy.ReasonSecretWrongHost
	// ReasonSecretRealValue: the request carries a secret's real value,
	// which the guest was never given: 403, wherever it goes.
	ReasonSecretRealValue = "secret-real-value"
	// ReasonSecretReflected: a response from a secret's own host (which
	// was given the real value) carried it back — in a header, a 1xx
	// header, a trailer or the body, in any form the matcher knows, also
	// split by whitespace, JSON escapes or events — and the guest got the
	// placeholder in its place. The request stays allowed; when capsem
	// cut the response instead (a possible value spread over more than it
	// holds back), the event is denied.
	ReasonSecretReflected = "secret-reflected"
	// ReasonSecretUnscannable: a response from a secret's host whose
	// content coding capsem cannot undo (unknown, or broken), so it could
	// not be scanned for the real value: not passed on — a 502, or the
	// stream cut where it broke.
	ReasonSecretUnscannable = "secret-response-unscannable"
	// ReasonDLPMatch: a [dlp] detector matched the request (matched_rule is
	// detector@where): with action "log" the request went on, with "block"
	// it got a 403.
	ReasonDLPMatch = "dlp-match"
	// ReasonMCPToolDenied: an [[mcp.rules]] entry denied a tools/call in
	// the request (matched_rule names it): the guest got capsem's JSON-RPC
	// error instead, and nothing went upstream. The gateway records its
	// refusals under the same name, which is the policy's.
	ReasonMCPToolDenied = policy.ReasonMCPToolDenied
	// ReasonLocalUnserved: a flow to a name capsem serves itself (the MCP
	// gateway) with no gateway in this process to serve it. The netstack
	// refuses such a flow under the same name, which is its constant.
	ReasonLocalUnserved = netstack.ReasonLocalUnserved
	// ReasonQUICPassthrough: QUIC to a name under [tls] passthrough. capsem
	// splices passthrough names over TCP only (it dials upstreams over
	// TCP), so the QUIC flow is refused with ICMP port unreachable and the
	// client falls back to TCP, where it is spliced.
	ReasonQUICPassthrough = "quic-passthrough"
	// ReasonBodyHoldBudget: capsem reads the request's body whole before
	// forwarding it (to scan it, or to decide its MCP calls), and the
	// bodies held are at their bound (limits.go): 503; or this body alone
	// is more than capsem holds for its host: 413.
	ReasonBodyHoldBudget = "body-hold-budget"
	// ReasonBodyTimeout: a body capsem reads whole did not arrive within
	// its deadline: 408.
	ReasonBodyTimeout = "body-read-timeout"
)

// Reasons is every reason the MITM records: its own, and the policy's
// decisions it records as they are (a request allowed, or refused because
// a reload no longer allows its flow's name and port: 403). It exists for
// reasons_test.go, which checks it against the constants above and the
// README; nothing else reads it.
func Reasons() []string {
	return []string{
		ReasonBadHello, ReasonNoSNI, ReasonSNIMismatch,
		ReasonHostNotSNI, ReasonHTTPDenied, ReasonTunnelRefused, ReasonUpstreamError, ReasonUpstreamUpgrade,
		ReasonStoreUnavailable, ReasonSecretWrongHost, ReasonSecretRealValue, ReasonSecretReflected, ReasonSecretUnscannable, ReasonDLPMatch,
		ReasonMCPToolDenied, ReasonLocalUnserved, ReasonQUICPassthrough, ReasonBodyHoldBudget, ReasonBodyTimeout,

		policy.ReasonAllowed, policy.ReasonDeniedByRule, policy.ReasonNoMatchingRule, policy.ReasonPortNotAllowed,
		policy.ReasonInvalidName, policy.ReasonSecretWrongHost,
	}
}
