package store

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func fullNet() *Net {
	return &Net{
		Domain:    "api.anthropic.com",
		IP:        netip.MustParseAddr("198.19.0.7"),
		Port:      443,
		SrcIP:     netip.MustParseAddr("198.18.0.2"),
		SrcPort:   51234,
		Transport: TransportTCP,
		ConnType:  ConnHTTPS,

		Decision:    Allowed,
		Reason:      "domain allowed by policy",
		MatchedRule: "allow api.anthropic.com:443",

		Method:        "POST",
		Path:          "/v1/messages",
		Query:         "beta=true&x=é",
		StatusCode:    200,
		BytesSent:     1234,
		BytesReceived: 98765,
		Duration:      1532 * time.Millisecond,

		RequestHeaders:      []Header{{"Content-Type", "application/json"}, {"X-Dup", "1"}, {"X-Dup", "2"}, {"", ""}},
		ResponseHeaders:     []Header{{"Server", "cloudflare"}},
		RequestBodyPreview:  `{"model":"claude"}`,
		ResponseBodyPreview: "\x00\xff binary \xfe",

		Count:  3,
		Detail: "free text",
	}
}

func fullDNS() *DNS {
	return &DNS{
		QName:         "example.com",
		QType:         "AAAA",
		Transport:     TransportUDP,
		Decision:      Denied,
		Reason:        "not in the allow list",
		MatchedRule:   "default deny",
		Answer:        "NXDOMAIN",
		ResolverAsked: netip.MustParseAddr("2001:db8::53"),
	}
}

func roundTrip(t *testing.T, ev Event) Event {
	t.Helper()
	v := appendEvent(nil, &ev)
	var got Event
	if err := decodeEvent(v, &got); err != nil {
		t.Fatalf("decode: %v", err)
	}
	return got
}

func TestCodecRoundTrip(t *testing.T) {
	now := time.Unix(0, time.Now().UnixNano())
	cases := []Event{
		{Time: now, Kind: KindNet, Net: fullNet()},
		{Time: now, Kind: KindDNS, DNS: fullDNS()},
		{Time: now, Kind: KindNet, Net: &Net{}},
		{Time: now, Kind: KindDNS, DNS: &DNS{}},
		{Time: now, Kind: KindNet, Net: &Net{StatusCode: -1, BytesSent: -5, Duration: -time.Second, Count: 1 << 62,
			IP: netip.MustParseAddr("::ffff:1.2.3.4"), Port: 65535}},
		{Time: now, Kind: "http"},
		{},
	}
	for i, ev := range cases {
		got := roundTrip(t, ev)
		if !got.Time.Equal(ev.Time) {
			t.Errorf("case %d: time %v, want %v", i, got.Time, ev.Time)
		}
		got.Time, ev.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, ev) {
			t.Errorf("case %d:\n got %+v\nwant %+v", i, got, ev)
			if got.Net != nil && ev.Net != nil {
				t.Errorf("net:\n got %+v\nwant %+v", *got.Net, *ev.Net)
			}
		}
	}
}

// Fields and kinds added later must be readable by this build: unknown
// field numbers are skipped, an unknown kind comes back without payload.
func TestCodecForwardCompatible(t *testing.T) {
	ev := Event{Time: time.Unix(1, 0), Kind: KindNet, Net: &Net{Domain: "a.example", Port: 80}}
	v := appendEvent(nil, &ev)
	v = appendString(v, 99, "a new net field")
	v = appendUint(v, 100, 12345)
	v = appendString(v, 40, "a new dns-block field")
	v = appendString(v, 130, "an http field")
	var got Event
	if err := decodeEvent(v, &got); err != nil {
		t.Fatalf("decode with unknown fields: %v", err)
	}
	if got.Net == nil || got.Net.Domain != "a.example" || got.Net.Port != 80 {
		t.Fatalf("got %+v", got.Net)
	}

	fut := Event{Time: time.Unix(1, 0), Kind: "model_call"}
	v = appendEvent(nil, &fut)
	v = appendString(v, 200, "claude-opus")
	got = Event{}
	if err := decodeEvent(v, &got); err != nil {
		t.Fatalf("decode future kind: %v", err)
	}
	if got.Kind != "model_call" || got.DNS != nil || got.Net != nil {
		t.Fatalf("future kind decoded as %+v", got)
	}
}

func TestDecodeGarbage(t *testing.T) {
	good := appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindNet, Net: fullNet()})
	hdr := func(rest ...byte) []byte {
		b := []byte{eventVersion}
		b = binary.BigEndian.AppendUint64(b, 42)
		return append(b, rest...)
	}
	cases := []struct {
		name string
		v    []byte
		want error
		msg  string
	}{
		{"empty", nil, ErrCorrupt, "empty"},
		{"version 0", []byte{0, 1, 2}, ErrUnknownVersion, "version 0"},
		{"version 99", append([]byte{99}, good[1:]...), ErrUnknownVersion, "version 99"},
		{"short header", []byte{eventVersion, 1, 2}, ErrCorrupt, "header"},
		{"truncated", good[:len(good)-3], ErrCorrupt, ""},
		{"bad varint", hdr(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), ErrCorrupt, "varint"},
		{"field zero", hdr(0x02, 0x00), ErrCorrupt, "field number 0"},
		{"wire type 5", hdr(byte(fKind<<3 | 5)), ErrCorrupt, "wire type"},
		{"length past end", hdr(byte(fKind<<3|wireBytes), 50, 'n'), ErrCorrupt, "past the end"},
		{"kind as varint", hdr(byte(fKind<<3|wireVarint), 1), ErrCorrupt, "wire type"},
		{"bad address", hdr(append(appendTag(nil, fNetIP, wireBytes), 3, 7, 1, 2)...), ErrCorrupt, "address of 3 bytes"},
		{"port too big", hdr(append(appendTag(nil, fNetPort, wireVarint), binary.AppendUvarint(nil, 70000)...)...), ErrCorrupt, "port"},
		{"bad header", hdr(append(appendTag(nil, fNetRequestHeader, wireBytes), 2, 9, 'x')...), ErrCorrupt, "header"},
	}
	for _, c := range cases {
		var ev Event
		err := decodeEvent(c.v, &ev)
		if err == nil {
			t.Errorf("%s: decoded without error: %+v", c.name, ev)
			continue
		}
		if !errors.Is(err, c.want) {
			t.Errorf("%s: error %q does not wrap %v", c.name, err, c.want)
		}
		if !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: error %q does not mention %q", c.name, err, c.msg)
		}
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add(appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindNet, Net: fullNet()}))
	f.Add(appendEvent(nil, &Event{Time: time.Unix(5, 0), Kind: KindDNS, DNS: fullDNS()}))
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a})
	f.Fuzz(func(t *testing.T, v []byte) {
		var ev Event
		if err := decodeEvent(v, &ev); err != nil {
			return
		}
		// Whatever decodes must encode, and from then on round-trip
		// unchanged (the first pass may drop empty, non-canonical fields).
		once := roundTrip(t, ev)
		twice := roundTrip(t, once)
		if !twice.Time.Equal(once.Time) {
			t.Fatalf("time changed: %v != %v", twice.Time, once.Time)
		}
		once.Time, twice.Time = time.Time{}, time.Time{}
		if !reflect.DeepEqual(once, twice) {
			t.Fatalf("not stable:\n%+v\n%+v", once, twice)
		}
	})
}

func BenchmarkEncodeNet(b *testing.B) {
	ev := Event{Time: time.Now(), Kind: KindNet, Net: fullNet()}
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendEvent(buf[:0], &ev)
	}
	b.SetBytes(int64(len(buf)))
}

func BenchmarkDecodeNet(b *testing.B) {
	v := appendEvent(nil, &Event{Time: time.Now(), Kind: KindNet, Net: fullNet()})
	b.ReportAllocs()
	b.SetBytes(int64(len(v)))
	for b.Loop() {
		var ev Event
		if err := decodeEvent(v, &ev); err != nil {
			b.Fatal(err)
		}
	}
}
