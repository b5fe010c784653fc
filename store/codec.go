package store

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// This file draws the encoding of an event value and holds its envelope;
// each kind's fields are in a file of their own (codec_dns.go, codec_net.go,
// codec_modelcall.go, codec_exec.go, codec_fs.go, codec_agent.go,
// codec_recording.go, codec_mcpcall.go), how each Go type is written as a field value in
// codec_wire.go, and how a value is read field by field, bounds checked,
// in codec_decoder.go.
//
// STABILITY: this is an on-disk format. Every store any capsem has written
// holds it, and a change that an older capsem cannot read, or that reads
// an older record differently (a renumbered field, a field given another
// wire type or meaning, a new wire type, another framing), breaks every
// existing store. The numbers and constants below and in the codec_*.go
// files are part of the format and must not be changed: add fields and
// kinds, never change or reuse one.
//
// Event values, version 1:
//
//	byte 0       version (1)
//	bytes 1..8   wall time, Unix nanoseconds, int64 big-endian
//	bytes 9..    fields, in any order, each a tag then a value
//
// A tag is a uvarint: field number << 3 | wire type. Wire type 0 is a uvarint
// (signed integers are zig-zag encoded, as in protobuf); wire type 2 is a
// uvarint length followed by that many bytes. Zero values are not written.
// A reader skips fields whose number it does not know, so fields and kinds
// are added without a new version; the version byte changes only if this
// framing does. The session id and the sequence number live in the key, not
// the value.
//
// Addresses are stored as their 4 or 16 bytes (an IPv6 zone is not kept).
// A bool is a uvarint 1 (false is not written). A float64 is a uvarint of
// its IEEE 754 bits with the bytes reversed, so that round values (0.5, 3)
// take two or three bytes; NaN and ±Inf are not written (they read as 0).
// A repeated message (a model call's tool calls and tool results) is one
// wire-type-2 field per element, holding the element's own fields, tagged
// with numbers local to it; an element with every field zero is an empty
// field, so the count of elements is kept. Readers skip unknown fields
// inside an element as they do outside. A repeated string (an exec's argv)
// is one wire-type-2 field per element, empty elements included. A
// time.Time inside a payload (an exec's start, a file event's guest time)
// is a zig-zag uvarint of its Unix nanoseconds, written whenever the time
// is not the zero time (so the Unix epoch itself is kept); it reads back
// in UTC.
//
// Field numbers: 1–15 the envelope, 16–63 DNS, 64–127 Net, 128–191 kept for
// a separate http kind, 192–255 ModelCall, 256–319 Exec, 320–383 FS,
// 384–447 Agent, 448–511 Recording, 512–575 MCPCall; each future kind takes its own block.
// Numbers are never reused. Fields added after the first release, which
// older records do not have and read as zero: DNS count (24), FS guest time
// (325), Net http version (87), the Agent, Recording and MCPCall kinds.
const eventVersion = 1

const (
	wireVarint = 0
	wireBytes  = 2
)

const timeOffset = 1 // the wall time sits at value[1:9]
const headerLen = 9  // version + time

// Envelope fields.
const (
	fKind = 1
	// fPrev (2) is the hash chain's prev: chain.go draws it.
)

// ErrCorrupt is wrapped by the errors readers return for a record they
// cannot decode.
var ErrCorrupt = errors.New("corrupt record")

// ErrUnknownVersion is wrapped by the errors readers return for a record
// written in an encoding this build does not know (a newer capsem).
var ErrUnknownVersion = errors.New("unknown record version")

// appendEvent appends the encoding of ev to b. The time slot holds ev.Time,
// or 0 when it is zero (Append patches it).
func appendEvent(b []byte, ev *Event) []byte {
	return appendFields(appendHeader(b, ev), ev)
}

// appendChainedEvent is appendEvent with the hash chain's slot at its
// fixed place (chain.go), zeroed: the Writer fills it.
func appendChainedEvent(b []byte, ev *Event) []byte {
	b = append(appendHeader(b, ev), fPrev<<3|wireBytes, sha256.Size)
	b = append(b, make([]byte, sha256.Size)...)
	return appendFields(b, ev)
}

func appendHeader(b []byte, ev *Event) []byte {
	var t int64
	if !ev.Time.IsZero() {
		t = ev.Time.UnixNano()
	}
	b = append(b, eventVersion)
	return binary.BigEndian.AppendUint64(b, uint64(t))
}

// appendFields appends ev's fields after the header.
func appendFields(b []byte, ev *Event) []byte {
	b = appendString(b, fKind, string(ev.Kind))
	if ev.DNS != nil {
		b = ev.DNS.appendTo(b)
	}
	if ev.Net != nil {
		b = ev.Net.appendTo(b)
	}
	if ev.ModelCall != nil {
		b = ev.ModelCall.appendTo(b)
	}
	if ev.Exec != nil {
		b = ev.Exec.appendTo(b)
	}
	if ev.FS != nil {
		b = ev.FS.appendTo(b)
	}
	if ev.Agent != nil {
		b = ev.Agent.appendTo(b)
	}
	if ev.Recording != nil {
		b = ev.Recording.appendTo(b)
	}
	if ev.MCPCall != nil {
		b = ev.MCPCall.appendTo(b)
	}
	return b
}

// DecodeEvent decodes a stored event value (Store.Values) into ev, as
// the store's readers do: Session and Seq are left as they are.
func DecodeEvent(v []byte, ev *Event) error { return decodeEvent(v, ev) }

// decodeEvent decodes an event value into ev (Session and Seq are left as
// they are: they come from the key). It never panics on bad input.
func decodeEvent(v []byte, ev *Event) error {
	if len(v) == 0 {
		return fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	if v[0] != eventVersion {
		return fmt.Errorf("%w %d (this build reads version %d; the store was written by a newer capsem, or is damaged)",
			ErrUnknownVersion, v[0], eventVersion)
	}
	if len(v) < headerLen {
		return fmt.Errorf("%w: value of %d bytes is shorter than the %d-byte header", ErrCorrupt, len(v), headerLen)
	}
	if t := int64(binary.BigEndian.Uint64(v[timeOffset:])); t != 0 {
		ev.Time = time.Unix(0, t).UTC()
	} else {
		ev.Time = time.Time{}
	}
	ev.Kind, ev.DNS, ev.Net, ev.ModelCall, ev.Exec, ev.FS, ev.Agent, ev.Recording, ev.MCPCall = "", nil, nil, nil, nil, nil, nil, nil, nil
	d := decoder{b: v[headerLen:]}
	var f field
	for len(d.b) > 0 {
		if err := d.field(&f); err != nil {
			return err
		}
		if err := ev.setField(f); err != nil {
			return fmt.Errorf("field %d: %w", f.num, err)
		}
	}
	switch {
	case ev.Kind == KindDNS && ev.DNS == nil:
		ev.DNS = &DNS{}
	case ev.Kind == KindNet && ev.Net == nil:
		ev.Net = &Net{}
	case ev.Kind == KindModelCall && ev.ModelCall == nil:
		ev.ModelCall = &ModelCall{}
	case ev.Kind == KindExec && ev.Exec == nil:
		ev.Exec = &Exec{}
	case ev.Kind == KindFS && ev.FS == nil:
		ev.FS = &FS{}
	case ev.Kind == KindAgent && ev.Agent == nil:
		ev.Agent = &Agent{}
	case ev.Kind == KindRecording && ev.Recording == nil:
		ev.Recording = &Recording{}
	case ev.Kind == KindMCPCall && ev.MCPCall == nil:
		ev.MCPCall = &MCPCall{}
	}
	return nil
}

// setField hands f to the payload whose block its number is in, creating
// the payload, and skips a field this build does not know (from a newer
// writer) without creating one. Each block's numbers from its first to its
// known are all in use.
func (ev *Event) setField(f field) error {
	switch n := f.num; {
	case n == fKind:
		return setIntern(&f, &ev.Kind, kinds)
	case n >= dnsLo && n <= dnsKnown:
		if ev.DNS == nil {
			ev.DNS = &DNS{}
		}
		return ev.DNS.setField(f)
	case n >= netLo && n <= netKnown:
		if ev.Net == nil {
			ev.Net = &Net{}
		}
		return ev.Net.setField(f)
	case n >= mcLo && n <= mcKnown:
		if ev.ModelCall == nil {
			ev.ModelCall = &ModelCall{}
		}
		return ev.ModelCall.setField(f)
	case n >= execLo && n <= execKnown:
		if ev.Exec == nil {
			ev.Exec = &Exec{}
		}
		return ev.Exec.setField(f)
	case n >= fsLo && n <= fsKnown:
		if ev.FS == nil {
			ev.FS = &FS{}
		}
		return ev.FS.setField(f)
	case n >= agentLo && n <= agentKnown:
		if ev.Agent == nil {
			ev.Agent = &Agent{}
		}
		return ev.Agent.setField(f)
	case n >= recLo && n <= recKnown:
		if ev.Recording == nil {
			ev.Recording = &Recording{}
		}
		return ev.Recording.setField(f)
	case n >= mcpLo && n <= mcpKnown:
		if ev.MCPCall == nil {
			ev.MCPCall = &MCPCall{}
		}
		return ev.MCPCall.setField(f)
	}
	return nil // a field from a newer writer: skip it
}
