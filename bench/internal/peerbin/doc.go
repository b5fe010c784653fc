// Package peerbin finds or builds the programs the benchmarks measure side by
// side — capsem-net from this checkout, gvproxy from the Go module proxy,
// passt from the system — so that every bench measures the same versions and
// names the same fixed values (gvproxy's pin, the MAC it leases to).
//
// It never runs the programs it returns, and it builds only into the
// directory it is given; it is bench code, never imported by capsem itself.
package peerbin
