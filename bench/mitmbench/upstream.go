package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// upstreamNames are the names the upstream's leaf certificate carries.
var upstreamNames = []string{"mitm.test", "pass.test"}

// writeUpstreamPKI writes a CA of the benchmark's own (standing in for a
// public CA) and a leaf of it for upstreamNames into dir: ca.pem, leaf.pem,
// leaf-key.pem.
func writeUpstreamPKI(dir string) (caPath, certPath, keyPath string, err error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "mitmbench upstream CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano() + 1),
		Subject:      pkix.Name{CommonName: upstreamNames[0]},
		DNSNames:     upstreamNames,
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return "", "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", "", err
	}
	caPath, certPath, keyPath = filepath.Join(dir, "upstream-ca.pem"), filepath.Join(dir, "upstream-leaf.pem"), filepath.Join(dir, "upstream-leaf-key.pem")
	for _, f := range []struct {
		path, typ string
		der       []byte
	}{{caPath, "CERTIFICATE", caDER}, {certPath, "CERTIFICATE", der}, {keyPath, "EC PRIVATE KEY", keyDER}} {
		if err := os.WriteFile(f.path, pem.EncodeToMemory(&pem.Block{Type: f.typ, Bytes: f.der}), 0o644); err != nil {
			return "", "", "", err
		}
	}
	return caPath, certPath, keyPath, nil
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
