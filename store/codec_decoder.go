package store

import (
	"encoding/binary"
	"fmt"
)

// The decoder reads the fields of an event value, or of an element inside
// it, in the format drawn in codec.go. It is what hostile bytes meet first:
// every length is checked against what is left, every varint and field
// number against its range, and what it cannot read is an error wrapping
// ErrCorrupt, never a panic (FuzzDecodeEvent).

// A field is one tag and its value, as the decoder read it.
type field struct {
	num, wire int
	u         uint64 // the value of wire type 0
	s         []byte // the value of wire type 2
	element   bool   // inside an element of a repeated message
}

// want checks that f has the wire type its number has.
func (f *field) want(wire int) error {
	if f.wire == wire {
		return nil
	}
	return wireError{f.num, f.wire, wire, f.element}
}

// A wireError is a field whose wire type is not the one its number has. It
// is a value, made without a call, so that want and the setX that use it
// stay small enough to be inlined (with a fmt.Errorf in want they were
// not, and decoding a file event took 2% more instructions, by
// cachegrind).
type wireError struct {
	num, got, want int
	element        bool
}

// Error: at the top level decodeEvent names the field in front of the
// error; inside an element the error names it itself, after ErrCorrupt.
func (e wireError) Error() string {
	if e.element {
		return fmt.Sprintf("%v: field %d: wire type %d, want %d", ErrCorrupt, e.num, e.got, e.want)
	}
	return fmt.Sprintf("%v: wire type %d, want %d", ErrCorrupt, e.got, e.want)
}

func (wireError) Unwrap() error { return ErrCorrupt }

type decoder struct {
	b       []byte
	element bool // decoding an element of a repeated message
}

// errVarint is made once, not at each error: with the fmt.Errorf call in
// it uvarint, the decoder's busiest function, costs more on every call
// (decoding a net event took 1.3% more instructions, by cachegrind).
var errVarint = fmt.Errorf("%w: truncated or overlong varint", ErrCorrupt)

func (d *decoder) uvarint() (uint64, error) {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		return 0, errVarint
	}
	d.b = d.b[n:]
	return v, nil
}

func (d *decoder) tag() (num, wire int, err error) {
	t, err := d.uvarint()
	if err != nil {
		return 0, 0, err
	}
	if t>>3 == 0 || t>>3 > 1<<20 {
		return 0, 0, fmt.Errorf("%w: field number %d out of range", ErrCorrupt, t>>3)
	}
	return int(t >> 3), int(t & 7), nil
}

// field reads one tag and its value into f: u for wire type 0, s for wire
// type 2.
func (d *decoder) field(f *field) error {
	var err error
	f.element = d.element
	f.num, f.wire, err = d.tag()
	if err != nil {
		return err
	}
	switch f.wire {
	case wireVarint:
		f.u, err = d.uvarint()
	case wireBytes:
		f.s, err = d.bytes()
	default:
		return fmt.Errorf("%w: field %d has unknown wire type %d", ErrCorrupt, f.num, f.wire)
	}
	if err != nil {
		return fmt.Errorf("field %d: %w", f.num, err)
	}
	return nil
}

func (d *decoder) bytes() ([]byte, error) {
	n, err := d.uvarint()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(d.b)) {
		return nil, fmt.Errorf("%w: length %d runs past the end of the value (%d bytes left)", ErrCorrupt, n, len(d.b))
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s, nil
}
