package proto

import (
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// socketPair is a connected AF_UNIX stream pair served by the Go poller, as
// the host's end of the control channel is under QEMU.
func socketPair(tb testing.TB) (net.Conn, net.Conn) {
	tb.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		tb.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "pair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			tb.Fatal(err)
		}
		conns[i] = c
	}
	tb.Cleanup(func() { conns[0].Close(); conns[1].Close() })
	return conns[0], conns[1]
}

// BenchmarkSend is the host's hot path on the control channel: stdin
// frames of MaxData bytes (a file put over the channel, piped stdin) and
// the small frames of output credit (Window) and signals, to a peer that
// drains them.
func BenchmarkSend(b *testing.B) {
	for _, bc := range []struct {
		name string
		m    Message
	}{
		{"stdin-32KiB", Stdin{ID: 1, Data: make([]byte, MaxData)}},
		{"window", Window{ID: 1, Stream: StreamStdout, N: 64 << 10}},
		{"signal", Signal{ID: 1, Sig: "INT"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h, g := socketPair(b)
			go func() { _, _ = io.Copy(io.Discard, g) }()
			c := NewConnTimeout(h, DefaultWriteTimeout)
			defer c.Close()
			f, _ := Encode(bc.m)
			b.SetBytes(int64(HeaderLen + len(f.Body)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := c.Send(bc.m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
