// Package ca is capsem's per-installation certificate authority: an ECDSA
// P-256 key generated on first use and kept, mode 0600, in the user's config
// directory (never shipped, never the same on two machines), and the leaf
// certificates minted from it, one per server name, short-lived and cached
// in a bounded LRU.
//
// The guest trusts this CA; the MITM presents its leaves when it terminates
// the guest's TLS. Whoever holds the key can impersonate any site to any
// guest that trusts it, so the key never leaves the host and a file with
// looser permissions is refused rather than used.
//
// The same directory holds the seal key (sealkey.go): the ed25519 key that
// signs each session's hash chain head, under the same rule, kept across
// `ca rotate` so that records sealed before a rotation still verify.
package ca
