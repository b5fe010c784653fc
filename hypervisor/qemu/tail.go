package qemu

import (
	"strings"
	"sync"
)

// tailBuffer keeps the last tailMax bytes written to it (QEMU's stderr, for
// error messages).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// suffix is ": <stderr>" for an error message, or "" when QEMU said nothing.
func (t *tailBuffer) suffix() string {
	s := strings.TrimSpace(t.String())
	if s == "" {
		return ""
	}
	return ": " + s
}
