package api

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The frames of a streamed exec (POST /v1/exec upgraded to capsem-exec, see
// docs/API.md). After the 101 response both directions of the connection
// carry frames:
//
//	 0      1      2      3      4      5      6      7
//	+------+------+------+------+------+------+------+------+
//	| type |  0   |  0   |  0   |  payload length, uint32  |
//	+------+------+------+------+------+------+------+------+
//	| payload (length bytes)                                 |
//	+--------------------------------------------------------+
//
// STABILITY: this layout and the type numbers are the API's wire format
// (docs/API.md, sdk/python). Types may be added; never renumbered or given
// another meaning. A reader ignores a frame of a type it does not know.
//
// Why this framing: output is bytes, not text, so a length prefix carries
// it without base64's third more or any escaping; stdout and stderr stay
// apart and in the order the command wrote them; the header is the one
// Docker's attach stream uses, which tools already read. Why an upgrade:
// an HTTP/1.1 request body and its response cannot stream both ways at
// once through most clients (Python's http.client sends the body, then
// reads), and a command's input and output must interleave.
const (
	FrameStdin      byte = 0 // client → server: bytes for the command's stdin
	FrameStdout     byte = 1 // server → client: the command's stdout (on a pty, all its output)
	FrameStderr     byte = 2 // server → client: the command's stderr
	FrameExit       byte = 3 // server → client, last: an Exit as JSON
	FrameStdinClose byte = 4 // client → server: end of stdin (empty payload)
	FrameSignal     byte = 5 // client → server: a signal by name without SIG ("INT", "TERM", "KILL")
	FrameResize     byte = 6 // client → server: the terminal's rows and columns, uint16 each, big-endian
)

// FrameHeaderLen is the length of a frame's header.
const FrameHeaderLen = 8

// MaxFramePayload is the largest payload a reader accepts. A writer
// splits longer data.
const MaxFramePayload = 1 << 20

// ErrFrameTooLarge is returned for a frame whose length is above
// MaxFramePayload.
var ErrFrameTooLarge = errors.New("api: frame longer than 1 MiB")

// WriteFrame writes one frame. Data longer than MaxFramePayload is split
// into several frames of the same type.
func WriteFrame(w io.Writer, typ byte, data []byte) error {
	for {
		n := min(len(data), MaxFramePayload)
		var h [FrameHeaderLen]byte
		h[0] = typ
		binary.BigEndian.PutUint32(h[4:], uint32(n))
		if _, err := w.Write(h[:]); err != nil {
			return err
		}
		if n > 0 {
			if _, err := w.Write(data[:n]); err != nil {
				return err
			}
		}
		data = data[n:]
		if len(data) == 0 {
			return nil
		}
	}
}

// ReadFrame reads one frame into buf (grown as needed) and returns its type
// and payload, which aliases buf.
func ReadFrame(r io.Reader, buf []byte) (typ byte, payload []byte, err error) {
	var h [FrameHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	if h[1]|h[2]|h[3] != 0 {
		return 0, nil, fmt.Errorf("api: frame header %x: bytes 1–3 must be zero", h)
	}
	n := binary.BigEndian.Uint32(h[4:])
	if n > MaxFramePayload {
		return 0, nil, ErrFrameTooLarge
	}
	if cap(buf) < int(n) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return h[0], buf, nil
}
