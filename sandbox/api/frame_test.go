package api

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// Frames round-trip; data longer than a frame is split; a reader refuses
// what a writer never sends.
func TestFrames(t *testing.T) {
	var buf bytes.Buffer
	big := bytes.Repeat([]byte{7}, MaxFramePayload+10)
	for _, f := range []struct {
		typ  byte
		data []byte
	}{{FrameStdout, []byte("hi")}, {FrameStdinClose, nil}, {FrameStderr, big}} {
		if err := WriteFrame(&buf, f.typ, f.data); err != nil {
			t.Fatal(err)
		}
	}
	var got [][]byte
	var types []byte
	for {
		typ, p, err := ReadFrame(&buf, nil)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, typ)
		got = append(got, append([]byte(nil), p...))
	}
	if !bytes.Equal(types, []byte{FrameStdout, FrameStdinClose, FrameStderr, FrameStderr}) {
		t.Fatalf("types %v: a payload over MaxFramePayload must be split in two frames of its type", types)
	}
	if string(got[0]) != "hi" || len(got[1]) != 0 || len(got[2]) != MaxFramePayload || len(got[3]) != 10 {
		t.Errorf("payload lengths %d %d %d %d", len(got[0]), len(got[1]), len(got[2]), len(got[3]))
	}

	for _, c := range []struct {
		in   []byte
		want error
		why  string
	}{
		{[]byte{1, 0, 0, 0, 0x00, 0x10, 0x00, 0x01}, ErrFrameTooLarge, "a length over 1 MiB is refused before any allocation"},
		{[]byte{1, 0, 0, 0, 0, 0, 0, 5, 'a'}, io.ErrUnexpectedEOF, "a payload cut short"},
		{[]byte{1, 0, 0}, io.ErrUnexpectedEOF, "a header cut short"},
	} {
		if _, _, err := ReadFrame(bytes.NewReader(c.in), nil); !errors.Is(err, c.want) {
			t.Errorf("ReadFrame(%x) = %v, want %v (%s)", c.in, err, c.want, c.why)
		}
	}
	if _, _, err := ReadFrame(bytes.NewReader([]byte{1, 9, 0, 0, 0, 0, 0, 0}), nil); err == nil {
		t.Error("a header with non-zero reserved bytes was accepted")
	}
}

// FuzzReadFrame: whatever a client sends, ReadFrame returns a frame whose
// payload is what the header announced, or an error; what it accepts,
// WriteFrame writes back byte for byte.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 2, 'h', 'i'})
	f.Add([]byte{5, 0, 0, 0, 0, 0, 0, 3, 'I', 'N', 'T'})
	f.Add([]byte{6, 0, 0, 0, 0, 0, 0, 4, 0, 40, 0, 120})
	f.Add([]byte{3, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, in []byte) {
		typ, p, err := ReadFrame(bytes.NewReader(in), nil)
		if err != nil {
			return
		}
		if len(p) > MaxFramePayload {
			t.Fatalf("payload of %d bytes", len(p))
		}
		var out bytes.Buffer
		if err := WriteFrame(&out, typ, p); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(out.Bytes(), in[:FrameHeaderLen+len(p)]) {
			t.Fatalf("round trip: %x → %x", in[:FrameHeaderLen+len(p)], out.Bytes())
		}
	})
}
