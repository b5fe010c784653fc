// Package h3get is an HTTP/3 client for the inside of a sandbox: quic-go's
// http3 over a connected UDP socket, the way chromium's QUIC is, so that an
// ICMP port unreachable from capsem fails the handshake at once
// (ECONNREFUSED) where an unconnected socket would wait out its timeout.
// The guest image has no HTTP/3 client of its own (bookworm's curl and
// Python have none), so capsem doctor runs this one as the hidden
// `capsem h3-get` in the guest, and the tests run it in their namespace.
//
// Besides one GET it can try what a hostile or merely modern client tries
// on a second request: resuming the first's TLS session with 0-RTT data
// (Request.Resume), and moving the connection to another local port
// (Request.Migrate). Result says what the server allowed.
//
// What it must never do: change anything outside its own sockets — it is
// a probe, run as the guest's user, and reports what happened without
// deciding whether that was right (the doctor's and the tests' job).
package h3get
