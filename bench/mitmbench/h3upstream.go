package main

import (
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"

	"github.com/quic-go/quic-go/http3"
)

// serveH3 listens on a loopback TCP port whose number is free for UDP too,
// serves HTTP/3 on that UDP port and returns the TCP listener: capsem's
// [upstream] resolve names one port for both, and its MITM forwards a
// guest's HTTP/3 request over HTTP/3 when a QUIC handshake with that port
// succeeds within 300 ms (mitm/h3upstream.go).
func serveH3(cert tls.Certificate, h http.Handler) net.Listener {
	for try := 0; ; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		if err != nil {
			ln.Close()
			if try == 20 {
				log.Fatalf("no loopback port free for both TCP and UDP after 20 tries: %v", err)
			}
			continue
		}
		srv := &http3.Server{
			Handler:   h,
			TLSConfig: http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{cert}}),
		}
		go func() {
			if err := srv.Serve(udp); err != nil {
				log.Fatalf("HTTP/3 on UDP %d: %v", port, err)
			}
		}()
		return ln
	}
}

// protoHeader, when a request carries it, has the upstream answer with
// the protocol it was reached over in the same header: the fetch sub-mode
// sends it to check which protocol the MITM forwarded over. The load
// generator does not, so the requests/s rows carry no extra header.
const protoHeader = "X-Bench-Upstream-Proto"

type protoEcho struct{ next http.Handler }

func (p protoEcho) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, ok := r.Header[protoHeader]; ok {
		w.Header().Set(protoHeader, fmt.Sprint(r.Proto))
	}
	p.next.ServeHTTP(w, r)
}
