package mitm

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// WebSocket framing (RFC 6455 §5.2), read as it arrives.
//
// Once a WebSocket upgrade is through, the guest's bytes are frames: a
// 2-byte head (FIN, three reserved bits, opcode; MASK, a 7-bit length),
// 2 or 8 more bytes of length when the 7 bits say 126 or 127, the 4-byte
// masking key (every client frame has one), then the payload, XORed with
// the key. A message is one data frame (text or binary) with FIN set, or a
// data frame without FIN followed by continuation frames up to one with
// FIN; control frames (close, ping, pong) are never fragmented, carry at
// most 125 bytes and may come between the fragments of a message.
//
// wsParser reads them from bytes in pieces of any size and never holds
// more than a frame head: the payload is handed on (unmasked, for the
// scan) as it comes, so a frame of any length costs the same memory.

const (
	wsOpContinuation = 0x0
	wsOpText         = 0x1
	wsOpBinary       = 0x2
	wsOpClose        = 0x8
	wsOpPing         = 0x9
	wsOpPong         = 0xA
)

// Close status codes (RFC 6455 §7.4.1).
const (
	wsCloseProtocolError   = 1002
	wsClosePolicyViolation = 1008
)

// wsMaxControl is the longest control frame payload (§5.5).
const wsMaxControl = 125

// wsMaxHead is the longest frame head: 2 bytes, 8 of length, 4 of key.
const wsMaxHead = 14

// wsFrame is a frame's head.
type wsFrame struct {
	fin    bool
	rsv    byte // the three reserved bits, in place (0x70 of the first byte)
	op     byte
	masked bool
	mask   [4]byte
	length uint64
}

func (f *wsFrame) control() bool { return f.op&0x8 != 0 }

// wsOpName names an opcode for events and close reasons.
func wsOpName(op byte) string {
	switch op {
	case wsOpContinuation:
		return "continuation"
	case wsOpText:
		return "text"
	case wsOpBinary:
		return "binary"
	case wsOpClose:
		return "close"
	case wsOpPing:
		return "ping"
	case wsOpPong:
		return "pong"
	}
	return fmt.Sprintf("opcode-%#x", op)
}

// wsViolation is a frame that breaks RFC 6455: the connection is closed
// with 1002. A frame capsem cannot read is not forwarded, since what the
// upstream would make of it is what capsem cannot scan.
type wsViolation struct{ why string }

func (e *wsViolation) Error() string { return "mitm: websocket protocol violation: " + e.why }

// wsParser reads the frames of one direction of a WebSocket connection.
// With guest set it reads the client's side and enforces what RFC 6455
// asks of a client (and of a connection that negotiated no extension):
// every frame masked, no reserved bit, known opcodes, control frames short
// and unfragmented, continuation frames only inside a message. Without
// guest it only follows frame boundaries (the upstream's side, which
// capsem does not police).
type wsParser struct {
	guest bool

	head [wsMaxHead]byte
	hn   int // bytes of head read
	f    wsFrame
	body bool   // reading f's payload
	left uint64 // payload bytes of f still to come
	pos  uint64 // payload bytes of f read: the masking key's phase
	frag bool   // a fragmented data message is open
	err  error  // after a violation, nothing more is read
}

// midHead reports whether part of a frame head has been read.
func (p *wsParser) midHead() bool { return !p.body && p.hn > 0 }

// atBoundary reports whether the bytes read so far end on a frame's end.
func (p *wsParser) atBoundary() bool { return !p.body && p.hn == 0 && p.err == nil }

// headLen is how long the head being read is, as far as its bytes say: 2
// until the second byte is in.
func (p *wsParser) headLen() int {
	if p.hn < 2 {
		return 2
	}
	n := 2
	switch p.head[1] & 0x7f {
	case 126:
		n += 2
	case 127:
		n += 8
	}
	if p.head[1]&0x80 != 0 {
		n += 4
	}
	return n
}

// readHead takes head bytes from b; done when the head is complete (p.f
// is the frame, and its payload, if any, comes next). It never takes more
// than the head, and reports a violation as soon as the bytes read show
// it: the first two hold all but the 64-bit length's top bit, which is
// the third.
func (p *wsParser) readHead(b []byte) (n int, done bool, err error) {
	if p.err != nil {
		return 0, false, p.err
	}
	for n < len(b) {
		want := p.headLen()
		k := copy(p.head[p.hn:want], b[n:])
		p.hn += k
		n += k
		if p.guest && p.hn > 2 && p.head[1]&0x7f == 127 && p.head[2]&0x80 != 0 {
			p.err = &wsViolation{"a 64-bit payload length has its most significant bit set"}
			return n, false, p.err
		}
		if p.hn < want {
			break
		}
		if want == 2 && p.guest {
			if err := p.checkStart(); err != nil {
				p.err = err
				return n, false, err
			}
		}
		if p.headLen() > want {
			continue // the second byte lengthened the head
		}
		if err := p.decode(); err != nil {
			p.err = err
			return n, false, err
		}
		return n, true, nil
	}
	return n, false, nil
}

// decode parses a complete head and, for the guest, follows the
// fragmentation of messages.
func (p *wsParser) decode() error {
	h := p.head[:p.hn]
	f := wsFrame{fin: h[0]&0x80 != 0, rsv: h[0] & 0x70, op: h[0] & 0x0f, masked: h[1]&0x80 != 0}
	i := 2
	switch l := h[1] & 0x7f; l {
	case 126:
		f.length = uint64(binary.BigEndian.Uint16(h[2:4]))
		i = 4
	case 127:
		f.length = binary.BigEndian.Uint64(h[2:10])
		i = 10
	default:
		f.length = uint64(l)
	}
	if f.masked {
		copy(f.mask[:], h[i:i+4])
	}
	p.hn = 0
	if p.guest {
		if !f.control() {
			p.frag = !f.fin
		}
	}
	p.f = f
	p.left, p.pos = f.length, 0
	p.body = f.length > 0
	return nil
}

// checkStart applies RFC 6455's rules for a client's frame to the head's
// first two bytes.
func (p *wsParser) checkStart() error {
	h0, h1 := p.head[0], p.head[1]
	fin, op, len7 := h0&0x80 != 0, h0&0x0f, h1&0x7f
	switch {
	case h1&0x80 == 0:
		return &wsViolation{"a frame from the client is not masked (RFC 6455 §5.1)"}
	case h0&0x70 != 0:
		return &wsViolation{"a reserved bit is set, and no extension was negotiated"}
	}
	switch op {
	case wsOpClose, wsOpPing, wsOpPong:
		if !fin {
			return &wsViolation{"a " + wsOpName(op) + " frame is fragmented"}
		}
		if len7 > wsMaxControl {
			return &wsViolation{"a " + wsOpName(op) + " frame carries more than 125 bytes"}
		}
	case wsOpText, wsOpBinary:
		if p.frag {
			return &wsViolation{"a new " + wsOpName(op) + " message began before the fragmented one ended"}
		}
	case wsOpContinuation:
		if !p.frag {
			return &wsViolation{"a continuation frame with no message to continue"}
		}
	default:
		return &wsViolation{"reserved opcode " + wsOpName(op)}
	}
	return nil
}

// readBody takes payload bytes of the current frame from b, at most
// len(dst) of them, and writes them unmasked to dst (when dst is nil, it
// takes up to len(b) and unmasks nothing). The frame ends when p.body
// turns false.
func (p *wsParser) readBody(b, dst []byte) int {
	n := uint64(len(b))
	if dst != nil {
		n = min(n, uint64(len(dst)))
	}
	n = min(n, p.left)
	if dst != nil {
		if p.f.masked {
			for i := range n {
				dst[i] = b[i] ^ p.f.mask[(p.pos+i)&3]
			}
		} else {
			copy(dst, b[:n])
		}
	}
	p.left -= n
	p.pos += n
	if p.left == 0 {
		p.body = false
	}
	return int(n)
}

// follow reads b without looking at payloads: how a parser without guest
// keeps up with the frame boundaries of the upstream's side.
func (p *wsParser) follow(b []byte) {
	for len(b) > 0 && p.err == nil {
		if p.body {
			b = b[p.readBody(b, nil):]
			continue
		}
		n, _, _ := p.readHead(b)
		b = b[n:]
	}
}

// wsCloseFrame is a close frame from the server's side (unmasked) with
// code and reason, the reason cut to fit a control frame at a UTF-8
// boundary.
func wsCloseFrame(code uint16, reason string) []byte {
	if room := wsMaxControl - 2; len(reason) > room {
		reason = reason[:room]
		for !utf8.ValidString(reason) {
			reason = reason[:len(reason)-1]
		}
	}
	b := make([]byte, 0, 4+len(reason))
	b = append(b, 0x80|wsOpClose, byte(2+len(reason)))
	b = binary.BigEndian.AppendUint16(b, code)
	return append(b, reason...)
}
