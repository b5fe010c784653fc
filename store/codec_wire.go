package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"time"
)

// How each Go type is written as a field value, and read back, in the
// format drawn in codec.go (an on-disk format: see the warning there). Each
// type has an appendX that writes a tag and a value, zero values left out,
// and a setX (addX for one element of a repeated field) that checks a
// decoded field's wire type and sets *p; a kind's appendTo and setField
// (codec_dns.go, …) use the pair of each field's type, so a field's wire
// type is chosen in one place on each side.

func appendTag(b []byte, num, wire int) []byte {
	return binary.AppendUvarint(b, uint64(num)<<3|uint64(wire))
}

func appendString(b []byte, num int, s string) []byte {
	if s == "" {
		return b
	}
	b = appendTag(b, num, wireBytes)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func setString(f *field, p *string) error {
	if err := f.want(wireBytes); err != nil {
		return err
	}
	*p = string(f.s)
	return nil
}

// setIntern is setString for a field whose common values are listed: see
// intern.
func setIntern[T ~string](f *field, p *T, common []T) error {
	if err := f.want(wireBytes); err != nil {
		return err
	}
	*p = intern(f.s, common)
	return nil
}

// appendStrings writes a repeated string: one field per element, empty
// elements included.
func appendStrings(b []byte, num int, ss []string) []byte {
	for _, s := range ss {
		b = appendTag(b, num, wireBytes) // empty words too
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return b
}

// addString reads one element of a repeated string.
func addString(f *field, p *[]string) error {
	if err := f.want(wireBytes); err != nil {
		return err
	}
	*p = append(*p, string(f.s))
	return nil
}

func appendUint(b []byte, num int, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = appendTag(b, num, wireVarint)
	return binary.AppendUvarint(b, v)
}

func appendInt(b []byte, num int, v int64) []byte {
	return appendUint(b, num, zigzag(v))
}

// setInt reads what appendInt wrote, into an int, an int64 or a
// time.Duration (nanoseconds).
func setInt[T ~int | ~int64](f *field, p *T) error {
	if err := f.want(wireVarint); err != nil {
		return err
	}
	*p = T(unzigzag(f.u))
	return nil
}

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// setPort reads a port written with appendUint.
func setPort(f *field, p *uint16) error {
	if err := f.want(wireVarint); err != nil {
		return err
	}
	if f.u > 0xffff {
		return fmt.Errorf("%w: port %d out of range", ErrCorrupt, f.u)
	}
	*p = uint16(f.u)
	return nil
}

func appendBool(b []byte, num int, v bool) []byte {
	if !v {
		return b
	}
	return appendUint(b, num, 1)
}

func setBool(f *field, p *bool) error {
	if err := f.want(wireVarint); err != nil {
		return err
	}
	*p = f.u != 0
	return nil
}

// appendTime writes t unless it is the zero time; see the format in codec.go.
func appendTime(b []byte, num int, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = appendTag(b, num, wireVarint) // even when 0: the epoch is not the zero time
	return binary.AppendUvarint(b, zigzag(t.UnixNano()))
}

func setTime(f *field, p *time.Time) error {
	if err := f.want(wireVarint); err != nil {
		return err
	}
	*p = time.Unix(0, unzigzag(f.u)).UTC()
	return nil
}

// appendFloat writes a finite, non-zero v; see the format in codec.go.
func appendFloat(b []byte, num int, v float64) []byte {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return b
	}
	return appendUint(b, num, bits.ReverseBytes64(math.Float64bits(v)))
}

func setFloat(f *field, p *float64) error {
	if err := f.want(wireVarint); err != nil {
		return err
	}
	v := math.Float64frombits(bits.ReverseBytes64(f.u))
	if math.IsNaN(v) || math.IsInf(v, 0) {
		v = 0 // never written; a reader must not hand them on
	}
	*p = v
	return nil
}

func appendAddr(b []byte, num int, a netip.Addr) []byte {
	switch {
	case a.Is4():
		b = appendTag(b, num, wireBytes)
		a4 := a.As4()
		b = append(b, 4)
		return append(b, a4[:]...)
	case a.Is6():
		b = appendTag(b, num, wireBytes)
		a16 := a.As16()
		b = append(b, 16)
		return append(b, a16[:]...)
	}
	return b // the zero Addr is not written
}

func setAddr(f *field, a *netip.Addr) error {
	if err := f.want(wireBytes); err != nil {
		return err
	}
	switch len(f.s) {
	case 4:
		*a = netip.AddrFrom4([4]byte(f.s))
	case 16:
		*a = netip.AddrFrom16([16]byte(f.s))
	default:
		return fmt.Errorf("%w: address of %d bytes, want 4 or 16", ErrCorrupt, len(f.s))
	}
	return nil
}

// appendHeaders writes one field per header: uvarint len(name), name, value.
func appendHeaders(b []byte, num int, hs []Header) []byte {
	for _, h := range hs {
		n := uvarintLen(uint64(len(h.Name))) + len(h.Name) + len(h.Value)
		b = appendTag(b, num, wireBytes)
		b = binary.AppendUvarint(b, uint64(n))
		b = binary.AppendUvarint(b, uint64(len(h.Name)))
		b = append(b, h.Name...)
		b = append(b, h.Value...)
	}
	return b
}

// addHeader reads one field written by appendHeaders.
func addHeader(f *field, hs *[]Header) error {
	if err := f.want(wireBytes); err != nil {
		return err
	}
	s := f.s
	n, k := binary.Uvarint(s)
	if k <= 0 || n > uint64(len(s)-k) {
		return fmt.Errorf("%w: bad header name length", ErrCorrupt)
	}
	name := s[k : k+int(n)]
	*hs = append(*hs, Header{Name: string(name), Value: string(s[k+int(n):])})
	return nil
}

// An element of a repeated message (a tool call, a tool result) is a type
// whose setField reads one of its fields, numbered locally to it. Its
// fields are written after the element's tag; prefixLength then makes
// them the tag's value.
type element[T any] interface {
	*T
	setField(f field) error
}

// prefixLength turns the bytes b[start:] into a wire-type-2 value by
// inserting their length before them, in place: a nested message is
// written first and measured after, with no second buffer.
func prefixLength(b []byte, start int) []byte {
	n := len(b) - start
	k := uvarintLen(uint64(n))
	b = append(b, make([]byte, k)...)
	copy(b[start+k:], b[start:start+n])
	binary.PutUvarint(b[start:], uint64(n))
	return b
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// addElement reads one element of a repeated message (what names it in
// errors: "tool call") and appends it to *out.
func addElement[T any, P element[T]](f *field, what string, out *[]T) error {
	if err := f.want(wireBytes); err != nil {
		return err
	}
	var zero T
	*out = append(*out, zero)
	// Set in place: a local handed to setField through the type parameter
	// escapes, one allocation per element (7 more for fullModelCall).
	e := P(&(*out)[len(*out)-1])
	d := decoder{b: f.s, element: true}
	var ef field
	for len(d.b) > 0 {
		err := d.field(&ef)
		if err == nil {
			err = e.setField(ef)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}
