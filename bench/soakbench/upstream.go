package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// upstream is the server the guest's allowed flows reach, on host loopback.
// Each connection sends one command line:
//
//	H            hold: stay open, idle, until the guest closes
//	P n          write n bytes, close
//	S n rate     write n bytes at rate bytes/s, close
//	U n          read n bytes, answer "ok\n", close
type upstream struct {
	ln    net.Listener
	held  atomic.Int64 // connections holding (H) now
	conns atomic.Int64 // connections accepted
	wg    sync.WaitGroup
}

// zeros is what the upstream sends.
var zeros = make([]byte, 64<<10)

func startUpstream() (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	u := &upstream{ln: ln}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.conns.Add(1)
			go u.serve(c)
		}
	}()
	return u, nil
}

func (u *upstream) port() int { return u.ln.Addr().(*net.TCPAddr).Port }

func (u *upstream) close() {
	u.ln.Close()
	u.wg.Wait()
}

func (u *upstream) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReaderSize(c, 256)
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := r.ReadString('\n')
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	f := strings.Fields(line)
	arg := func(i int) int64 {
		if i >= len(f) {
			return 0
		}
		n, _ := strconv.ParseInt(f[i], 10, 64)
		return n
	}
	switch f[0] {
	case "H":
		u.held.Add(1)
		io.Copy(io.Discard, r)
		u.held.Add(-1)
	case "P":
		writeN(c, arg(1), 0)
	case "S":
		writeN(c, arg(1), arg(2))
	case "U":
		if _, err := io.CopyN(io.Discard, r, arg(1)); err == nil {
			c.Write([]byte("ok\n"))
		}
	}
}

// writeN writes n bytes, paced at rate bytes/s when rate > 0.
func writeN(c net.Conn, n, rate int64) {
	start := time.Now()
	var sent int64
	for sent < n {
		chunk := min(int64(len(zeros)), n-sent)
		if _, err := c.Write(zeros[:chunk]); err != nil {
			return
		}
		sent += chunk
		if rate > 0 {
			due := start.Add(time.Duration(float64(sent) / float64(rate) * float64(time.Second)))
			time.Sleep(time.Until(due))
		}
	}
}

// closedPort returns a loopback port nothing listens on: a SYN to it is
// refused.
func closedPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	p := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return p, nil
}
