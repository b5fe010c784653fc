package policy

// quic builds [quic].
func (b *builder) quic(t *table) {
	for k, l := range b.w.values(t) {
		if k.name != "mode" {
			continue
		}
		switch l.value {
		case QUICIntercept:
			b.p.quicBlock = false
		case QUICBlock:
			b.p.quicBlock = true
		default:
			b.c.add(l.line, "quic mode %q: write \"intercept\" (HTTP/3 to allowed names is decrypted and decided like HTTPS over TCP) or \"block\" (QUIC is refused at once and clients fall back to TCP)", l.value)
		}
	}
}
