package netstack

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// MaxMTU is the largest MTU capsem accepts: the largest IPv4 packet that still
// fits, with its Ethernet header, in QEMU's and passt's 16-bit-friendly frames.
const MaxMTU = 65520

// maxFrame bounds one Ethernet frame on any transport: an MTU-sized packet
// plus the 14-byte Ethernet header, with slack for peers that pad.
const maxFrame = MaxMTU + 14 + 2

// maxStreamLength is the largest length prefix tolerated on a stream before
// it is treated as corruption (lost framing) rather than an oversize frame.
const maxStreamLength = 1 << 20

// ErrCorruptStream is returned when a stream's length prefix cannot be a
// frame: the peer is not speaking QEMU framing or the stream lost sync.
var ErrCorruptStream = errors.New("frame stream corrupt: length prefix out of range (is the peer using QEMU stream framing?)")

// FrameConn carries Ethernet frames between a guest NIC and the stack.
//
// ReadFrame is called from one goroutine; the returned slice is only valid
// until the next ReadFrame. WriteFrames is called with the link's write lock
// held: buf holds the frames back to back, each preceded by FramingOverhead
// reserved bytes the transport may fill in; frames are subslices of buf.
type FrameConn interface {
	ReadFrame() ([]byte, error)
	FramingOverhead() int
	WriteFrames(buf []byte, frames [][]byte) error
	Close() error
}

// streamConn speaks QEMU's stream/socket framing: a 4-byte big-endian length,
// then the frame. passt and gvproxy's qemu mode use the same framing.
type streamConn struct {
	c       net.Conn
	r       *bufio.Reader
	pending int // bytes of the previous frame still to discard
	big     []byte
	vecs    [][]byte // WriteFrameVecs' iovecs, reused
}

// NewStreamConn wraps a connected stream socket (unix or socketpair) that
// carries QEMU-framed Ethernet frames.
func NewStreamConn(c net.Conn) FrameConn {
	growSocketBuffers(c)
	return &streamConn{c: c, r: bufio.NewReaderSize(c, 256<<10)}
}

// socketBuffer is the kernel buffer asked for on frame sockets: deep enough
// that a burst of jumbo frames is fetched with one read, not one per frame.
const socketBuffer = 4 << 20

func growSocketBuffers(c net.Conn) {
	if b, ok := c.(interface {
		SetReadBuffer(int) error
		SetWriteBuffer(int) error
	}); ok {
		b.SetReadBuffer(socketBuffer)
		b.SetWriteBuffer(socketBuffer)
	}
}

func (s *streamConn) ReadFrame() ([]byte, error) {
	if s.pending > 0 {
		if _, err := s.r.Discard(s.pending); err != nil {
			return nil, err
		}
		s.pending = 0
	}
	for {
		hdr, err := s.r.Peek(4)
		if err != nil {
			if errors.Is(err, io.EOF) && len(hdr) > 0 {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		n := int(binary.BigEndian.Uint32(hdr))
		if _, err := s.r.Discard(4); err != nil {
			return nil, err
		}
		if n > maxStreamLength {
			return nil, ErrCorruptStream
		}
		if n == 0 {
			continue
		}
		if n <= s.r.Size() {
			frame, err := s.r.Peek(n)
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return nil, err
			}
			s.pending = n
			return frame, nil
		}
		// Larger than the read buffer: only possible for oversize frames,
		// which the link drops; copy so the stream stays in sync.
		if cap(s.big) < n {
			s.big = make([]byte, n)
		}
		if _, err := io.ReadFull(s.r, s.big[:n]); err != nil {
			return nil, err
		}
		return s.big[:n], nil
	}
}

func (s *streamConn) FramingOverhead() int { return 4 }

// Buffered reports whether another frame's header is already read in: the
// next ReadFrame will not block (used to decide whether to coalesce).
func (s *streamConn) Buffered() bool { return s.r.Buffered()-s.pending >= 4 }

func (s *streamConn) WriteFrames(buf []byte, frames [][]byte) error {
	for _, f := range frames {
		// The 4 reserved bytes sit right before each frame inside buf.
		start := cap(buf) - cap(f)
		binary.BigEndian.PutUint32(buf[start-4:start], uint32(len(f)))
	}
	_, err := s.c.Write(buf)
	return err
}

// WriteFrameVecs writes the frames, length prefixes filled in, with
// writev: a jumbo frame goes from gVisor's buffers to the socket without a
// copy in between.
func (s *streamConn) WriteFrameVecs(frames []frameVec) error {
	vecs := s.vecs[:0]
	for _, f := range frames {
		binary.BigEndian.PutUint32(f.head, uint32(f.n))
		vecs = append(vecs, f.head)
		vecs = append(vecs, f.parts...)
	}
	s.vecs = vecs
	bufs := net.Buffers(vecs)
	_, err := bufs.WriteTo(s.c)
	clear(vecs)
	return err
}

func (s *streamConn) Close() error { return s.c.Close() }

// datagramConn carries one frame per datagram or packet: vfkit's unixgram
// and bess's unixpacket (SOCK_SEQPACKET) transports, and a socketpair with
// QEMU's `-netdev dgram`.
type datagramConn struct {
	c   net.Conn
	buf []byte
}

// NewDatagramConn wraps a connected datagram or seqpacket socket.
func NewDatagramConn(c net.Conn) FrameConn {
	growSocketBuffers(c)
	return &datagramConn{c: c, buf: make([]byte, maxFrame+1)}
}

func (d *datagramConn) ReadFrame() ([]byte, error) {
	for {
		n, err := d.c.Read(d.buf)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		return d.buf[:n], nil
	}
}

func (d *datagramConn) FramingOverhead() int { return 0 }

func (d *datagramConn) WriteFrames(_ []byte, frames [][]byte) error {
	for _, f := range frames {
		if _, err := d.c.Write(f); err != nil {
			return err
		}
	}
	return nil
}

func (d *datagramConn) Close() error { return d.c.Close() }

// Listener hands out guest connections, one at a time.
type Listener interface {
	// Accept waits for the next guest. It returns net.ErrClosed once the
	// listener is closed.
	Accept() (FrameConn, error)
	Close() error
	// QEMUNetdev is the -netdev argument a QEMU user passes to reach this
	// listener, or "" when QEMU cannot use it directly.
	QEMUNetdev() string
	String() string
}

// Listen opens a listener from a gvproxy-style address:
//
//	unix:///path        QEMU stream framing (`-netdev stream`)
//	unixgram:///path    one frame per datagram (vfkit)
//	unixpacket:///path  one frame per packet (bess)
//
// A stale socket file at path is replaced; any other existing file is an error.
func Listen(address string) (Listener, error) {
	u, err := url.Parse(address)
	if err != nil || u.Path == "" || u.Host != "" {
		return nil, fmt.Errorf("listen address %q: want unix:///abs/path, unixgram:///abs/path or unixpacket:///abs/path", address)
	}
	path := u.Path
	if err := removeStaleSocket(u.Scheme, path); err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "unix", "unixpacket":
		l, err := net.ListenUnix(u.Scheme, &net.UnixAddr{Name: path, Net: u.Scheme})
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", address, err)
		}
		return &unixListener{l: l, scheme: u.Scheme, path: path}, nil
	case "unixgram":
		c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", address, err)
		}
		return newOnceListener(&vfkitConn{c: c, buf: make([]byte, maxFrame+1)}, address, ""), nil
	default:
		return nil, fmt.Errorf("listen address %q: unknown scheme %q (use unix, unixgram or unixpacket)", address, u.Scheme)
	}
}

// removeStaleSocket removes a socket file left behind by a process that is
// gone. A socket something still listens on is never taken over.
func removeStaleSocket(network, path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket: remove it or choose another path", path)
	}
	if c, err := net.DialTimeout(network, path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("%s is in use: another process listens on it; stop it or choose another path", path)
	}
	return os.Remove(path)
}

type unixListener struct {
	l      *net.UnixListener
	scheme string
	path   string
}

func (u *unixListener) Accept() (FrameConn, error) {
	c, err := u.l.Accept()
	if err != nil {
		return nil, err
	}
	if u.scheme == "unixpacket" {
		return NewDatagramConn(c), nil
	}
	return NewStreamConn(c), nil
}

func (u *unixListener) Close() error { return u.l.Close() }

func (u *unixListener) QEMUNetdev() string {
	if u.scheme != "unix" {
		return ""
	}
	return "-netdev stream,id=net0,server=off,addr.type=unix,addr.path=" + u.path
}

func (u *unixListener) String() string { return u.scheme + "://" + u.path }

// onceListener yields a single, already connected FrameConn, then blocks
// until closed.
type onceListener struct {
	mu     sync.Mutex
	conn   FrameConn
	done   chan struct{}
	once   sync.Once
	name   string
	netdev string
}

func newOnceListener(c FrameConn, name, netdev string) *onceListener {
	return &onceListener{conn: c, done: make(chan struct{}), name: name, netdev: netdev}
}

func (o *onceListener) Accept() (FrameConn, error) {
	o.mu.Lock()
	c := o.conn
	o.conn = nil
	o.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-o.done
	return nil, net.ErrClosed
}

func (o *onceListener) Close() error {
	o.once.Do(func() { close(o.done) })
	o.mu.Lock()
	c := o.conn
	o.conn = nil
	o.mu.Unlock()
	if c != nil {
		return c.Close()
	}
	return nil
}

func (o *onceListener) QEMUNetdev() string { return o.netdev }
func (o *onceListener) String() string     { return o.name }

// ListenFD wraps an inherited socket: a listening unix stream or seqpacket
// socket (each accepted guest is served in turn) or an already connected
// stream, datagram or seqpacket socket (a socketpair end shared with QEMU).
func ListenFD(fd int) (Listener, error) {
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return nil, fmt.Errorf("fd %d is not a socket: %w", fd, err)
	}
	accepting, _ := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
	f := os.NewFile(uintptr(fd), "fd"+strconv.Itoa(fd))
	name := "fd://" + strconv.Itoa(fd)
	if accepting == 1 {
		l, err := net.FileListener(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("fd %d: %w", fd, err)
		}
		ul, ok := l.(*net.UnixListener)
		if !ok {
			l.Close()
			return nil, fmt.Errorf("fd %d: listening socket is not a unix socket", fd)
		}
		scheme := "unix"
		if typ == unix.SOCK_SEQPACKET {
			scheme = "unixpacket"
		}
		return &unixListener{l: ul, scheme: scheme, path: name}, nil
	}
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("fd %d: %w", fd, err)
	}
	switch typ {
	case unix.SOCK_STREAM:
		return newOnceListener(NewStreamConn(c), name, ""), nil
	case unix.SOCK_DGRAM, unix.SOCK_SEQPACKET:
		return newOnceListener(NewDatagramConn(c), name, ""), nil
	}
	c.Close()
	return nil, fmt.Errorf("fd %d: unsupported socket type %d", fd, typ)
}

// vfkitMagic is the datagram vfkit sends first to announce its address.
var vfkitMagic = []byte("VFKT")

// vfkitConn is a bound, initially unconnected unixgram socket: the first
// datagram names the peer, and the socket is then connected to it so reads
// and writes need no per-frame address handling.
type vfkitConn struct {
	c         *net.UnixConn
	buf       []byte
	connected atomic.Bool
}

func (v *vfkitConn) ReadFrame() ([]byte, error) {
	for {
		if !v.connected.Load() {
			n, addr, err := v.c.ReadFromUnix(v.buf)
			if err != nil {
				return nil, err
			}
			if addr == nil || addr.Name == "" {
				continue // an unbound sender cannot be answered
			}
			if err := connectUnixgram(v.c, addr.Name); err != nil {
				return nil, fmt.Errorf("connect to vfkit peer %s: %w", addr.Name, err)
			}
			v.connected.Store(true)
			if n == len(vfkitMagic) && string(v.buf[:n]) == string(vfkitMagic) {
				continue
			}
			return v.buf[:n], nil
		}
		n, err := v.c.Read(v.buf)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			continue
		}
		return v.buf[:n], nil
	}
}

func (v *vfkitConn) FramingOverhead() int { return 0 }

func (v *vfkitConn) WriteFrames(_ []byte, frames [][]byte) error {
	if !v.connected.Load() {
		return nil // no peer yet: nothing can be delivered
	}
	for _, f := range frames {
		if _, err := v.c.Write(f); err != nil {
			return err
		}
	}
	return nil
}

func (v *vfkitConn) Close() error { return v.c.Close() }

func connectUnixgram(c *net.UnixConn, path string) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var cerr error
	err = rc.Control(func(fd uintptr) {
		cerr = unix.Connect(int(fd), &unix.SockaddrUnix{Name: path})
	})
	if err != nil {
		return err
	}
	return cerr
}
