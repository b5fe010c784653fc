package h3get

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// probeTimeout bounds a Migrate probe: the guest is a hop from capsem, so
// a path not validated in 2 s (quic-go probes again after 200 ms,
// doubling: four probes) counts as refused.
const probeTimeout = 2 * time.Second

// Fetch does req and returns what happened; it never panics on a failure
// of the network, which it reports in Result.Err.
func Fetch(req Request) Result {
	roots, err := loadRoots(req.CA)
	if err != nil {
		return Result{Err: err.Error()}
	}
	tlsConf := &tls.Config{RootCAs: roots, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	first := dial(req, tlsConf)
	defer first.close()
	res := first.get(req)
	if res.Err != "" {
		return res
	}
	switch {
	case req.Resume:
		again := dial(req, tlsConf)
		defer again.close()
		r := again.get(req)
		res.Again = &r
	case req.Migrate:
		if err := first.migrate(); err != nil {
			res.PathErr = err.Error()
		}
		r := first.get(req)
		res.Again = &r
	}
	return res
}

func loadRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return x509.SystemCertPool()
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, errors.New("h3get: no certificate in " + file)
	}
	return roots, nil
}

// conn is one http3.Transport and the QUIC connection it dialled.
type conn struct {
	tr    *http3.Transport
	qc    *quic.Conn
	raddr *net.UDPAddr
	socks []connectedUDP
}

func dial(req Request, tlsConf *tls.Config) *conn {
	c := &conn{}
	c.tr = &http3.Transport{
		TLSClientConfig: tlsConf,
		QUICConfig:      &quic.Config{HandshakeIdleTimeout: req.timeout()},
		Dial: func(ctx context.Context, addr string, tlsCfg *tls.Config, cfg *quic.Config) (*quic.Conn, error) {
			if req.Addr != "" {
				addr = req.Addr
			}
			if req.SNI != "" {
				tlsCfg = tlsCfg.Clone()
				tlsCfg.ServerName = req.SNI
			}
			raddr, err := net.ResolveUDPAddr("udp4", addr)
			if err != nil {
				return nil, err
			}
			u, err := dialUDP(raddr)
			if err != nil {
				return nil, err
			}
			c.raddr = raddr
			c.socks = append(c.socks, u)
			qc, err := quic.DialEarly(ctx, u, raddr, tlsCfg, cfg)
			c.qc = qc
			return qc, err
		},
	}
	return c
}

func (c *conn) close() {
	c.tr.Close()
	for _, u := range c.socks {
		u.Close()
	}
}

// get does one GET over c's connection (dialling it the first time).
func (c *conn) get(req Request) Result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), req.timeout())
	defer cancel()
	r := c.roundTrip(ctx, req)
	r.Millis = time.Since(start).Milliseconds()
	if c.qc != nil {
		st := c.qc.ConnectionState()
		r.Resumed, r.Used0RTT = st.TLS.DidResume, st.Used0RTT
	}
	return r
}

func (c *conn) roundTrip(ctx context.Context, req Request) Result {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, req.URL, nil)
	if err != nil {
		return Result{Err: err.Error()}
	}
	if req.Mark != "" {
		hreq.Header.Set("X-H3-Mark", req.Mark)
	}
	resp, err := c.tr.RoundTrip(hreq)
	if err != nil {
		return Result{Err: err.Error(), Refused: errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused")}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	r := Result{Status: resp.StatusCode, Proto: resp.Proto, Body: string(body)}
	if err != nil {
		r.Err = "reading the body: " + err.Error()
	}
	return r
}

// migrate moves c's connection to a new socket (another local port): it
// probes the new path and switches to it once validated.
func (c *conn) migrate() error {
	if c.qc == nil {
		return errors.New("h3get: no connection to migrate")
	}
	u, err := dialUDP(c.raddr)
	if err != nil {
		return err
	}
	c.socks = append(c.socks, u)
	path, err := c.qc.AddPath(&quic.Transport{Conn: u})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if err := path.Probe(ctx); err != nil {
		path.Close()
		return err
	}
	return path.Switch()
}
