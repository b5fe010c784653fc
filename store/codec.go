package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"time"
)

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
// 384–447 Agent, 448–511 Recording; each future kind takes its own block. Numbers are never
// reused. Fields added after the first release, which older records do not
// have and read as zero: DNS count (24), FS guest time (325), the Agent
// and Recording kinds.
//
// This format is on disk in every store: a change that an older capsem
// cannot read (a renumbered field, a new wire type, another framing) breaks
// the stores people have. Add fields and kinds; never change or reuse one.
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
)

// DNS fields.
const (
	fDNSQName         = 16
	fDNSQType         = 17
	fDNSTransport     = 18
	fDNSDecision      = 19
	fDNSReason        = 20
	fDNSMatchedRule   = 21
	fDNSAnswer        = 22
	fDNSResolverAsked = 23
	fDNSCount         = 24
)

// Net fields.
const (
	fNetDomain              = 64
	fNetIP                  = 65
	fNetPort                = 66
	fNetSrcIP               = 67
	fNetSrcPort             = 68
	fNetTransport           = 69
	fNetConnType            = 70
	fNetDecision            = 71
	fNetReason              = 72
	fNetMatchedRule         = 73
	fNetMethod              = 74
	fNetPath                = 75
	fNetQuery               = 76
	fNetStatusCode          = 77
	fNetBytesSent           = 78
	fNetBytesReceived       = 79
	fNetDuration            = 80 // nanoseconds
	fNetRequestHeader       = 81 // repeated: uvarint len(name), name, value
	fNetResponseHeader      = 82 // repeated
	fNetRequestBodyPreview  = 83
	fNetResponseBodyPreview = 84
	fNetCount               = 85
	fNetDetail              = 86
)

// ModelCall fields.
const (
	fMCProvider            = 192
	fMCDomain              = 193
	fMCModel               = 194
	fMCMethod              = 195
	fMCPath                = 196
	fMCStream              = 197 // bool
	fMCSystemPromptPreview = 198
	fMCMessagesCount       = 199
	fMCToolsCount          = 200
	fMCRequestBytes        = 201
	fMCRequestBodyPreview  = 202
	fMCMessageID           = 203
	fMCStatusCode          = 204
	fMCTextContent         = 205
	fMCThinkingContent     = 206
	fMCStopReason          = 207
	fMCInputTokens         = 208
	fMCOutputTokens        = 209
	fMCCacheReadTokens     = 210
	fMCCacheWriteTokens    = 211
	fMCDuration            = 212 // nanoseconds
	fMCResponseBytes       = 213
	fMCCostUSD             = 214 // float64
	fMCTraceID             = 215
	fMCUsageDetails        = 216
	fMCToolCall            = 217 // repeated message: the tool* fields below
	fMCToolResult          = 218 // repeated message: the result* fields below
)

// Exec fields.
const (
	fExecArgv     = 256 // repeated string
	fExecDir      = 257
	fExecTTY      = 258 // bool
	fExecPID      = 259
	fExecStart    = 260 // Unix nanoseconds, present unless the zero time
	fExecDuration = 261 // nanoseconds
	fExecExitCode = 262
	fExecSignal   = 263
)

// FS fields.
const (
	fFSAction    = 320
	fFSPath      = 321
	fFSOldPath   = 322
	fFSSize      = 323
	fFSDir       = 324 // bool
	fFSGuestTime = 325 // Unix nanoseconds, present unless the zero time
)

// Agent fields.
const (
	fAgentState  = 384
	fAgentDetail = 385
	fAgentCount  = 386
)

// Recording fields.
const (
	fRecState  = 448
	fRecDetail = 449
	fRecCount  = 450
)

// Fields of a tool call (inside fMCToolCall).
const (
	fToolIndex     = 1
	fToolCallID    = 2
	fToolName      = 3
	fToolArguments = 4
	fToolOrigin    = 5
)

// Fields of a tool result (inside fMCToolResult).
const (
	fResultCallID         = 1
	fResultContentPreview = 2
	fResultIsError        = 3 // bool
)

// The blocks of field numbers each payload owns (lo inclusive, hi exclusive),
// and the highest number this build knows in each.
const (
	dnsLo, dnsHi, dnsKnown       = 16, 64, fDNSCount
	netLo, netHi, netKnown       = 64, 128, fNetDetail
	mcLo, mcHi, mcKnown          = 192, 256, fMCToolResult
	execLo, execHi, execKnown    = 256, 320, fExecSignal
	fsLo, fsHi, fsKnown          = 320, 384, fFSGuestTime
	agentLo, agentHi, agentKnown = 384, 448, fAgentCount
	recLo, recHi, recKnown       = 448, 512, fRecCount
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
	var t int64
	if !ev.Time.IsZero() {
		t = ev.Time.UnixNano()
	}
	b = append(b, eventVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(t))
	b = appendString(b, fKind, string(ev.Kind))
	if d := ev.DNS; d != nil {
		b = appendString(b, fDNSQName, d.QName)
		b = appendString(b, fDNSQType, d.QType)
		b = appendString(b, fDNSTransport, string(d.Transport))
		b = appendString(b, fDNSDecision, string(d.Decision))
		b = appendString(b, fDNSReason, d.Reason)
		b = appendString(b, fDNSMatchedRule, d.MatchedRule)
		b = appendString(b, fDNSAnswer, d.Answer)
		b = appendAddr(b, fDNSResolverAsked, d.ResolverAsked)
		b = appendInt(b, fDNSCount, d.Count)
	}
	if n := ev.Net; n != nil {
		b = appendString(b, fNetDomain, n.Domain)
		b = appendAddr(b, fNetIP, n.IP)
		b = appendUint(b, fNetPort, uint64(n.Port))
		b = appendAddr(b, fNetSrcIP, n.SrcIP)
		b = appendUint(b, fNetSrcPort, uint64(n.SrcPort))
		b = appendString(b, fNetTransport, string(n.Transport))
		b = appendString(b, fNetConnType, string(n.ConnType))
		b = appendString(b, fNetDecision, string(n.Decision))
		b = appendString(b, fNetReason, n.Reason)
		b = appendString(b, fNetMatchedRule, n.MatchedRule)
		b = appendString(b, fNetMethod, n.Method)
		b = appendString(b, fNetPath, n.Path)
		b = appendString(b, fNetQuery, n.Query)
		b = appendInt(b, fNetStatusCode, int64(n.StatusCode))
		b = appendInt(b, fNetBytesSent, n.BytesSent)
		b = appendInt(b, fNetBytesReceived, n.BytesReceived)
		b = appendInt(b, fNetDuration, int64(n.Duration))
		b = appendHeaders(b, fNetRequestHeader, n.RequestHeaders)
		b = appendHeaders(b, fNetResponseHeader, n.ResponseHeaders)
		b = appendString(b, fNetRequestBodyPreview, n.RequestBodyPreview)
		b = appendString(b, fNetResponseBodyPreview, n.ResponseBodyPreview)
		b = appendInt(b, fNetCount, n.Count)
		b = appendString(b, fNetDetail, n.Detail)
	}
	if m := ev.ModelCall; m != nil {
		b = appendString(b, fMCProvider, m.Provider)
		b = appendString(b, fMCDomain, m.Domain)
		b = appendString(b, fMCModel, m.Model)
		b = appendString(b, fMCMethod, m.Method)
		b = appendString(b, fMCPath, m.Path)
		b = appendBool(b, fMCStream, m.Stream)
		b = appendString(b, fMCSystemPromptPreview, m.SystemPromptPreview)
		b = appendInt(b, fMCMessagesCount, int64(m.MessagesCount))
		b = appendInt(b, fMCToolsCount, int64(m.ToolsCount))
		b = appendInt(b, fMCRequestBytes, m.RequestBytes)
		b = appendString(b, fMCRequestBodyPreview, m.RequestBodyPreview)
		b = appendString(b, fMCMessageID, m.MessageID)
		b = appendInt(b, fMCStatusCode, int64(m.StatusCode))
		b = appendString(b, fMCTextContent, m.TextContent)
		b = appendString(b, fMCThinkingContent, m.ThinkingContent)
		b = appendString(b, fMCStopReason, m.StopReason)
		b = appendInt(b, fMCInputTokens, m.InputTokens)
		b = appendInt(b, fMCOutputTokens, m.OutputTokens)
		b = appendInt(b, fMCCacheReadTokens, m.CacheReadTokens)
		b = appendInt(b, fMCCacheWriteTokens, m.CacheWriteTokens)
		b = appendInt(b, fMCDuration, int64(m.Duration))
		b = appendInt(b, fMCResponseBytes, m.ResponseBytes)
		b = appendFloat(b, fMCCostUSD, m.CostUSD)
		b = appendString(b, fMCTraceID, m.TraceID)
		b = appendString(b, fMCUsageDetails, m.UsageDetails)
		for i := range m.ToolCalls {
			tc := &m.ToolCalls[i]
			b = appendTag(b, fMCToolCall, wireBytes)
			start := len(b)
			b = appendInt(b, fToolIndex, int64(tc.Index))
			b = appendString(b, fToolCallID, tc.CallID)
			b = appendString(b, fToolName, tc.Name)
			b = appendString(b, fToolArguments, tc.Arguments)
			b = appendString(b, fToolOrigin, tc.Origin)
			b = prefixLength(b, start)
		}
		for i := range m.ToolResults {
			tr := &m.ToolResults[i]
			b = appendTag(b, fMCToolResult, wireBytes)
			start := len(b)
			b = appendString(b, fResultCallID, tr.CallID)
			b = appendString(b, fResultContentPreview, tr.ContentPreview)
			b = appendBool(b, fResultIsError, tr.IsError)
			b = prefixLength(b, start)
		}
	}
	if x := ev.Exec; x != nil {
		for _, a := range x.Argv {
			b = appendTag(b, fExecArgv, wireBytes) // empty words too
			b = binary.AppendUvarint(b, uint64(len(a)))
			b = append(b, a...)
		}
		b = appendString(b, fExecDir, x.Dir)
		b = appendBool(b, fExecTTY, x.TTY)
		b = appendInt(b, fExecPID, int64(x.PID))
		b = appendTime(b, fExecStart, x.Start)
		b = appendInt(b, fExecDuration, int64(x.Duration))
		b = appendInt(b, fExecExitCode, int64(x.ExitCode))
		b = appendString(b, fExecSignal, x.Signal)
	}
	if f := ev.FS; f != nil {
		b = appendString(b, fFSAction, f.Action)
		b = appendString(b, fFSPath, f.Path)
		b = appendString(b, fFSOldPath, f.OldPath)
		b = appendInt(b, fFSSize, f.Size)
		b = appendBool(b, fFSDir, f.Dir)
		b = appendTime(b, fFSGuestTime, f.GuestTime)
	}
	if a := ev.Agent; a != nil {
		b = appendString(b, fAgentState, a.State)
		b = appendString(b, fAgentDetail, a.Detail)
		b = appendInt(b, fAgentCount, a.Count)
	}
	if r := ev.Recording; r != nil {
		b = appendString(b, fRecState, r.State)
		b = appendString(b, fRecDetail, r.Detail)
		b = appendInt(b, fRecCount, r.Count)
	}
	return b
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

// appendTime writes t unless it is the zero time; see the format above.
func appendTime(b []byte, num int, t time.Time) []byte {
	if t.IsZero() {
		return b
	}
	b = appendTag(b, num, wireVarint) // even when 0: the epoch is not the zero time
	return binary.AppendUvarint(b, zigzag(t.UnixNano()))
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

func zigzag(v int64) uint64 { return uint64(v<<1) ^ uint64(v>>63) }

func appendBool(b []byte, num int, v bool) []byte {
	if !v {
		return b
	}
	return appendUint(b, num, 1)
}

// appendFloat writes a finite, non-zero v; see the format above.
func appendFloat(b []byte, num int, v float64) []byte {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return b
	}
	return appendUint(b, num, bits.ReverseBytes64(math.Float64bits(v)))
}

func decodeFloat(u uint64) float64 {
	v := math.Float64frombits(bits.ReverseBytes64(u))
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0 // never written; a reader must not hand them on
	}
	return v
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

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

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
	ev.Kind, ev.DNS, ev.Net, ev.ModelCall, ev.Exec, ev.FS, ev.Agent, ev.Recording = "", nil, nil, nil, nil, nil, nil, nil
	d := decoder{b: v[headerLen:]}
	for len(d.b) > 0 {
		num, wire, u, s, err := d.field()
		if err != nil {
			return err
		}
		if err := ev.setField(num, wire, u, s); err != nil {
			return fmt.Errorf("field %d: %w", num, err)
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
	}
	return nil
}

// wireOf returns the wire type of a field this build knows, and false for
// a field from a newer writer.
func wireOf(num int) (int, bool) {
	switch {
	case num == fKind:
		return wireBytes, true
	case num >= dnsLo && num <= dnsKnown:
		if num == fDNSCount {
			return wireVarint, true
		}
		return wireBytes, true
	case num >= netLo && num <= netKnown:
		switch num {
		case fNetPort, fNetSrcPort, fNetStatusCode, fNetBytesSent, fNetBytesReceived, fNetDuration, fNetCount:
			return wireVarint, true
		}
		return wireBytes, true
	case num >= mcLo && num <= mcKnown:
		switch num {
		case fMCStream, fMCMessagesCount, fMCToolsCount, fMCRequestBytes, fMCStatusCode,
			fMCInputTokens, fMCOutputTokens, fMCCacheReadTokens, fMCCacheWriteTokens,
			fMCDuration, fMCResponseBytes, fMCCostUSD:
			return wireVarint, true
		}
		return wireBytes, true
	case num >= execLo && num <= execKnown:
		switch num {
		case fExecTTY, fExecPID, fExecStart, fExecDuration, fExecExitCode:
			return wireVarint, true
		}
		return wireBytes, true
	case num >= fsLo && num <= fsKnown:
		switch num {
		case fFSSize, fFSDir, fFSGuestTime:
			return wireVarint, true
		}
		return wireBytes, true
	case num >= agentLo && num <= agentKnown:
		if num == fAgentCount {
			return wireVarint, true
		}
		return wireBytes, true
	case num >= recLo && num <= recKnown:
		if num == fRecCount {
			return wireVarint, true
		}
		return wireBytes, true
	}
	return 0, false
}

func (ev *Event) setField(num, wire int, u uint64, s []byte) error {
	want, known := wireOf(num)
	if !known {
		return nil // a field from a newer writer: skip it
	}
	if wire != want {
		return fmt.Errorf("%w: wire type %d, want %d", ErrCorrupt, wire, want)
	}
	if num == fKind {
		ev.Kind = Kind(internKind(s))
		return nil
	}
	switch {
	case num >= recLo:
		if ev.Recording == nil {
			ev.Recording = &Recording{}
		}
		ev.Recording.setField(num, u, s)
		return nil
	case num >= agentLo:
		if ev.Agent == nil {
			ev.Agent = &Agent{}
		}
		ev.Agent.setField(num, u, s)
		return nil
	case num >= fsLo:
		if ev.FS == nil {
			ev.FS = &FS{}
		}
		ev.FS.setField(num, u, s)
		return nil
	case num >= execLo:
		if ev.Exec == nil {
			ev.Exec = &Exec{}
		}
		ev.Exec.setField(num, u, s)
		return nil
	case num >= mcLo:
		if ev.ModelCall == nil {
			ev.ModelCall = &ModelCall{}
		}
		return ev.ModelCall.setField(num, u, s)
	}
	if num < netLo {
		if ev.DNS == nil {
			ev.DNS = &DNS{}
		}
		d := ev.DNS
		switch num {
		case fDNSQName:
			d.QName = string(s)
		case fDNSQType:
			d.QType = string(s)
		case fDNSTransport:
			d.Transport = Transport(internTransport(s))
		case fDNSDecision:
			d.Decision = Decision(internDecision(s))
		case fDNSReason:
			d.Reason = string(s)
		case fDNSMatchedRule:
			d.MatchedRule = string(s)
		case fDNSAnswer:
			d.Answer = string(s)
		case fDNSResolverAsked:
			return decodeAddr(s, &d.ResolverAsked)
		case fDNSCount:
			d.Count = unzigzag(u)
		}
		return nil
	}
	if ev.Net == nil {
		ev.Net = &Net{}
	}
	n := ev.Net
	switch num {
	case fNetDomain:
		n.Domain = string(s)
	case fNetIP:
		return decodeAddr(s, &n.IP)
	case fNetPort:
		return decodePort(u, &n.Port)
	case fNetSrcIP:
		return decodeAddr(s, &n.SrcIP)
	case fNetSrcPort:
		return decodePort(u, &n.SrcPort)
	case fNetTransport:
		n.Transport = Transport(internTransport(s))
	case fNetConnType:
		n.ConnType = ConnType(internConnType(s))
	case fNetDecision:
		n.Decision = Decision(internDecision(s))
	case fNetReason:
		n.Reason = string(s)
	case fNetMatchedRule:
		n.MatchedRule = string(s)
	case fNetMethod:
		n.Method = internMethod(s)
	case fNetPath:
		n.Path = string(s)
	case fNetQuery:
		n.Query = string(s)
	case fNetStatusCode:
		n.StatusCode = int(unzigzag(u))
	case fNetBytesSent:
		n.BytesSent = unzigzag(u)
	case fNetBytesReceived:
		n.BytesReceived = unzigzag(u)
	case fNetDuration:
		n.Duration = time.Duration(unzigzag(u))
	case fNetRequestHeader:
		return decodeHeader(s, &n.RequestHeaders)
	case fNetResponseHeader:
		return decodeHeader(s, &n.ResponseHeaders)
	case fNetRequestBodyPreview:
		n.RequestBodyPreview = string(s)
	case fNetResponseBodyPreview:
		n.ResponseBodyPreview = string(s)
	case fNetCount:
		n.Count = unzigzag(u)
	case fNetDetail:
		n.Detail = string(s)
	}
	return nil
}

func (m *ModelCall) setField(num int, u uint64, s []byte) error {
	switch num {
	case fMCProvider:
		m.Provider = internProvider(s)
	case fMCDomain:
		m.Domain = internProviderDomain(s)
	case fMCModel:
		m.Model = string(s)
	case fMCMethod:
		m.Method = internMethod(s)
	case fMCPath:
		m.Path = string(s)
	case fMCStream:
		m.Stream = u != 0
	case fMCSystemPromptPreview:
		m.SystemPromptPreview = string(s)
	case fMCMessagesCount:
		m.MessagesCount = int(unzigzag(u))
	case fMCToolsCount:
		m.ToolsCount = int(unzigzag(u))
	case fMCRequestBytes:
		m.RequestBytes = unzigzag(u)
	case fMCRequestBodyPreview:
		m.RequestBodyPreview = string(s)
	case fMCMessageID:
		m.MessageID = string(s)
	case fMCStatusCode:
		m.StatusCode = int(unzigzag(u))
	case fMCTextContent:
		m.TextContent = string(s)
	case fMCThinkingContent:
		m.ThinkingContent = string(s)
	case fMCStopReason:
		m.StopReason = string(s)
	case fMCInputTokens:
		m.InputTokens = unzigzag(u)
	case fMCOutputTokens:
		m.OutputTokens = unzigzag(u)
	case fMCCacheReadTokens:
		m.CacheReadTokens = unzigzag(u)
	case fMCCacheWriteTokens:
		m.CacheWriteTokens = unzigzag(u)
	case fMCDuration:
		m.Duration = time.Duration(unzigzag(u))
	case fMCResponseBytes:
		m.ResponseBytes = unzigzag(u)
	case fMCCostUSD:
		m.CostUSD = decodeFloat(u)
	case fMCTraceID:
		m.TraceID = string(s)
	case fMCUsageDetails:
		m.UsageDetails = string(s)
	case fMCToolCall:
		return decodeToolCall(s, &m.ToolCalls)
	case fMCToolResult:
		return decodeToolResult(s, &m.ToolResults)
	}
	return nil
}

func (x *Exec) setField(num int, u uint64, s []byte) {
	switch num {
	case fExecArgv:
		x.Argv = append(x.Argv, string(s))
	case fExecDir:
		x.Dir = string(s)
	case fExecTTY:
		x.TTY = u != 0
	case fExecPID:
		x.PID = int(unzigzag(u))
	case fExecStart:
		x.Start = time.Unix(0, unzigzag(u)).UTC()
	case fExecDuration:
		x.Duration = time.Duration(unzigzag(u))
	case fExecExitCode:
		x.ExitCode = int(unzigzag(u))
	case fExecSignal:
		x.Signal = internSignal(s)
	}
}

func (f *FS) setField(num int, u uint64, s []byte) {
	switch num {
	case fFSAction:
		f.Action = internFSAction(s)
	case fFSPath:
		f.Path = string(s)
	case fFSOldPath:
		f.OldPath = string(s)
	case fFSSize:
		f.Size = unzigzag(u)
	case fFSDir:
		f.Dir = u != 0
	case fFSGuestTime:
		f.GuestTime = time.Unix(0, unzigzag(u)).UTC()
	}
}

func (a *Agent) setField(num int, u uint64, s []byte) {
	switch num {
	case fAgentState:
		a.State = internAgentState(s)
	case fAgentDetail:
		a.Detail = string(s)
	case fAgentCount:
		a.Count = unzigzag(u)
	}
}

// nestedField reads the next field of a nested message and checks its wire
// type against want (the wire type of the field numbered num, or -1 when
// this build does not know the field, which the caller then skips).
func nestedField(d *decoder, want func(num int) int) (num int, u uint64, s []byte, err error) {
	num, wire, u, s, err := d.field()
	if err != nil {
		return 0, 0, nil, err
	}
	if w := want(num); w >= 0 && w != wire {
		return 0, 0, nil, fmt.Errorf("%w: field %d: wire type %d, want %d", ErrCorrupt, num, wire, w)
	}
	return num, u, s, nil
}

func toolCallWire(num int) int {
	switch num {
	case fToolIndex:
		return wireVarint
	case fToolCallID, fToolName, fToolArguments, fToolOrigin:
		return wireBytes
	}
	return -1
}

func decodeToolCall(b []byte, out *[]ToolCall) error {
	var tc ToolCall
	d := decoder{b: b}
	for len(d.b) > 0 {
		num, u, s, err := nestedField(&d, toolCallWire)
		if err != nil {
			return fmt.Errorf("tool call: %w", err)
		}
		switch num {
		case fToolIndex:
			tc.Index = int(unzigzag(u))
		case fToolCallID:
			tc.CallID = string(s)
		case fToolName:
			tc.Name = string(s)
		case fToolArguments:
			tc.Arguments = string(s)
		case fToolOrigin:
			tc.Origin = internOrigin(s)
		}
	}
	*out = append(*out, tc)
	return nil
}

func toolResultWire(num int) int {
	switch num {
	case fResultIsError:
		return wireVarint
	case fResultCallID, fResultContentPreview:
		return wireBytes
	}
	return -1
}

func decodeToolResult(b []byte, out *[]ToolResult) error {
	var tr ToolResult
	d := decoder{b: b}
	for len(d.b) > 0 {
		num, u, s, err := nestedField(&d, toolResultWire)
		if err != nil {
			return fmt.Errorf("tool result: %w", err)
		}
		switch num {
		case fResultCallID:
			tr.CallID = string(s)
		case fResultContentPreview:
			tr.ContentPreview = string(s)
		case fResultIsError:
			tr.IsError = u != 0
		}
	}
	*out = append(*out, tr)
	return nil
}

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func decodeAddr(s []byte, a *netip.Addr) error {
	switch len(s) {
	case 4:
		*a = netip.AddrFrom4([4]byte(s))
	case 16:
		*a = netip.AddrFrom16([16]byte(s))
	default:
		return fmt.Errorf("%w: address of %d bytes, want 4 or 16", ErrCorrupt, len(s))
	}
	return nil
}

func decodePort(u uint64, p *uint16) error {
	if u > 0xffff {
		return fmt.Errorf("%w: port %d out of range", ErrCorrupt, u)
	}
	*p = uint16(u)
	return nil
}

func decodeHeader(s []byte, hs *[]Header) error {
	n, k := binary.Uvarint(s)
	if k <= 0 || n > uint64(len(s)-k) {
		return fmt.Errorf("%w: bad header name length", ErrCorrupt)
	}
	name := s[k : k+int(n)]
	*hs = append(*hs, Header{Name: string(name), Value: string(s[k+int(n):])})
	return nil
}

type decoder struct{ b []byte }

func (d *decoder) uvarint() (uint64, error) {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		return 0, fmt.Errorf("%w: truncated or overlong varint", ErrCorrupt)
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

// field reads one tag and its value: u for wire type 0, s for wire type 2.
func (d *decoder) field() (num, wire int, u uint64, s []byte, err error) {
	num, wire, err = d.tag()
	if err != nil {
		return 0, 0, 0, nil, err
	}
	switch wire {
	case wireVarint:
		u, err = d.uvarint()
	case wireBytes:
		s, err = d.bytes()
	default:
		return 0, 0, 0, nil, fmt.Errorf("%w: field %d has unknown wire type %d", ErrCorrupt, num, wire)
	}
	if err != nil {
		return 0, 0, 0, nil, fmt.Errorf("field %d: %w", num, err)
	}
	return num, wire, u, s, nil
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

// The intern functions return a constant for the common values so that
// decoding them does not allocate.

func internKind(s []byte) string {
	switch string(s) {
	case string(KindDNS):
		return string(KindDNS)
	case string(KindNet):
		return string(KindNet)
	case string(KindModelCall):
		return string(KindModelCall)
	case string(KindExec):
		return string(KindExec)
	case string(KindFS):
		return string(KindFS)
	case string(KindAgent):
		return string(KindAgent)
	case string(KindRecording):
		return string(KindRecording)
	}
	return string(s)
}

func (r *Recording) setField(num int, u uint64, s []byte) {
	switch num {
	case fRecState:
		r.State = internRecordingState(s)
	case fRecDetail:
		r.Detail = string(s)
	case fRecCount:
		r.Count = unzigzag(u)
	}
}

func internRecordingState(s []byte) string {
	switch string(s) {
	case RecordingOverBudget:
		return RecordingOverBudget
	case RecordingDiskLow:
		return RecordingDiskLow
	case RecordingResumed:
		return RecordingResumed
	case RecordingUnstored:
		return RecordingUnstored
	}
	return string(s)
}

func internAgentState(s []byte) string {
	switch string(s) {
	case AgentSilent:
		return AgentSilent
	case AgentResumed:
		return AgentResumed
	case AgentViolation:
		return AgentViolation
	case AgentRateLimited:
		return AgentRateLimited
	case AgentCapped:
		return AgentCapped
	}
	return string(s)
}

func internFSAction(s []byte) string {
	switch string(s) {
	case FSCreated:
		return FSCreated
	case FSModified:
		return FSModified
	case FSDeleted:
		return FSDeleted
	case FSRenamed:
		return FSRenamed
	case FSOverflow:
		return FSOverflow
	}
	return string(s)
}

func internSignal(s []byte) string {
	switch string(s) {
	case "KILL":
		return "KILL"
	case "TERM":
		return "TERM"
	case "INT":
		return "INT"
	case "HUP":
		return "HUP"
	}
	return string(s)
}

func internProvider(s []byte) string {
	switch string(s) {
	case "anthropic":
		return "anthropic"
	case "openai":
		return "openai"
	case "google":
		return "google"
	}
	return string(s)
}

func internProviderDomain(s []byte) string {
	switch string(s) {
	case "api.anthropic.com":
		return "api.anthropic.com"
	case "api.openai.com":
		return "api.openai.com"
	case "generativelanguage.googleapis.com":
		return "generativelanguage.googleapis.com"
	}
	return string(s)
}

func internOrigin(s []byte) string {
	switch string(s) {
	case "native":
		return "native"
	case "mcp":
		return "mcp"
	}
	return string(s)
}

func internDecision(s []byte) string {
	switch string(s) {
	case string(Allowed):
		return string(Allowed)
	case string(Denied):
		return string(Denied)
	}
	return string(s)
}

func internTransport(s []byte) string {
	switch string(s) {
	case string(TransportTCP):
		return string(TransportTCP)
	case string(TransportUDP):
		return string(TransportUDP)
	case string(TransportICMP):
		return string(TransportICMP)
	case string(TransportARP):
		return string(TransportARP)
	case string(TransportIPv6):
		return string(TransportIPv6)
	case string(TransportOther):
		return string(TransportOther)
	}
	return string(s)
}

func internConnType(s []byte) string {
	switch string(s) {
	case string(ConnTCP):
		return string(ConnTCP)
	case string(ConnTLS):
		return string(ConnTLS)
	case string(ConnHTTPS):
		return string(ConnHTTPS)
	case string(ConnHTTP):
		return string(ConnHTTP)
	case string(ConnQUIC):
		return string(ConnQUIC)
	}
	return string(s)
}

func internMethod(s []byte) string {
	switch string(s) {
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "PUT":
		return "PUT"
	case "DELETE":
		return "DELETE"
	case "HEAD":
		return "HEAD"
	case "PATCH":
		return "PATCH"
	case "OPTIONS":
		return "OPTIONS"
	case "CONNECT":
		return "CONNECT"
	}
	return string(s)
}
