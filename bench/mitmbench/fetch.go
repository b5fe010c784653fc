package main

import (
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"time"
)

// fetchResult is what the fetch sub-mode prints, as JSON.
type fetchResult struct {
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	Proto    string  `json:"proto"`    // the response's, as the client saw it
	Upstream string  `json:"upstream"` // the protocol the upstream was reached over (its protoHeader)
}

// fetchMain is the "fetch" sub-mode: the download of the HTTP/3
// comparison, with the Go client of both protocols (roundTripper). It
// sends GET /ping first on the same connection, so that the handshake and
// the MITM's QUIC probe of the upstream are not timed (curl's time_total,
// in the curl rows, includes its handshake: a few ms of a download of
// seconds), then GETs -path, reads the body 256 KiB at a time and prints
// a fetchResult.
func fetchMain(args []string) {
	fs := flag.NewFlagSet("fetch", flag.ExitOnError)
	addr := fs.String("addr", "", "host:port to dial (UDP for h3)")
	sni := fs.String("sni", "", "TLS server name and the URL's host")
	path := fs.String("path", "/bytes?n=1048576", "request path")
	auth := fs.String("auth", "", "Authorization header to send")
	proto := fs.String("proto", "h3", "h2 or h3")
	caFile := fs.String("ca", "", "PEM file of the CA to trust")
	fs.Parse(args)
	pemBytes, err := os.ReadFile(*caFile)
	if err != nil {
		log.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemBytes) {
		log.Fatalf("%s: no certificate", *caFile)
	}
	rt, closeRT, err := roundTripper(*proto, *addr, *sni, roots)
	if err != nil {
		log.Fatal(err)
	}
	defer closeRT()
	get := func(path string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodGet, "https://"+*sni+path, nil)
		if err != nil {
			return nil, err
		}
		if *auth != "" {
			req.Header.Set("Authorization", *auth)
		}
		req.Header.Set(protoHeader, "1")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK || resp.ProtoMajor != wantMajor(*proto) {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
			resp.Body.Close()
			return nil, fmt.Errorf("GET %s: %s over %s: %s", path, resp.Status, resp.Proto, body)
		}
		return resp, nil
	}
	resp, err := get("/ping")
	if err != nil {
		log.Fatalf("warm-up: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	t0 := time.Now()
	if resp, err = get(*path); err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 256<<10)
	var n int64
	for {
		k, err := resp.Body.Read(buf)
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatalf("reading the body after %d bytes: %v", n, err)
		}
	}
	secs := time.Since(t0).Seconds()
	resp.Body.Close()
	json.NewEncoder(os.Stdout).Encode(fetchResult{Bytes: n, Seconds: secs, Proto: resp.Proto, Upstream: resp.Header.Get(protoHeader)})
}
