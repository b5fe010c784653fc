package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// loadResult is what the loadgen sub-mode prints, as JSON.
type loadResult struct {
	Requests int64   `json:"requests"`
	Seconds  float64 `json:"seconds"`
	RPS      float64 `json:"rps"`
	P50us    float64 `json:"p50_us"`
	P99us    float64 `json:"p99_us"`
	Errors   int64   `json:"errors"`
	Err      string  `json:"first_error,omitempty"`
}

type loadConfig struct {
	addr     string // where to dial
	sni      string // TLS server name and Host header
	path     string
	auth     string // the Authorization header's value, or ""
	proto    string // h1, h2 or h3
	conns    int    // concurrent requests in flight
	h2conns  int    // HTTP/2 connections the streams are spread over
	duration time.Duration
	roots    *x509.CertPool
}

// loadgenMain is the "loadgen" sub-mode: conns workers each send one
// request after another over a keep-alive connection (h1: one TLS
// connection per worker; h2: the workers share h2conns connections; h3:
// the workers share one QUIC connection) for
// the given duration, after one warm-up request each; it prints a
// loadResult. It runs inside the guest namespace (through capsem-net) or
// on the host (direct to the upstream).
func loadgenMain(args []string) {
	fs := flag.NewFlagSet("loadgen", flag.ExitOnError)
	var c loadConfig
	fs.StringVar(&c.addr, "addr", "", "host:port to dial")
	fs.StringVar(&c.sni, "sni", "", "TLS server name and Host header")
	fs.StringVar(&c.path, "path", "/ping", "request path")
	fs.StringVar(&c.auth, "auth", "", "Authorization header to send with every request")
	fs.StringVar(&c.proto, "proto", "h1", "h1 (HTTP/1.1), h1-new (HTTP/1.1, a new connection per request), h2 or h3 (one QUIC connection)")
	fs.IntVar(&c.conns, "conns", 16, "concurrent requests (h1: connections)")
	fs.IntVar(&c.h2conns, "h2-conns", 1, "HTTP/2 connections the concurrent requests share")
	fs.DurationVar(&c.duration, "t", 5*time.Second, "how long to send requests")
	caFile := fs.String("ca", "", "PEM file of the CA to trust")
	fs.Parse(args)
	pemBytes, err := os.ReadFile(*caFile)
	if err != nil {
		log.Fatal(err)
	}
	c.roots = x509.NewCertPool()
	if !c.roots.AppendCertsFromPEM(pemBytes) {
		log.Fatalf("%s: no certificate", *caFile)
	}
	res, err := runLoad(c)
	if err != nil {
		log.Fatal(err)
	}
	json.NewEncoder(os.Stdout).Encode(res)
}

// worker sends one request and waits for its response.
type worker func() error

func runLoad(c loadConfig) (loadResult, error) {
	workers, closeAll, err := makeWorkers(c)
	if err != nil {
		return loadResult{}, err
	}
	defer closeAll()
	// Warm-up: connect and send one request on each worker.
	for _, w := range workers {
		if err := w(); err != nil {
			return loadResult{}, fmt.Errorf("warm-up request: %w", err)
		}
	}
	var (
		errs     atomic.Int64
		firstErr atomic.Value
		wg       sync.WaitGroup
		lats     = make([][]time.Duration, len(workers))
		ends     = make([]time.Time, len(workers))
	)
	start := time.Now()
	deadline := start.Add(c.duration)
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := make([]time.Duration, 0, 1<<14)
			for {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				if err := w(); err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					break
				}
				l = append(l, time.Since(t0))
			}
			lats[i], ends[i] = l, time.Now()
		}()
	}
	wg.Wait()
	end := start
	var all []time.Duration
	for i := range workers {
		all = append(all, lats[i]...)
		if ends[i].After(end) {
			end = ends[i]
		}
	}
	r := loadResult{Requests: int64(len(all)), Seconds: end.Sub(start).Seconds(), Errors: errs.Load()}
	if s, ok := firstErr.Load().(string); ok {
		r.Err = s
	}
	if r.Seconds > 0 {
		r.RPS = float64(r.Requests) / r.Seconds
	}
	if len(all) > 0 {
		slices.Sort(all)
		r.P50us = float64(all[len(all)*50/100]) / 1e3
		r.P99us = float64(all[min(len(all)-1, len(all)*99/100)]) / 1e3
	}
	return r, nil
}

func makeWorkers(c loadConfig) ([]worker, func(), error) {
	tlsConf := &tls.Config{RootCAs: c.roots, ServerName: c.sni}
	dialer := &net.Dialer{Timeout: 10 * time.Second}
	switch c.proto {
	case "h1":
		tlsConf.NextProtos = []string{"http/1.1"}
		var conns []*tls.Conn
		closeAll := func() {
			for _, tc := range conns {
				tc.Close()
			}
		}
		var ws []worker
		for range c.conns {
			tc, err := tls.DialWithDialer(dialer, "tcp", c.addr, tlsConf)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			conns = append(conns, tc)
			ws = append(ws, h1Worker(tc, c.sni, c.path, c.auth))
		}
		return ws, closeAll, nil
	case "h1-new":
		// A new TCP connection and TLS handshake for every request, no
		// session resumption, closed by the client once the response is
		// read: what curl in a loop, or a client that pools nothing,
		// costs the path.
		tlsConf.NextProtos = []string{"http/1.1"}
		var ws []worker
		for range c.conns {
			ws = append(ws, func() error {
				tc, err := tls.DialWithDialer(dialer, "tcp", c.addr, tlsConf)
				if err != nil {
					return err
				}
				defer tc.Close()
				return h1Worker(tc, c.sni, c.path, c.auth)()
			})
		}
		return ws, func() {}, nil
	case "h2", "h3":
		// h2: the workers share h2conns connections; h3: one connection.
		n := max(c.h2conns, 1)
		if c.proto == "h3" {
			n = 1
		}
		var closers []func()
		closeAll := func() {
			for _, f := range closers {
				f()
			}
		}
		var rts []http.RoundTripper
		for range n {
			rt, closeRT, err := roundTripper(c.proto, c.addr, c.sni, c.roots)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			rts, closers = append(rts, rt), append(closers, closeRT)
		}
		url := "https://" + c.sni + c.path
		major := wantMajor(c.proto)
		var ws []worker
		for i := range c.conns {
			client := &http.Client{Transport: rts[i%len(rts)]}
			req, err := http.NewRequest(http.MethodGet, url, nil)
			if err != nil {
				closeAll()
				return nil, nil, err
			}
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			ws = append(ws, func() error {
				resp, err := client.Do(req)
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					return fmt.Errorf("status %d", resp.StatusCode)
				}
				if resp.ProtoMajor != major {
					return fmt.Errorf("got %s, want HTTP/%d", resp.Proto, major)
				}
				return err
			})
		}
		return ws, closeAll, nil
	}
	return nil, nil, fmt.Errorf("unknown -proto %q", c.proto)
}

// h1Worker is a lean HTTP/1.1 client on one keep-alive connection: a fixed
// request, a response parser that only looks at the status, Content-Length
// and chunked coding. It keeps the load generator's share of the two cores
// small, so that what is measured is the path, not the client.
func h1Worker(tc *tls.Conn, host, path, auth string) worker {
	head := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: mitmbench\r\nAccept: */*\r\n"
	if auth != "" {
		head += "Authorization: " + auth + "\r\n"
	}
	req := []byte(head + "\r\n")
	br := bufio.NewReaderSize(tc, 32<<10)
	return func() error {
		if _, err := tc.Write(req); err != nil {
			return err
		}
		return readH1Response(br)
	}
}

var (
	errBadStatus = errors.New("response status is not 200")
	clPrefix     = []byte("content-length:")
	tePrefix     = []byte("transfer-encoding:")
)

func readH1Response(br *bufio.Reader) error {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 200 ")) {
		return fmt.Errorf("%w: %q", errBadStatus, bytes.TrimSpace(line))
	}
	cl, chunked := int64(-1), false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		switch {
		case hasPrefixFold(line, clPrefix):
			cl, err = strconv.ParseInt(string(bytes.TrimSpace(line[len(clPrefix):])), 10, 64)
			if err != nil {
				return fmt.Errorf("bad Content-Length %q", line)
			}
		case hasPrefixFold(line, tePrefix):
			chunked = bytes.Contains(bytes.ToLower(line), []byte("chunked"))
		}
	}
	switch {
	case chunked:
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return err
			}
			size, err := strconv.ParseInt(string(bytes.TrimSpace(bytes.SplitN(line, []byte(";"), 2)[0])), 16, 64)
			if err != nil {
				return fmt.Errorf("bad chunk size %q", line)
			}
			if size == 0 {
				for { // trailers up to the empty line
					line, err := br.ReadSlice('\n')
					if err != nil {
						return err
					}
					if len(bytes.TrimRight(line, "\r\n")) == 0 {
						return nil
					}
				}
			}
			if _, err := br.Discard(int(size) + 2); err != nil {
				return err
			}
		}
	case cl >= 0:
		_, err := br.Discard(int(cl))
		return err
	}
	return errors.New("response has neither Content-Length nor chunked coding")
}

func hasPrefixFold(b, prefix []byte) bool {
	return len(b) >= len(prefix) && bytes.EqualFold(b[:len(prefix)], prefix)
}
