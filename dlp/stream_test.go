package dlp

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/capsem/capsem/dlp/dlptest"
)

// streamAll writes b to a new stream of s in the chunks cut at splits (in
// order) and returns the matches, checking Safe on the way.
func streamAll(t testing.TB, s *Scanner, b []byte, splits []int) []Match {
	st := s.Stream()
	var ms []Match
	prev, safe := 0, int64(0)
	for _, at := range append(splits, len(b)) {
		got := st.Write(b[prev:at])
		for _, m := range got {
			if m.Offset < safe {
				t.Fatalf("a match at %d, before Safe() was %d", m.Offset, safe)
			}
		}
		ms = append(ms, got...)
		if safe = st.Safe(); safe > int64(at) || safe < 0 {
			t.Fatalf("Safe() = %d after %d bytes", safe, at)
		}
		prev = at
	}
	return append(ms, st.Close()...)
}

func sameMatches(a, b []Match) bool {
	return slices.EqualFunc(a, b, func(x, y Match) bool {
		return x.Detector == y.Detector && x.Offset == y.Offset && bytes.Equal(x.Value, y.Value)
	})
}

// Every planted secret, split in two at every byte, is found once, where
// it is.
func TestStreamSplits(t *testing.T) {
	for _, p := range dlptest.Plants {
		if !slices.Contains(Detectors(), p.Kind) {
			continue
		}
		in := []byte("pad {\"k\": \"" + p.Text + "\"} end\n")
		want := all.ScanString(string(in))
		if len(want) != 1 || want[0].Detector != p.Kind {
			t.Fatalf("ScanString(%q) = %q", in, detectorsOf(want))
		}
		for i := 0; i <= len(in); i++ {
			if got := streamAll(t, all, in, []int{i}); !sameMatches(got, want) {
				t.Errorf("%s split at %d: %v, want %v", p.Kind, i, got, want)
			}
			for j := i; j <= len(in); j += 7 {
				if got := streamAll(t, all, in, []int{i, j}); !sameMatches(got, want) {
					t.Errorf("%s split at %d and %d: %v, want %v", p.Kind, i, j, got, want)
				}
			}
		}
		// A byte at a time, and inside large writes.
		ones := make([]int, len(in)-1)
		for i := range ones {
			ones[i] = i + 1
		}
		if got := streamAll(t, all, in, ones); !sameMatches(got, want) {
			t.Errorf("%s a byte at a time: %v", p.Kind, got)
		}
		big := append(append(bytes.Repeat([]byte("ab cd "), 1000), in...), bytes.Repeat([]byte("ef gh "), 1000)...)
		wantBig := all.ScanString(string(big))
		if len(wantBig) != 1 || wantBig[0].Offset != want[0].Offset+6000 {
			t.Fatalf("%s in a large text: %v", p.Kind, wantBig)
		}
		for _, at := range []int{0, 6000 - 5000, 6000 - 3000, 6000, 6000 + 11, 6000 + len(in)/2, 6000 + len(in)} {
			if got := streamAll(t, all, big, []int{at}); !sameMatches(got, wantBig) {
				t.Errorf("%s large write split at %d: %v", p.Kind, at, got)
			}
		}
	}
}

// Every case of the detectors' table, split at every byte, a byte at a
// time and inside large writes, finds what ScanString finds: above all
// the glued ones, whose start the scanner decides only at a byte past it
// (the '_' of "xghp_", the end of "aAKIA…").
func TestStreamSplitsCases(t *testing.T) {
	for _, c := range detectorCases {
		in := []byte(c.input)
		want := all.ScanString(c.input)
		var ones []int
		for i := 0; i <= len(in); i++ {
			if got := streamAll(t, all, in, []int{i}); !sameMatches(got, want) {
				t.Errorf("%s split at %d: %v, want %v", c.name, i, got, want)
			}
			if i > 0 && i < len(in) {
				ones = append(ones, i)
			}
		}
		if got := streamAll(t, all, in, ones); !sameMatches(got, want) {
			t.Errorf("%s a byte at a time: %v, want %v", c.name, got, want)
		}
		pad := bytes.Repeat([]byte("ab cd "), 1000)
		big := append(append(append([]byte{}, pad...), in...), bytes.Repeat([]byte(" ef gh"), 1000)...)
		wantBig := all.ScanString(string(big))
		if len(wantBig) != len(want) {
			t.Fatalf("%s in a large text: %v, want %v", c.name, wantBig, want)
		}
		// The second write is large: split anywhere from where the
		// match starts at the edge of what its first scan decides (keep
		// bytes into it) to past its end.
		splits := []int{0, len(pad) - 1000, len(pad) - head/2}
		for at := len(pad) - keep - 30; at <= len(pad)+len(in); at++ {
			splits = append(splits, at)
		}
		for _, at := range splits {
			if got := streamAll(t, all, big, []int{at}); !sameMatches(got, wantBig) {
				t.Errorf("%s large write split at %d: %v, want %v", c.name, at, got, wantBig)
			}
		}
	}
}

// A long JWT holds Safe back until it is decided, then is found once,
// whatever the writes.
func TestStreamLongJWT(t *testing.T) {
	payload := `{"sub":"` + strings.Repeat("x", 3000) + `"}`
	tok := "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + b64url(payload) + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
	in := []byte(strings.Repeat("z ", 3000) + tok + " after")
	want := all.ScanString(string(in))
	if len(want) != 1 || want[0].Detector != "jwt" || len(want[0].Value) != MaxValue {
		t.Fatalf("ScanString: %v", detectorsOf(want))
	}
	for _, splits := range [][]int{{6000}, {6001}, {6500}, {7000, 9000}, {100, 5000, 6010, 6100, 8000}} {
		if got := streamAll(t, all, in, splits); !sameMatches(got, want) {
			t.Errorf("splits %v: %v", splits, detectorsOf(got))
		}
	}
	st := all.Stream()
	st.Write(in[:6500])
	if got := st.Safe(); got != 6000 {
		t.Errorf("Safe() inside a JWT = %d, want its start 6000", got)
	}
}

func b64url(s string) string {
	const enc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	var b strings.Builder
	for i := 0; i < len(s); i += 3 {
		var v uint32
		n := min(3, len(s)-i)
		for k := 0; k < 3; k++ {
			v <<= 8
			if k < n {
				v |= uint32(s[i+k])
			}
		}
		for k := 0; k <= n; k++ {
			b.WriteByte(enc[v>>(18-6*k)&63])
		}
	}
	return b.String()
}

// Safe never passes a position that may start a match, and a stream
// with no match in sight keeps little.
func TestStreamSafe(t *testing.T) {
	st := all.Stream()
	st.Write([]byte("hello world, nothing here. AK"))
	if got := st.Safe(); got > int64(len("hello world, nothing here. ")) {
		t.Errorf("Safe() = %d: past the start of AK", got)
	}
	st.Write([]byte("IAIOSFODNN7EXAMPLE"))
	if got := st.Safe(); got > 27 {
		t.Errorf("Safe() = %d: past AKIA… before its end is known", got)
	}
	if ms := st.Write([]byte(" and on")); len(ms) != 1 || ms[0].Offset != 27 {
		t.Errorf("the key completed by a space: %v", ms)
	}
	big := bytes.Repeat([]byte("abc def "), 1<<15)
	st.Write(big)
	if held := int64(27+18+7+len(big)) - st.Safe(); held > minRun {
		t.Errorf("%d bytes held back of plain text", held)
	}
	if ms := st.Close(); len(ms) != 0 {
		t.Errorf("Close: %v", ms)
	}
}

// FuzzStream checks that a stream in any writes finds what ScanString
// finds in the whole.
func FuzzStream(f *testing.F) {
	for _, p := range dlptest.Plants {
		f.Add([]byte("x="+p.Text+"&y"), uint64(3))
	}
	for _, c := range detectorCases {
		f.Add([]byte(c.input), uint64(len(c.input)))
	}
	f.Add([]byte("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY-----BEGIN EC PRIVATE KEY-----"+jwtSample), uint64(0x123456789))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		want := all.ScanString(string(data))
		r := rand.New(rand.NewPCG(seed, seed>>7))
		var splits []int
		for at := 0; at < len(data); {
			at += r.IntN(max(1, len(data)/3)+1) + int(seed&1)
			if at < len(data) {
				splits = append(splits, at)
			}
		}
		if got := streamAll(t, all, data, splits); !sameMatches(got, want) {
			t.Fatalf("splits %v:\n got %v\nwant %v", splits, got, want)
		}
		// Large writes go another way: pad to reach it.
		pad := bytes.Repeat([]byte{' '}, 3*head)
		big := append(append(append([]byte{}, pad...), data...), pad...)
		want = all.ScanString(string(big))
		if got := streamAll(t, all, big, []int{len(pad) + len(data)/2}); !sameMatches(got, want) {
			t.Fatalf("large writes:\n got %v\nwant %v", got, want)
		}
	})
}

// benchText is JSON-ish ASCII of the kind a model API is sent: words,
// keys, numbers, ids and paths, with no secret.
func benchText(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the of and to a in is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their has would when if so no will can what out up more about other into some could them time these two may then do first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might great old year off come since against go came right used take three")
	var b bytes.Buffer
	for b.Len() < n {
		fmt.Fprintf(&b, `{"role":"user","id":"msg_%08x","index":%d,"path":"/home/user/src/project/file_%d.go","content":"`, r.Uint32(), r.IntN(1000), r.IntN(100))
		for range 40 + r.IntN(40) {
			b.WriteString(words[r.IntN(len(words))])
			b.WriteByte(' ')
		}
		b.WriteString("\"},\n")
	}
	return b.Bytes()[:n]
}

// BenchmarkStream streams 256 KiB writes through a Stream of every
// detector.
func BenchmarkStream(b *testing.B) {
	const chunk = 256 << 10
	random := make([]byte, 16*chunk)
	rng := rand.NewChaCha8([32]byte{3, 4})
	rng.Read(random)
	b64 := make([]byte, 0, len(random))
	for _, c := range random {
		b64 = append(b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[c&63])
	}
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"random", random},
		{"text", benchText(len(random))},
		{"base64", b64},
	} {
		b.Run(c.name, func(b *testing.B) {
			if ms := all.ScanString(string(c.data)); len(ms) != 0 {
				b.Fatalf("the data holds %v", detectorsOf(ms))
			}
			b.SetBytes(chunk)
			st := all.Stream()
			off := 0
			for b.Loop() {
				if off+chunk > len(c.data) {
					off = 0
				}
				st.Write(c.data[off : off+chunk])
				off += chunk
			}
		})
	}
}
