package store

// intern returns the element of common equal to s, so that decoding a
// common value does not allocate, or else a copy of s. Each list holds a
// field's usual values; one used by a single kind sits in that kind's
// codec file. A scan of a list rather than a switch per list (there were
// twelve): it costs about 7 ns more per value than a switch's inlined
// compares (2 values in a file event, 5 in a net event); decoding a file
// event, the smallest, takes under 5% more instructions than with the
// switches (cachegrind).
func intern[T ~string](s []byte, common []T) T {
	for _, c := range common {
		if string(c) == string(s) {
			return c
		}
	}
	return T(s)
}

// The common values of fields that more than one kind has.
var (
	kinds      = []Kind{KindDNS, KindNet, KindModelCall, KindExec, KindFS, KindAgent, KindRecording, KindMCPCall}
	decisions  = []Decision{Allowed, Denied}
	transports = []Transport{TransportTCP, TransportUDP, TransportICMP, TransportARP, TransportIPv6, TransportOther}
	methods    = []string{"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS", "CONNECT"}
)
