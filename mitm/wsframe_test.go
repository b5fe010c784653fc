package mitm

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/capsem/capsem/dlp"
	"github.com/capsem/capsem/policy"
)

const (
	testPlaceholder = "capsem-secret-0123456789abcdef0123456789abcdef"
	testReal        = "real-value-0123456789"
	testGitHub      = "ghp_A1b2C3d4E5A1b2C3d4E5A1b2C3d4E5A1b2C3"
)

// testView is the secrets of a policy with TOKEN bound to api.test, as
// other.test sees them (bound is false) or api.test (true).
func testView(t testing.TB, bound bool) *secretView {
	t.Helper()
	pol, err := policy.ParseWith("p.toml", []byte("[[secret]]\nname = \"TOKEN\"\nfrom_env = \"X\"\nhosts = [\"api.test\"]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	pol, err = pol.Bind(map[string]policy.SecretValue{"TOKEN": {Real: []byte(testReal), Placeholder: testPlaceholder}})
	if err != nil {
		t.Fatal(err)
	}
	var mask uint64
	if bound {
		mask = 1
	}
	return newSecretView(pol.Secrets(), mask)
}

// frame is a client frame: masked with key unless key is nil.
func frame(fin bool, op byte, key []byte, payload []byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	b := []byte{b0}
	var m byte
	if key != nil {
		m = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		b = append(b, m|byte(n))
	case n < 1<<16:
		b = append(b, m|126)
		b = binary.BigEndian.AppendUint16(b, uint16(n))
	default:
		b = append(b, m|127)
		b = binary.BigEndian.AppendUint64(b, uint64(n))
	}
	if key == nil {
		return append(b, payload...)
	}
	b = append(b, key...)
	for i, c := range payload {
		b = append(b, c^key[i%4])
	}
	return b
}

var key = []byte{0x37, 0xfa, 0x21, 0x3d}

func TestWSParser(t *testing.T) {
	long := bytes.Repeat([]byte("x"), 70000)
	cases := []struct {
		name string
		in   []byte
		want []string // the frames read: op, fin, payload
		viol string   // a violation the parser must report, "" for none
		why  string
	}{
		{"text", frame(true, wsOpText, key, []byte("hello")), []string{"text fin hello"}, "", "the usual frame: 7-bit length, masked"},
		{"empty", frame(true, wsOpBinary, key, nil), []string{"binary fin "}, "", "a zero-length frame ends with its head"},
		{"16-bit", frame(true, wsOpBinary, key, long[:300]), []string{"binary fin " + string(long[:300])}, "", "126 says a 16-bit length follows"},
		{"64-bit", frame(true, wsOpBinary, key, long), []string{"binary fin " + string(long)}, "", "127 says a 64-bit length follows"},
		{"fragments", cat(frame(false, wsOpText, key, []byte("he")), frame(true, wsOpPing, key, []byte("p")), frame(false, wsOpContinuation, key, []byte("ll")), frame(true, wsOpContinuation, key, []byte("o"))),
			[]string{"text more he", "ping fin p", "continuation more ll", "continuation fin o"}, "", "a control frame may come between the fragments of a message"},
		{"close", frame(true, wsOpClose, key, []byte{3, 232, 'b', 'y', 'e'}), []string{"close fin \x03\xe8bye"}, "", "a close frame with a code and a reason"},
		{"unmasked", frame(true, wsOpText, nil, []byte("hi")), nil, "not masked", "a client must mask every frame (§5.1)"},
		{"rsv1", append([]byte{0xc1}, frame(true, wsOpText, key, []byte("hi"))[1:]...), nil, "reserved bit", "RSV1 is permessage-deflate's, and no extension was negotiated"},
		{"rsv3", append([]byte{0x91}, frame(true, wsOpText, key, []byte("hi"))[1:]...), nil, "reserved bit", "any reserved bit"},
		{"long ping", frame(true, wsOpPing, key, long[:126]), nil, "more than 125 bytes", "control frames carry at most 125 bytes (§5.5)"},
		{"fragmented close", frame(false, wsOpClose, key, nil), nil, "fragmented", "control frames are never fragmented"},
		{"lone continuation", frame(true, wsOpContinuation, key, []byte("x")), nil, "no message to continue", "a continuation needs a message"},
		{"interleaved messages", cat(frame(false, wsOpText, key, []byte("a")), frame(true, wsOpBinary, key, []byte("b"))), []string{"text more a"}, "before the fragmented one ended", "a new message before the last one ended"},
		{"reserved opcode", frame(true, 0x3, key, nil), nil, "reserved opcode", "opcodes 3-7 are reserved"},
		{"reserved control opcode", frame(true, 0xb, key, nil), nil, "reserved opcode", "opcodes 0xb-0xf are reserved"},
		{"top bit", []byte{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4}, nil, "most significant bit", "a 64-bit length must fit 63 bits (§5.2)"},
	}
	for _, c := range cases {
		for _, step := range []int{1, 3, 7, len(c.in)} {
			var got []string
			var cur strings.Builder
			p := wsParser{guest: true}
			in := c.in
			var err error
			buf := make([]byte, 5)
			for len(in) > 0 && err == nil {
				chunk := in[:min(step, len(in))]
				for len(chunk) > 0 && err == nil {
					var n int
					if !p.body {
						var done bool
						n, done, err = p.readHead(chunk)
						if done {
							cur.Reset()
							if p.f.length == 0 {
								got = append(got, desc(&p.f, ""))
							}
						}
					} else {
						n = p.readBody(chunk, buf)
						cur.Write(buf[:n])
						if !p.body {
							got = append(got, desc(&p.f, cur.String()))
						}
					}
					chunk = chunk[n:]
					in = in[n:]
				}
			}
			var v *wsViolation
			switch {
			case c.viol == "" && err != nil:
				t.Errorf("%s (step %d): %v (%s)", c.name, step, err, c.why)
			case c.viol != "" && (!errors.As(err, &v) || !strings.Contains(v.why, c.viol)):
				t.Errorf("%s (step %d): want a violation with %q, got %v (%s)", c.name, step, c.viol, err, c.why)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("%s (step %d): frames %q, want %q (%s)", c.name, step, got, c.want, c.why)
			}
		}
	}
}

func desc(f *wsFrame, payload string) string {
	fin := "more"
	if f.fin {
		fin = "fin"
	}
	return wsOpName(f.op) + " " + fin + " " + payload
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

func TestWSCloseFrame(t *testing.T) {
	cases := []struct {
		reason string
		want   int // the reason's length in the frame
		why    string
	}{
		{"short", 5, "as is"},
		{strings.Repeat("a", 200), 123, "cut to fit 125 bytes with the code"},
		{strings.Repeat("a", 122) + "é", 122, "cut at a UTF-8 boundary: the reason must be valid UTF-8 (§5.5.1)"},
	}
	for _, c := range cases {
		f := wsCloseFrame(1008, c.reason)
		if f[0] != 0x88 || int(f[1]) != 2+c.want || binary.BigEndian.Uint16(f[2:4]) != 1008 || string(f[4:]) != c.reason[:c.want] {
			t.Errorf("%q: frame % x (%s)", c.reason, f[:4], c.why)
		}
	}
}

// fakeUp is the upstream's end of an upgraded connection: it keeps what
// it is written; Read gives server, then blocks until Close.
type fakeUp struct {
	mu     sync.Mutex
	got    []byte
	server []byte
	closed chan struct{}
	once   sync.Once
}

func (u *fakeUp) Write(p []byte) (int, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	select {
	case <-u.closed:
		return 0, net.ErrClosed
	default:
	}
	u.got = append(u.got, p...)
	return len(p), nil
}

func (u *fakeUp) Read(p []byte) (int, error) {
	u.mu.Lock()
	if len(u.server) > 0 {
		n := copy(p, u.server)
		u.server = u.server[n:]
		u.mu.Unlock()
		return n, nil
	}
	u.mu.Unlock()
	<-u.closed
	return 0, net.ErrClosed
}

func (u *fakeUp) Close() error {
	u.once.Do(func() { close(u.closed) })
	return nil
}

// wsRun is a guard between a guest that writes in pieces and a fakeUp, with
// the reverse proxy's copy to the guest running.
type wsRun struct {
	g      *wsGuard
	up     *fakeUp
	guest  bytes.Buffer // what the guest got
	done   chan struct{}
	events []string // reason rule denied
	err    error    // of the last Write
}

func startWS(s wsScan, server []byte) *wsRun {
	r := &wsRun{up: &fakeUp{closed: make(chan struct{}), server: server}, done: make(chan struct{})}
	r.g = newWSGuard(r.up, s)
	r.g.record = func(denied bool, reason, rule, _ string) {
		d := "allowed"
		if denied {
			d = "denied"
		}
		r.events = append(r.events, reason+" "+rule+" "+d)
	}
	go func() {
		defer close(r.done)
		b := make([]byte, 7)
		for {
			n, err := r.g.Read(b)
			r.guest.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	return r
}

// write gives the guard in at the cuts (offsets into in); it stops at an
// error.
func (r *wsRun) write(in []byte, cuts ...int) {
	prev := 0
	for _, c := range append(cuts, len(in)) {
		c = max(prev, min(c, len(in)))
		if _, r.err = r.g.Write(in[prev:c]); r.err != nil {
			return
		}
		prev = c
	}
}

// end closes the connection and returns what the upstream and the guest
// got.
func (r *wsRun) end() (up, guest []byte) {
	r.g.Close()
	<-r.done
	return r.up.got, r.guest.Bytes()
}

// closeCode is the code of the close frame b holds at its end, 0 if none.
func closeCode(b []byte) int {
	i := bytes.LastIndex(b, []byte{0x88})
	if i < 0 || i+4 > len(b) || int(b[i+1])+i+2 != len(b) {
		return 0
	}
	return int(binary.BigEndian.Uint16(b[i+2 : i+4]))
}

func TestWSGuard(t *testing.T) {
	other := wsScan{view: testView(t, false), host: "other.test"}
	own := wsScan{view: testView(t, true), host: "api.test"}
	scanner, _ := dlp.NewScanner(nil)
	block := wsScan{scanner: scanner, dlpBlock: true, host: "other.test"}
	log := wsScan{scanner: scanner, host: "other.test"}
	ph := []byte(testPlaceholder)
	clean := frame(true, wsOpText, key, []byte("hello"))
	cases := []struct {
		name   string
		scan   wsScan
		in     []byte
		cuts   []int
		code   int    // the close code the guest gets, 0 for none
		event  string // the event recorded, "" for none
		upWant []byte // what the upstream must get (the bytes before the finding); nil: a prefix of in
		why    string
	}{
		{"clean", other, cat(clean, clean), []int{3, 9}, 0, "", cat(clean, clean), "frames without a secret go on as sent"},
		{"placeholder", other, cat(clean, frame(true, wsOpText, key, append([]byte("key="), ph...))), nil, 1008, "secret-wrong-host TOKEN denied", cat(clean, frame(true, wsOpText, key, append([]byte("key="), ph...))[:10]), "a placeholder to a host it is not bound to"},
		{"placeholder split over frames", other, cat(frame(false, wsOpText, key, ph[:20]), frame(true, wsOpPing, key, nil), frame(true, wsOpContinuation, key, ph[20:])), []int{5, 30}, 1008, "secret-wrong-host TOKEN denied", nil, "a needle split across the fragments of a message"},
		{"placeholder base64", other, frame(true, wsOpBinary, key, []byte(base64.StdEncoding.EncodeToString(append([]byte("x"), ph...)))), nil, 1008, "secret-wrong-host TOKEN denied", nil, "in any form the HTTP path finds"},
		{"placeholder in a ping", other, cat(clean, frame(true, wsOpPing, key, ph)), nil, 1008, "secret-wrong-host TOKEN denied", clean, "control frames are scanned too"},
		{"placeholder in a close reason", other, cat(clean, frame(true, wsOpClose, key, append([]byte{3, 232}, ph...))), []int{12}, 1008, "secret-wrong-host TOKEN denied", clean, "a close frame's reason is the guest's text"},
		{"placeholder to its host", own, frame(true, wsOpText, key, ph), nil, 0, "", frame(true, wsOpText, key, ph), "the placeholder may go to its own host (as is: frames are not rewritten)"},
		{"real value", own, frame(true, wsOpText, key, []byte(testReal)), []int{8}, 1008, "secret-real-value TOKEN denied", nil, "the real value goes nowhere from the guest"},
		{"dlp block", block, frame(true, wsOpText, key, []byte("token="+testGitHub)), nil, 1008, "dlp-match github-token@ws-text-1@6 denied", nil, "[dlp] block closes on a credential"},
		{"dlp log", log, frame(true, wsOpText, key, []byte("token="+testGitHub)), nil, 0, "dlp-match github-token@ws-text-1@6 allowed", frame(true, wsOpText, key, []byte("token="+testGitHub)), "[dlp] log notes it and the frame goes on"},
		{"unmasked", other, cat(clean, frame(true, wsOpText, nil, []byte("hi"))), nil, 1002, "", clean, "a protocol violation closes with 1002; the bad frame is not forwarded"},
		{"log only: unreadable", log, cat(clean, []byte("raw bytes, no frame")), []int{8}, 0, "", cat(clean, []byte("raw bytes, no frame")), "with [dlp] log nothing is closed: what is not frames goes on unscanned, as before the guard"},
		{"rsv1", other, cat(clean, []byte{0xc1, 0x85}), nil, 1002, "", clean, "a compressed frame was not negotiated"},
	}
	for _, c := range cases {
		r := startWS(c.scan, nil)
		r.write(c.in, c.cuts...)
		up, guest := r.end()
		if got := closeCode(guest); got != c.code {
			t.Errorf("%s: close code %d, want %d (%s)", c.name, got, c.code, c.why)
		}
		if strings.Join(r.events, "; ") != c.event {
			t.Errorf("%s: events %q, want %q (%s)", c.name, r.events, c.event, c.why)
		}
		switch {
		case c.upWant != nil && !bytes.Equal(up, c.upWant):
			t.Errorf("%s: the upstream got % x, want % x (%s)", c.name, up, c.upWant, c.why)
		case !bytes.HasPrefix(c.in, up):
			t.Errorf("%s: the upstream got bytes the guest did not send (%s)", c.name, c.why)
		}
		if c.code != 0 && !errors.Is(r.err, errWSRefused) {
			t.Errorf("%s: Write returned %v", c.name, r.err)
		}
		if bytes.Contains(guest, []byte(testReal)) || bytes.Contains(guest, ph) {
			t.Errorf("%s: the close reason holds the value", c.name)
		}
	}
}

// A close frame goes to the guest only between the upstream's frames.
func TestWSGuardCloseWaitsForAFrameBoundary(t *testing.T) {
	leak := frame(true, wsOpText, key, []byte(testPlaceholder))
	for _, c := range []struct {
		server []byte
		code   int
		why    string
	}{
		{[]byte{0x81, 2, 'h', 'i'}, 1008, "after a whole server frame the close frame may follow"},
		{[]byte{0x81, 5, 'h', 'i'}, 0, "in the middle of one it would be read as payload: the guest gets none"},
	} {
		r := startWS(wsScan{view: testView(t, false), host: "other.test"}, c.server)
		for {
			r.g.mu.Lock()
			n := r.g.received
			r.g.mu.Unlock()
			if n == int64(len(c.server)) {
				break
			}
		}
		r.write(leak)
		_, guest := r.end()
		if !bytes.HasPrefix(guest, c.server) || closeCode(guest[len(c.server):]) != c.code {
			t.Errorf("% x: the guest got % x (%s)", c.server, guest, c.why)
		}
	}
}

// FuzzWSFrames writes arbitrary guest bytes at arbitrary cuts: the guard
// never panics, forwards only a prefix of what it was given, forwards
// valid frames exactly, and never lets a whole placeholder through. With
// plant set, the bytes are the payload of a masked text message with the
// placeholder planted in it, fragmented and cut where cuts says: the guard
// must always close it, before the placeholder's first byte.
func FuzzWSFrames(f *testing.F) {
	ph := []byte(testPlaceholder)
	f.Add(frame(true, wsOpText, key, []byte("hello")), []byte{1, 2, 3}, false)
	f.Add(cat(frame(false, wsOpText, key, ph[:9]), frame(true, wsOpPing, key, nil), frame(true, wsOpContinuation, key, ph[9:])), []byte{4, 17, 9}, false)
	f.Add(frame(true, wsOpText, nil, []byte("unmasked")), []byte{}, false)
	f.Add(frame(true, wsOpBinary, key, bytes.Repeat([]byte{7}, 300)), []byte{200, 1}, false)
	f.Add([]byte("some payload around the secret"), []byte{10, 3, 40, 2, 9, 0xff}, true)
	f.Add([]byte{}, []byte{0}, true)
	f.Add([]byte("\x81\xff\xbd0000000"), []byte("0"), false) // a top bit seen before the masking key
	view := testView(f, false)
	f.Fuzz(func(t *testing.T, data, cuts []byte, plant bool) {
		in := data
		var phAt int // the wire offset of the planted placeholder
		if plant {
			in, phAt = plantFrames(data, cuts, ph)
		}
		var at []int
		pos := 0
		for _, c := range cuts {
			pos += int(c)
			at = append(at, pos)
		}
		r := startWS(wsScan{view: view, host: "other.test"}, nil)
		r.write(in, at...)
		up, guest := r.end()
		if !bytes.HasPrefix(in, up) {
			t.Fatalf("the upstream got % x, not a prefix of what the guest sent", up)
		}
		want := refWS(in, view)
		if got := refWS(up, view); got.leak {
			t.Fatalf("the upstream got a whole placeholder")
		}
		code := closeCode(guest)
		switch {
		case plant:
			if code != 1008 || len(up) > phAt {
				t.Fatalf("planted at %d: close %d, upstream got %d bytes", phAt, code, len(up))
			}
		case !want.bad && !want.leak && want.whole:
			if code != 0 || !bytes.Equal(up, in) {
				t.Fatalf("valid frames: close %d, upstream got %d of %d bytes", code, len(up), len(in))
			}
		case want.leak && !want.bad:
			if code != 1008 {
				t.Fatalf("a leak closed with %d", code)
			}
		case want.bad && !want.leak:
			if code != 1002 {
				t.Fatalf("a violation closed with %d", code)
			}
		}
	})
}

// plantFrames makes a masked text message of data with ph planted at an
// offset cuts chooses, fragmented where cuts says; it returns the bytes
// and where ph starts in them.
func plantFrames(data, cuts, ph []byte) ([]byte, int) {
	k := 0
	if len(cuts) > 0 {
		k = int(cuts[0]) % (len(data) + 1)
	}
	payload := cat(data[:k], ph, data[k:])
	mask := []byte{1, 2, 3, 4}
	if len(cuts) > 1 {
		mask[0] = cuts[1]
	}
	var out []byte
	phAt := -1
	i := 0
	for j := 2; i < len(payload) || j == 2; j++ {
		n := len(payload) - i
		if j < len(cuts) && cuts[j] > 0 {
			n = min(n, int(cuts[j]))
		}
		fin := i+n == len(payload)
		op := byte(wsOpContinuation)
		if j == 2 {
			op = wsOpText
		}
		fr := frame(fin, op, mask, payload[i:i+n])
		head := len(fr) - n
		if phAt < 0 && k < i+n {
			phAt = len(out) + head + (k - i)
		}
		out = append(out, fr...)
		i += n
		if j < len(cuts) && cuts[j]%5 == 0 && !fin {
			out = append(out, frame(true, wsOpPong, mask, []byte("pong"))...)
		}
	}
	return out, phAt
}

// wsRef is what refWS makes of a guest stream.
type wsRef struct {
	bad   bool // a frame breaks RFC 6455
	leak  bool // a message (or its part in the stream) or control frame holds a needle, before any bad frame
	whole bool // the stream ends at the end of a frame, outside a message
}

// refWS reads b as a whole, independently of wsParser.
func refWS(b []byte, v *secretView) wsRef {
	var r wsRef
	var msg []byte
	open := false
	for {
		if len(b) == 0 {
			r.whole = !open
			break
		}
		if len(b) < 2 {
			break
		}
		fin, rsv, op, masked := b[0]&0x80 != 0, b[0]&0x70, b[0]&0x0f, b[1]&0x80 != 0
		n, h := uint64(b[1]&0x7f), 2
		if n == 126 {
			if len(b) < 4 {
				break
			}
			n, h = uint64(binary.BigEndian.Uint16(b[2:])), 4
		} else if n == 127 {
			if len(b) < 10 {
				break
			}
			n, h = binary.BigEndian.Uint64(b[2:]), 10
		}
		control := op >= 8
		switch {
		case !masked, rsv != 0, n>>63 != 0,
			op > 2 && op < 8, op > 10,
			control && (!fin || n > 125),
			op == 0 && !open, (op == 1 || op == 2) && open:
			r.bad = true
			return r
		}
		if len(b) < h+4 {
			break
		}
		mask := b[h : h+4]
		b = b[h+4:]
		avail := min(n, uint64(len(b)))
		p := make([]byte, avail)
		for i := range p {
			p[i] = b[i] ^ mask[i%4]
		}
		b = b[avail:]
		if control {
			if avail == n {
				if _, ok := v.leaks.Find(p); ok {
					r.leak = true
					return r
				}
			}
		} else {
			if op != 0 {
				msg = nil
			}
			msg = append(msg, p...)
			if _, ok := v.leaks.Find(msg); ok {
				r.leak = true
				return r
			}
			open = !fin
		}
		if avail < n {
			break
		}
	}
	return r
}

var _ io.ReadWriteCloser = (*wsGuard)(nil)
