package hypervisor

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// DefaultConsoleLogMax is the console log's size cap when Config does not
// set one. A boot with capsem.debug=1 writes ~20 KiB and a kernel oops
// ~10 KiB, so 8 MiB keeps everything a person reads; a guest writing to
// its serial port without end (7.5 MB in 15 s was measured) is held to it.
const DefaultConsoleLogMax = 8 << 20

// ConsoleHint is what an error about the guest ends with to point at its
// console log: " (console log: PATH)", or "" when none is kept.
func (c *Config) ConsoleHint() string {
	if c.ConsoleLog == "" {
		return ""
	}
	return " (console log: " + c.ConsoleLog + ")"
}

// ConsoleLog writes a guest's console to a file and keeps at most max
// bytes of it: the first three quarters as they come, then, once that part
// is full, the latest quarter in memory, written after a line saying how
// much was dropped when the log is closed. What a person needs is at the
// two ends: the boot, and what happened last.
type ConsoleLog struct {
	mu      sync.Mutex
	f       *os.File
	head    int64  // bytes still to write before the head is full
	tail    []byte // ring of the latest bytes once the head is full
	tailPos int    // next write position in tail
	wrapped bool   // tail has been filled at least once
	dropped int64  // bytes neither in the head nor in the tail
	closed  bool
}

// CreateConsoleLog creates (or truncates) path, mode 0600. max ≤ 0 means
// DefaultConsoleLogMax.
func CreateConsoleLog(path string, max int64) (*ConsoleLog, error) {
	if max <= 0 {
		max = DefaultConsoleLogMax
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("hypervisor: console log: %w", err)
	}
	tail := max / 4
	return &ConsoleLog{f: f, head: max - tail, tail: make([]byte, 0, tail)}, nil
}

// Write keeps p within the cap. It never fails because of the cap: bytes
// beyond it are counted.
func (l *ConsoleLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := len(p)
	if l.closed {
		return n, nil
	}
	if l.head > 0 {
		k := int(min(int64(len(p)), l.head))
		if _, err := l.f.Write(p[:k]); err != nil {
			return 0, fmt.Errorf("hypervisor: console log: %w", err)
		}
		l.head -= int64(k)
		p = p[k:]
	}
	l.keepTail(p)
	return n, nil
}

// keepTail puts p into the ring, counting what it pushes out.
func (l *ConsoleLog) keepTail(p []byte) {
	c := cap(l.tail)
	if c == 0 {
		l.dropped += int64(len(p))
		return
	}
	if len(p) > c {
		l.dropped += int64(len(p) - c)
		p = p[len(p)-c:]
	}
	for len(p) > 0 {
		if len(l.tail) < c {
			k := min(c-len(l.tail), len(p))
			l.tail = append(l.tail, p[:k]...)
			l.tailPos = len(l.tail) % c
			p = p[k:]
			continue
		}
		k := copy(l.tail[l.tailPos:], p)
		l.dropped += int64(k)
		l.wrapped = true
		l.tailPos = (l.tailPos + k) % c
		p = p[k:]
	}
}

// Dropped reports the bytes the cap has dropped so far.
func (l *ConsoleLog) Dropped() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// Copy writes everything r gives until it ends, then closes the log.
func (l *ConsoleLog) Copy(r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = l.Write(buf[:n])
		}
		if err != nil {
			break
		}
	}
	_ = l.Close()
}

// Close writes the kept tail, after a line saying how much was dropped,
// and closes the file.
func (l *ConsoleLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var err error
	if len(l.tail) > 0 {
		if l.dropped > 0 {
			_, err = fmt.Fprintf(l.f, "\n[capsem: the console log is capped; %d bytes were dropped here, the last %d follow]\n", l.dropped, len(l.tail))
		}
		if err == nil && l.wrapped {
			_, err = l.f.Write(l.tail[l.tailPos:])
			if err == nil {
				_, err = l.f.Write(l.tail[:l.tailPos])
			}
		} else if err == nil {
			_, err = l.f.Write(l.tail)
		}
	}
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}
