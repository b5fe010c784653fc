package tests

import (
	"compress/gzip"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/capsem/capsem/mitm/ca"
)

// testCA is a CA of the tests' own, standing in for a public CA: the
// upstream servers present leaves of it, and capsem is told to trust it
// through [upstream] ca_files. It is made by mitm/ca, like capsem's own.
type testCA struct {
	auth    *ca.Authority
	pemPath string
}

// newTestCA makes a CA in a directory of the test's; what names it is said
// by the variable that holds it.
func newTestCA(t *testing.T, _ string) *testCA {
	t.Helper()
	a, err := ca.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{auth: a, pemPath: a.CertPath()}
}

func (c *testCA) leaf(t *testing.T, names ...string) tls.Certificate {
	t.Helper()
	l, err := c.auth.LeafFor(names...)
	if err != nil {
		t.Fatal(err)
	}
	return *l
}

// startHTTPS serves h over TLS (HTTP/2 and HTTP/1.1) on loopback with a
// leaf of ca for names.
func startHTTPS(t *testing.T, ca *testCA, h http.Handler, names ...string) int {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshakes the MITM refuses are expected
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.leaf(t, names...)}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// upstreamHandler is the test web service behind the MITM.
func upstreamHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/hello", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s via %s path=%s", r.Host, r.Proto, r.URL.Path)
	})
	// /remote says which of the upstream's connections the request came
	// over.
	mux.HandleFunc("/remote", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "remote=%s", r.RemoteAddr)
	})
	mux.HandleFunc("/admin/", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "the admin page: capsem should never let the guest see this")
	})
	mux.HandleFunc("/echo-headers", func(w http.ResponseWriter, r *http.Request) {
		for k, v := range r.Header {
			fmt.Fprintf(w, "%s: %s\n", k, v)
		}
	})
	mux.HandleFunc("/upload", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "received %d bytes", n)
	})
	// /sse sends an event, waits, sends another: a buffering proxy would
	// deliver both together.
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 3 {
			if i > 0 {
				time.Sleep(700 * time.Millisecond)
			}
			fmt.Fprintf(w, "event: tick\ndata: {\"n\":%d}\n\n", i)
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/gzip", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		for range 100 {
			io.WriteString(gz, "compressed hello, decoded on the side for the preview\n")
		}
		gz.Close()
	})
	// /bytes?n=N streams N bytes of a repeating pattern.
	mux.HandleFunc("/bytes", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 256<<10)
		for i := range buf {
			buf[i] = byte(i * 7)
		}
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	})
	// /ws accepts a WebSocket upgrade and then echoes raw bytes.
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") != "websocket" {
			http.Error(w, "want a websocket upgrade", http.StatusBadRequest)
			return
		}
		sum := sha1.Sum([]byte(r.Header.Get("Sec-WebSocket-Key") + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
		c, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			base64.StdEncoding.EncodeToString(sum[:]))
		brw.Flush()
		io.Copy(c, brw)
	})
	return mux
}
