// Package quicpeek reads the TLS ClientHello out of a guest's first QUIC
// Initial datagrams, so the MITM can check the server name (SNI) before it
// terminates QUIC — what mitm/tlshello does for TLS over TCP.
//
// QUIC Initial packets are encrypted, but with keys anyone can derive from
// the packet's Destination Connection ID (RFC 9001 §5.2), so a peek needs no
// secret: it derives the client's Initial keys, removes header protection,
// decrypts, walks the frames and reassembles the CRYPTO stream until the
// ClientHello is complete, then parses it with tlshello.Parse. QUIC v1
// (RFC 9000/9001) and v2 (RFC 9369) are understood.
//
// It never answers the client, never holds a datagram after Add returns
// (the caller keeps what it must replay to the QUIC server), and is written
// for hostile input: it never panics, and what it keeps is bounded by
// MaxCryptoBytes and MaxDatagrams whatever the guest sends.
package quicpeek
