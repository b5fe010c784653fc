package main

import (
	"net"
	"time"
)

// delayRelay stands between the paths and the upstream when -upstream-rtt
// is set, so that the upstream is as far away as a remote API: each chunk
// read one way is written on half a round trip later, and the first bytes
// the client sends are held one round trip more, for the TCP handshake a
// relay on loopback cannot slow down. A client that opens a connection
// per request then pays for the upstream's handshakes in time, as it
// does on a real network, not only in CPU.
type delayRelay struct {
	ln     net.Listener
	target string
	rtt    time.Duration
}

func startDelayRelay(target string, rtt time.Duration) (*delayRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d := &delayRelay{ln: ln, target: target, rtt: rtt}
	go d.serve()
	return d, nil
}

func (d *delayRelay) port() int { return d.ln.Addr().(*net.TCPAddr).Port }

func (d *delayRelay) close() { d.ln.Close() }

func (d *delayRelay) serve() {
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		go d.relay(c.(*net.TCPConn))
	}
}

func (d *delayRelay) relay(c *net.TCPConn) {
	defer c.Close()
	u, err := net.Dial("tcp", d.target)
	if err != nil {
		return
	}
	defer u.Close()
	done := make(chan struct{})
	go func() {
		delayCopy(u.(*net.TCPConn), c, d.rtt/2, d.rtt)
		close(done)
	}()
	delayCopy(c, u.(*net.TCPConn), d.rtt/2, 0)
	<-done
}

type chunk struct {
	b  []byte
	at time.Time
}

// delayCopy copies src to dst, each chunk delay after it was read (the
// first one first more later), and half-closes dst at src's end.
func delayCopy(dst, src *net.TCPConn, delay, first time.Duration) {
	ch := make(chan chunk, 256)
	go func() {
		defer close(ch)
		for extra := first; ; extra = 0 {
			b := make([]byte, 64<<10)
			n, err := src.Read(b)
			if n > 0 {
				ch <- chunk{b[:n], time.Now().Add(delay + extra)}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range ch {
		time.Sleep(time.Until(c.at))
		if _, err := dst.Write(c.b); err != nil {
			src.Close()
			for range ch {
			}
			return
		}
	}
	dst.CloseWrite()
}
