// Package tlshello reads a TLS ClientHello off a connection before any TLS
// library sees it, so the MITM can decide on the server name (SNI) and the
// offered ALPN protocols, then replay the exact bytes it read into a TLS
// server (interception) or to the upstream (passthrough).
//
// The reader is written for hostile input: bounded in size, it never reads
// past the ClientHello's last record, and every length is checked against
// what encloses it.
package tlshello
