package mitm

import (
	"crypto/tls"
	"slices"
)

// guestCurves are the key exchanges capsem's TLS and QUIC servers choose
// for the guest when the guest offers one of them: the classical ones,
// without Go's default post-quantum hybrid X25519MLKEM768.
//
// Why: the guest's leg never crosses a network. Its frames go from the VM's
// NIC through a unix socket or a file descriptor into this process (capsem
// and capsem-net listen on nothing else), so nobody can record that leg who
// could not read this process's memory, where the plaintext is anyway — a
// post-quantum exchange there protects nothing from record-now-decrypt-later.
// It cost: with a new connection per request through the MITM (`mitmbench
// -rps-protos h1-new -conns 16`), capsem-net's CPU per request fell 11 %
// without it (0.79/0.84 → 0.68/0.76 ms in paired runs) and requests/s rose
// 959/954 → 1,088/1,016. The upstream leg, which does cross networks, keeps
// Go's defaults with the hybrid first.
var guestCurves = []tls.CurveID{tls.X25519, tls.CurveP256, tls.CurveP384, tls.CurveP521}

// guestKeyExchange makes c choose among guestCurves for a client that
// offers any of them (curl, OpenSSL, Go, chromium and node offer X25519
// beside the hybrid, with a key share for each: no extra round trip), and
// Go's defaults for a client that offers only post-quantum groups, which
// would otherwise find no group in common. c.GetConfigForClient, if set,
// runs first and must return a nil config (it may refuse the client).
func guestKeyExchange(c *tls.Config) *tls.Config {
	classical := c.Clone()
	classical.CurvePreferences = guestCurves
	check := c.GetConfigForClient
	c.GetConfigForClient = func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
		if check != nil {
			if _, err := check(chi); err != nil {
				return nil, err
			}
		}
		if slices.ContainsFunc(chi.SupportedCurves, func(id tls.CurveID) bool { return slices.Contains(guestCurves, id) }) {
			return classical, nil
		}
		return nil, nil
	}
	return c
}
