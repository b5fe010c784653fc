package proto

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame layout (all integers big-endian):
//
//	length  uint32   bytes that follow the length field: 5 + len(body)
//	type    uint8    the message type (Type)
//	id      uint32   the session id, 0 for messages that belong to no session
//	body    []byte   raw bytes for Stdin/Stdout/Stderr, 5 bytes for Window,
//	                 nothing for StdinClose, JSON for every other type
const (
	// HeaderLen is the size of a frame's header: length, type and id.
	HeaderLen = 9
	// MaxFrame is the largest value the length field may hold. A longer
	// frame is a protocol error: the reader refuses it before allocating.
	MaxFrame = 1 << 20
	// MaxBody is the largest body a frame can carry.
	MaxBody = MaxFrame - 5
	// MaxData is the largest data chunk (Stdin, Stdout, Stderr) this package
	// sends in one frame. Receivers accept anything up to MaxBody.
	MaxData = 32 << 10
)

var (
	// ErrFrameTooLarge is returned by the reader for a length field above
	// MaxFrame, and by the writer for a body above MaxBody.
	ErrFrameTooLarge = errors.New("proto: frame too large")
	// ErrFrameTooShort is returned by the reader for a length field below 5
	// (a frame must hold at least its type and id).
	ErrFrameTooShort = errors.New("proto: frame too short")
)

// Frame is one unit on the wire. Body is owned by the frame: the reader
// allocates a new one for every frame, so it may be kept.
type Frame struct {
	Type Type
	ID   uint32
	Body []byte
}

// AppendFrame appends f's wire encoding to dst.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	if len(f.Body) > MaxBody {
		return dst, fmt.Errorf("%w: %d-byte body of %v (max %d)", ErrFrameTooLarge, len(f.Body), f.Type, MaxBody)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(5+len(f.Body)))
	dst = append(dst, byte(f.Type))
	dst = binary.BigEndian.AppendUint32(dst, f.ID)
	return append(dst, f.Body...), nil
}

// WriteFrame writes f to w in a single Write call.
func WriteFrame(w io.Writer, f Frame) error {
	b, err := AppendFrame(make([]byte, 0, HeaderLen+len(f.Body)), f)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Reader decodes frames from a byte stream. It is not safe for concurrent
// use.
type Reader struct {
	r   *bufio.Reader
	hdr [HeaderLen]byte
}

// NewReader returns a Reader that reads frames from r (buffered).
func NewReader(r io.Reader) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10)}
}

// ReadFrame reads the next frame. At a clean frame boundary at the end of
// the stream it returns io.EOF; a stream that ends inside a frame gives
// io.ErrUnexpectedEOF. A length field outside 5..MaxFrame gives
// ErrFrameTooShort or ErrFrameTooLarge; the stream cannot be resynchronised
// after that and should be closed.
func (r *Reader) ReadFrame() (Frame, error) {
	if _, err := io.ReadFull(r.r, r.hdr[:4]); err != nil {
		return Frame{}, err // io.EOF at a boundary, io.ErrUnexpectedEOF inside
	}
	n := binary.BigEndian.Uint32(r.hdr[:4])
	switch {
	case n < 5:
		return Frame{}, fmt.Errorf("%w: length %d", ErrFrameTooShort, n)
	case n > MaxFrame:
		return Frame{}, fmt.Errorf("%w: length %d (max %d)", ErrFrameTooLarge, n, MaxFrame)
	}
	if _, err := io.ReadFull(r.r, r.hdr[4:]); err != nil {
		return Frame{}, noEOF(err)
	}
	f := Frame{Type: Type(r.hdr[4]), ID: binary.BigEndian.Uint32(r.hdr[5:9])}
	if n > 5 {
		f.Body = make([]byte, n-5)
		if _, err := io.ReadFull(r.r, f.Body); err != nil {
			return Frame{}, noEOF(err)
		}
	}
	return f, nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
