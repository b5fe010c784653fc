package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// roundTripper is the Go client of the HTTP/2 and HTTP/3 runs: one
// connection to addr (net/http's HTTP/2 transport over TCP, or quic-go's
// http3.Transport), whatever the URL's host, trusting roots for sni. Both
// protocols of the HTTP/3 comparison use the same kind of client, Go's,
// so that the comparison is of the protocols and not of curl against
// quic-go. close ends the connection.
func roundTripper(proto, addr, sni string, roots *x509.CertPool) (rt http.RoundTripper, close func(), err error) {
	tlsConf := &tls.Config{RootCAs: roots, ServerName: sni}
	switch proto {
	case "h2":
		dialer := &net.Dialer{Timeout: 10 * time.Second}
		var protos http.Protocols
		protos.SetHTTP2(true)
		tr := &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return dialer.DialContext(ctx, "tcp", addr)
			},
			TLSClientConfig:    tlsConf,
			Protocols:          &protos,
			DisableCompression: true,
		}
		return tr, tr.CloseIdleConnections, nil
	case "h3":
		var (
			mu    sync.Mutex
			socks []*net.UDPConn
		)
		tr := &http3.Transport{
			TLSClientConfig:    tlsConf,
			DisableCompression: true,
			// An unconnected *net.UDPConn, so that quic-go sizes its
			// buffers (SO_RCVBUFFORCE as root: no warning whatever
			// net.core.rmem_max says) and batches with GSO where the
			// kernel offers it, as a real client's socket would.
			Dial: func(ctx context.Context, _ string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
				raddr, err := net.ResolveUDPAddr("udp4", addr)
				if err != nil {
					return nil, err
				}
				udp, err := net.ListenUDP("udp4", nil)
				if err != nil {
					return nil, err
				}
				mu.Lock()
				socks = append(socks, udp)
				mu.Unlock()
				return quic.DialEarly(ctx, udp, raddr, tlsCfg, cfg)
			},
		}
		return tr, func() {
			tr.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, s := range socks {
				s.Close()
			}
		}, nil
	}
	return nil, nil, fmt.Errorf("unknown protocol %q: want h2 or h3", proto)
}

// wantMajor is the ProtoMajor of a response over proto.
func wantMajor(proto string) int {
	if proto == "h3" {
		return 3
	}
	return 2
}
