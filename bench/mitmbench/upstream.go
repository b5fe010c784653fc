package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/capsem/capsem/mitm/ca"
)

// upstreamNames are the names the upstream's leaf certificate carries.
var upstreamNames = []string{"mitm.test", "pass.test"}

// writeUpstreamPKI makes a CA of the benchmark's own with mitm/ca
// (standing in for a public CA) and writes a leaf of it for upstreamNames
// and 127.0.0.1 into dir: the CA's ca.pem, upstream-leaf.pem and
// upstream-leaf-key.pem.
func writeUpstreamPKI(dir string) (caPath, certPath, keyPath string, err error) {
	a, err := ca.LoadOrCreate(filepath.Join(dir, "upstream-ca"))
	if err != nil {
		return "", "", "", err
	}
	leaf, err := a.LeafFor(append(upstreamNames, "127.0.0.1")...)
	if err != nil {
		return "", "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(leaf.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		return "", "", "", err
	}
	certPath, keyPath = filepath.Join(dir, "upstream-leaf.pem"), filepath.Join(dir, "upstream-leaf-key.pem")
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}), 0o644); err != nil {
		return "", "", "", err
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", "", err
	}
	return a.CertPath(), certPath, keyPath, nil
}

// pattern is what /bytes streams, 256 KiB at a time.
var pattern = func() []byte {
	b := make([]byte, 256<<10)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}()

// upstreamHandler serves /ping (4 bytes) and /bytes?n=N (N bytes).
func upstreamHandler() http.Handler {
	mux := http.NewServeMux()
	pong := []byte("pong")
	mux.HandleFunc("/ping", func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h["Content-Type"] = []string{"text/plain"}
		h["Content-Length"] = []string{"4"}
		w.Write(pong)
	})
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil || n < 0 {
			http.Error(w, "want /bytes?n=N", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k := min(n, int64(len(pattern)))
			if _, err := w.Write(pattern[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	return mux
}

// upstreamMain is the "upstream" sub-mode: an HTTPS server (HTTP/2 and
// HTTP/1.1) on 127.0.0.1, in a process of its own so that its CPU time can
// be told apart. It prints its port and serves until stdin closes.
func upstreamMain(args []string) {
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	certFile := fs.String("cert", "", "leaf certificate PEM")
	keyFile := fs.String("key", "", "leaf key PEM")
	fs.Parse(args)
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		Handler:   upstreamHandler(),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	go func() {
		io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		os.Exit(0)
	}()
	log.Fatal(srv.ServeTLS(ln, "", ""))
}
