package mitm

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/capsem/capsem/policy"
	"github.com/capsem/capsem/secret"
)

const (
	fuzzPH    = "capsem-secret-0123456789abcdef0123456789abcdef" // TOKEN's, bound to api.test
	fuzzOther = "capsem-secret-fedcba9876543210fedcba9876543210" // OTHER's, bound elsewhere
	fuzzReal  = "rv-real-value-of-token"
)

// fuzzView is the secrets of a policy with TOKEN bound to api.test and
// OTHER to other.test, as api.test sees them.
func fuzzView(t testing.TB) *secretView {
	t.Helper()
	tok, _ := policy.ParseSecretFlag("TOKEN@api.test")
	oth, _ := policy.ParseSecretFlag("OTHER@other.test")
	p, err := policy.ParseWith("p.toml", nil, []policy.Secret{tok, oth})
	if err != nil {
		t.Fatal(err)
	}
	p, err = p.Bind(map[string]policy.SecretValue{
		"TOKEN": {Real: []byte(fuzzReal), Placeholder: fuzzPH},
		"OTHER": {Real: []byte("rv-other-real-value"), Placeholder: fuzzOther},
	})
	if err != nil {
		t.Fatal(err)
	}
	return (&Proxy{}).secretsFor(p, "api.test")
}

// chunked returns data in reads of the given sizes (cycled).
type chunked struct {
	data  []byte
	sizes []byte
	i     int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n = min(n, int(c.sizes[c.i%len(c.sizes)])+1)
		c.i++
	}
	n = copy(p[:min(len(p), n)], c.data)
	c.data = c.data[n:]
	return n, nil
}

func (c *chunked) Close() error { return nil }

// guardOut reads everything the guard passes on, with reads of the sizes
// given.
func guardOut(g *bodyGuard, reads []byte) ([]byte, error) {
	var out bytes.Buffer
	for i := 0; ; i++ {
		n := 1 << 16
		if len(reads) > 0 {
			n = int(reads[i%len(reads)])*97 + 1
		}
		buf := make([]byte, n)
		k, err := g.Read(buf)
		out.Write(buf[:k])
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
	}
}

func TestBodyGuard(t *testing.T) {
	v := fuzzView(t)
	for _, c := range []struct {
		name, in, want, leak string
		why                  string
	}{
		{"bound", "a " + fuzzPH + " b " + fuzzPH, "a " + fuzzReal + " b " + fuzzReal, "", "the bound placeholder is replaced, every time"},
		{"other", "x " + fuzzOther + " y", "", ReasonSecretWrongHost, "another secret's placeholder is a leak here"},
		{"real", "x " + fuzzReal, "", ReasonSecretRealValue, "the real value never comes from the guest"},
		{"clean", strings.Repeat("capsem-secret-", 100), strings.Repeat("capsem-secret-", 100), "", "a prefix alone is not a placeholder"},
	} {
		for _, sizes := range [][]byte{nil, {0}, {4, 17, 200}} {
			var got *leak
			g := &bodyGuard{src: &chunked{data: []byte(c.in), sizes: sizes}, view: v, leaks: v.leaks.Stream()}
			g.reps = chainReplacers(guardSink{g}, [][2][]byte{{[]byte(fuzzPH), []byte(fuzzReal)}})
			g.onLeak = func(l *leak) { got = l }
			out, err := guardOut(g, nil)
			if c.leak == "" {
				if err != nil || string(out) != c.want {
					t.Errorf("%s (%s), reads %v: %q, %v; want %q", c.name, c.why, sizes, out, err, c.want)
				}
				continue
			}
			if err != errRefusedBody || got == nil || got.reason() != c.leak || bytes.Contains(out, []byte("capsem-secret-f")) || bytes.Contains(out, []byte("rv-")) {
				t.Errorf("%s (%s), reads %v: out %q, err %v, leak %+v", c.name, c.why, sizes, out, err, got)
			}
		}
	}
}

// FuzzBodyGuard: over any chunking of the body and of the reads, the
// guard passes on exactly the body with the bound placeholder replaced,
// or, when the body holds a leak, refuses it having passed on no byte of
// the leak.
func FuzzBodyGuard(f *testing.F) {
	f.Add([]byte("hello "+fuzzPH+" world"), []byte{3, 9}, []byte{1}, uint8(0), uint8(0))
	f.Add([]byte("leak "), []byte{1}, []byte{0}, uint8(1), uint8(3))
	f.Add([]byte("x"), []byte{}, []byte{}, uint8(2), uint8(0))
	v := fuzzView(f)
	plants := []string{"", fuzzPH, fuzzOther, fuzzReal, secret.PercentEncode(fuzzOther, true), "capsem-secret-"}
	f.Fuzz(func(t *testing.T, data, sizes, reads []byte, plant, at uint8) {
		if p := plants[int(plant)%len(plants)]; p != "" {
			pos := min(int(at), len(data))
			data = append(append(append([]byte{}, data[:pos]...), p...), data[pos:]...)
		}
		whole, leaked := v.leaks.Find(data)
		g := &bodyGuard{src: &chunked{data: bytes.Clone(data), sizes: sizes}, view: v, leaks: v.leaks.Stream()}
		g.reps = chainReplacers(guardSink{g}, [][2][]byte{{[]byte(fuzzPH), []byte(fuzzReal)}})
		var got *leak
		g.onLeak = func(l *leak) { got = l }
		out, err := guardOut(g, reads)
		if !leaked {
			if want := bytes.ReplaceAll(data, []byte(fuzzPH), []byte(fuzzReal)); err != nil || !bytes.Equal(out, want) {
				t.Fatalf("clean body %q: got %q, %v; want %q", data, out, err, want)
			}
			return
		}
		if err != errRefusedBody || got == nil {
			t.Fatalf("leak %+v in %q not refused: %v", whole, data, err)
		}
		if g.passed > whole.Offset {
			t.Fatalf("passed on %d bytes, past the leak at %d", g.passed, whole.Offset)
		}
	})
}
