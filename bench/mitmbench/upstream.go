package main

import (
	"bufio"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
)

// upstreamNames are the names the upstream's leaf certificate carries.
var upstreamNames = []string{"mitm.test", "pass.test", "h2up.test"}

// pattern is what /bytes streams, 256 KiB at a time.
var pattern = func() []byte {
	b := make([]byte, 256<<10)
	for i := range b {
		b[i] = byte(i * 7)
	}
	return b
}()

// upstreamHandler serves /ping (4 bytes), /bytes?n=N (N bytes) and
// /upload (reads the body, answers its length).
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
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		// A loop of its own: io.Copy to io.Discard reads 8 KiB at a time,
		// and the upstream's CPU is best kept out of the way.
		buf := make([]byte, 256<<10)
		var n int64
		for {
			k, err := r.Body.Read(buf)
			n += int64(k)
			if err == io.EOF {
				break
			}
			if err != nil {
				http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%d", n)
	})
	return mux
}

// authCheck refuses a request whose Authorization header is there but not
// one of allowed: through the mitm-secrets path that is a placeholder the
// MITM did not replace. It counts the requests carrying allowed[0] (the
// real value), the proof that substitution happened.
type authCheck struct {
	next    http.Handler
	allowed []string
	real    atomic.Int64
}

func (a *authCheck) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if v, ok := r.Header["Authorization"]; ok {
		switch {
		case len(a.allowed) > 0 && len(v) == 1 && v[0] == a.allowed[0]:
			a.real.Add(1)
		case len(v) == 1 && slices.Contains(a.allowed[min(1, len(a.allowed)):], v[0]):
		default:
			http.Error(w, "Authorization is not a token of the benchmark (a placeholder the MITM did not replace?)", http.StatusForbidden)
			return
		}
	}
	a.next.ServeHTTP(w, r)
}

// multiFlag is a flag that may be given more than once.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// upstreamMain is the "upstream" sub-mode: an HTTPS server (HTTP/2 and
// HTTP/1.1) on 127.0.0.1, in a process of its own so that its CPU time can
// be told apart. It prints its port and serves until stdin closes.
func upstreamMain(args []string) {
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	certFile := fs.String("cert", "", "leaf certificate PEM")
	keyFile := fs.String("key", "", "leaf key PEM")
	var auth multiFlag
	fs.Var(&auth, "auth", "an Authorization value to accept (repeatable; the first is counted as the real value); any other is refused")
	h3 := fs.Bool("h3", false, "also serve HTTP/3 on the UDP port of the TCP port's number")
	fs.Parse(args)
	cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
	if err != nil {
		log.Fatal(err)
	}
	check := &authCheck{next: protoEcho{upstreamHandler()}, allowed: auth}
	var ln net.Listener
	if *h3 {
		ln = serveH3(cert, check)
	} else if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{
		Handler:   check,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	go func() {
		io.Copy(io.Discard, bufio.NewReader(os.Stdin))
		if len(auth) > 0 {
			fmt.Fprintf(os.Stderr, "mitmbench: the upstream received %d requests with the real value of BENCH_TOKEN\n", check.real.Load())
		}
		os.Exit(0)
	}()
	log.Fatal(srv.ServeTLS(ln, "", ""))
}
