package policy

// The [quic] modes: what a QUIC Initial from the guest to a name allowed
// on UDP port 443 gets.
const (
	// QUICIntercept: the flow is handed to the MITM, which terminates
	// QUIC and decides each HTTP/3 request like HTTP/1.1 and HTTP/2 (the
	// default).
	QUICIntercept = "intercept"
	// QUICBlock: the Initial is refused at once with ICMP port
	// unreachable, so the client falls back to TCP.
	QUICBlock = "block"
)

// QUICMode returns the [quic] mode in force: QUICIntercept or QUICBlock;
// QUICIntercept when the file does not say. A nil Policy, which denies
// everything, says QUICBlock: it fails closed.
func (p *Policy) QUICMode() string {
	if !p.usable() || p.quicBlock {
		return QUICBlock
	}
	return QUICIntercept
}
