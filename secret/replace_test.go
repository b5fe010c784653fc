package secret

import (
	"bytes"
	"testing"
)

// replaceSplit runs data through a Replacer in chunks cut at the given
// sizes (cycled; 0 means 1).
func replaceSplit(t testing.TB, data, old, new []byte, sizes []byte) ([]byte, int) {
	var out bytes.Buffer
	r, err := NewReplacer(&out, old, new)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := 0, 0; p < len(data); i++ {
		n := 1
		if len(sizes) > 0 {
			n = max(1, int(sizes[i%len(sizes)]))
		}
		n = min(n, len(data)-p)
		if _, err := r.Write(data[p : p+n]); err != nil {
			t.Fatal(err)
		}
		p += n
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes(), r.Count()
}

func TestReplacer(t *testing.T) {
	ph, real := []byte("capsem-secret-0123"), []byte("sk-ant-REAL")
	for _, c := range []struct {
		in    string
		sizes []byte
		want  string
		n     int
		why   string
	}{
		{"Bearer capsem-secret-0123", nil, "Bearer sk-ant-REAL", 1, "byte by byte: the match straddles every write"},
		{"a capsem-secret-0123 b capsem-secret-0123", []byte{7}, "a sk-ant-REAL b sk-ant-REAL", 2, "two matches, 7-byte chunks"},
		{"capsem-secret-012", []byte{100}, "capsem-secret-012", 0, "a prefix at the end is flushed as it was"},
		{"capsem-secret-012capsem-secret-0123", []byte{5}, "capsem-secret-012sk-ant-REAL", 1, "a near miss before a match"},
		{"", nil, "", 0, "nothing in, nothing out"},
	} {
		got, n := replaceSplit(t, []byte(c.in), ph, real, c.sizes)
		if string(got) != c.want || n != c.n {
			t.Errorf("%q: %q (%d), want %q (%d) (%s)", c.in, got, n, c.want, c.n, c.why)
		}
	}
	if _, err := NewReplacer(&bytes.Buffer{}, nil, []byte("x")); err == nil {
		t.Error("an empty pattern was accepted")
	}
}

// FuzzReplaceStream: the streaming replacer over any chunk splits equals
// bytes.ReplaceAll on the whole.
func FuzzReplaceStream(f *testing.F) {
	f.Add([]byte("Authorization: Bearer capsem-secret-aa"), []byte("capsem-secret-aa"), []byte("sk-REAL"), []byte{1, 2, 3})
	f.Add([]byte("aaaa"), []byte("aa"), []byte("b"), []byte{1})
	f.Add([]byte("abababab"), []byte("aba"), []byte(""), []byte{2, 5})
	f.Fuzz(func(t *testing.T, data, old, new, sizes []byte) {
		if len(old) == 0 {
			return
		}
		got, n := replaceSplit(t, data, old, new, sizes)
		if want := bytes.ReplaceAll(data, old, new); !bytes.Equal(got, want) {
			t.Fatalf("ReplaceAll(%q, %q, %q) = %q, the stream gave %q (chunks %v)", data, old, new, want, got, sizes)
		}
		if want := bytes.Count(data, old); n != want {
			t.Fatalf("%d replacements counted, %d made", n, want)
		}
	})
}
