package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
)

// checkLoopback refuses a listen address (flag's value addr) that is not
// on loopback, saying what the server serves only (what) and why.
func checkLoopback(flag, addr, what, why string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError{fmt.Errorf("%s %q: want HOST:PORT, e.g. 127.0.0.1:8080: %v", flag, addr, err)}
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return usageError{fmt.Errorf("%s %q: %s (127.0.0.1, ::1 or localhost): %s", flag, addr, what, why)}
	}
	return nil
}

// newToken is a fresh secret for a loopback server's URL or header: 16
// random bytes in hex.
func newToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
