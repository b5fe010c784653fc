package proto

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// FuzzFrame feeds arbitrary bytes to the frame reader and decoder, as a
// hostile guest could. Neither may panic or allocate beyond MaxFrame; every
// frame read re-encodes to the bytes it came from; every decoded message
// re-encodes to a frame that decodes to the same encoding (a fixed point).
func FuzzFrame(f *testing.F) {
	for _, m := range sampleMessages() {
		fr, err := Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		b, _ := AppendFrame(nil, fr)
		f.Add(b)
	}
	var all []byte
	for _, m := range sampleMessages() {
		fr, _ := Encode(m)
		all, _ = AppendFrame(all, fr)
	}
	f.Add(all)
	f.Add([]byte{0, 0, 0, 5, 200, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 4})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 6, byte(TypeExec), 0, 0, 0, 1, '{'})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bytes.NewReader(data))
		off := 0
		for i := 0; i < 64; i++ {
			fr, err := r.ReadFrame()
			if err != nil {
				if err != io.EOF && !errors.Is(err, io.ErrUnexpectedEOF) &&
					!errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrFrameTooShort) {
					t.Fatalf("unexpected reader error %v", err)
				}
				return
			}
			enc, err := AppendFrame(nil, fr)
			if err != nil {
				t.Fatalf("re-encoding a frame that was read: %v", err)
			}
			if !bytes.Equal(enc, data[off:off+len(enc)]) {
				t.Fatalf("frame re-encodes differently")
			}
			off += len(enc)

			m, err := Decode(fr)
			if err != nil {
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("decode error not ErrMalformed: %v", err)
				}
				continue
			}
			f1, err := Encode(m)
			if err != nil {
				t.Fatalf("encode %T: %v", m, err)
			}
			m2, err := Decode(f1)
			if err != nil {
				t.Fatalf("decode of an encoded %T: %v", m, err)
			}
			f2, err := Encode(m2)
			if err != nil {
				t.Fatal(err)
			}
			if f1.Type != f2.Type || f1.ID != f2.ID || !bytes.Equal(f1.Body, f2.Body) {
				t.Fatalf("not a fixed point: %v %q vs %v %q", f1.Type, f1.Body, f2.Type, f2.Body)
			}
		}
	})
}

// gatedPeer is a guest that sends the handshake, waits until the host has
// opened session 1 (its Exec written), then sends data, and discards
// whatever the host writes.
type gatedPeer struct {
	hs, data []byte
	writes   atomic.Int64
	execSent chan struct{}
	once     sync.Once
	atEnd    func()
	endOnce  sync.Once
}

func (p *gatedPeer) Read(b []byte) (int, error) {
	if len(p.hs) > 0 {
		n := copy(b, p.hs)
		p.hs = p.hs[n:]
		return n, nil
	}
	<-p.execSent
	if len(p.data) == 0 {
		p.endOnce.Do(p.atEnd)
		return 0, io.EOF
	}
	n := copy(b, p.data)
	p.data = p.data[n:]
	return n, nil
}

func (p *gatedPeer) Write(b []byte) (int, error) {
	if p.writes.Add(1) == 2 { // the Hello, then the Exec
		p.once.Do(func() { close(p.execSent) })
	}
	return len(b), nil
}

func (p *gatedPeer) Close() error {
	p.once.Do(func() { close(p.execSent) })
	return nil
}

// FuzzClient plays a hostile agent against the host's Client after a valid
// handshake, with one session open: whatever it sends, the client must not
// panic, must end when the stream ends, must hold no more of the session's
// output than its window, and must not grow goroutines with what it reads.
func FuzzClient(f *testing.F) {
	for _, m := range sampleMessages() {
		fr, _ := Encode(m)
		b, _ := AppendFrame(nil, fr)
		f.Add(b)
	}
	var seq []byte
	for _, m := range []Message{Started{ID: 1, PID: 2}, Stdout{ID: 1, Data: []byte("out")}, Ping{Seq: 1}, Ping{Seq: 2},
		Window{ID: 1, Stream: StreamStdin, N: 10}, FileEvent{Action: "created", Path: "x"}, Exit{ID: 1}} {
		fr, _ := Encode(m)
		seq, _ = AppendFrame(seq, fr)
	}
	f.Add(seq)
	// A snapshot's answers nobody asked for, and another host's sessions.
	seq = nil
	for _, m := range []Message{Frozen{Refused: "busy", Holders: []string{"1 init (cwd)"}}, Thawed{Uptime: 1}, Stdout{ID: 9, Data: []byte("old")},
		Exit{ID: 9}, Started{ID: 1, PID: 2}, Frozen{}, Stdout{ID: 1, Data: []byte("out")}, Thawed{Warnings: []string{"w"}}, Exit{ID: 1}} {
		fr, _ := Encode(m)
		seq, _ = AppendFrame(seq, fr)
	}
	f.Add(seq)
	f.Fuzz(func(t *testing.T, data []byte) {
		const window = 4096
		var hs []byte
		for _, m := range []Message{Hello{Proto: Version, Window: 1024}, Ready{}} {
			fr, _ := Encode(m)
			hs, _ = AppendFrame(hs, fr)
		}
		base := runtime.NumGoroutine()
		grew, ended := 0, false
		p := &gatedPeer{hs: hs, data: data, execSent: make(chan struct{}), atEnd: func() { grew, ended = grownBy(base, 8), true }}
		cl, err := NewClient(context.Background(), p, ClientOptions{OnEvent: func(Message) {}})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var s *Session
		execDone := make(chan struct{})
		go func() {
			defer close(execDone)
			s, _ = cl.Exec(ctx, Exec{Argv: []string{"x"}, Window: window})
		}()
		select {
		case <-cl.Done():
		case <-ctx.Done():
			t.Fatal("the client did not end when the stream did")
		}
		<-execDone
		if s != nil {
			if n := s.stdout.Buffered() + s.stderr.Buffered(); n > 2*window {
				t.Fatalf("%d bytes of output held for a %d-byte window", n, window)
			}
		}
		if ended && grew > 8 {
			t.Fatalf("%d goroutines more than before the client, after reading %d bytes", grew, len(data))
		}
	})
}
