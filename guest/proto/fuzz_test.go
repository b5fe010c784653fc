package proto

import (
	"bytes"
	"errors"
	"io"
	"testing"
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
