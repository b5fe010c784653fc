package secret

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

const ph = "capsem-secret-0123456789abcdef0123456789abcdef"

func pctAll(s string, upper bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		h := hex.EncodeToString([]byte{s[i]})
		if upper {
			h = strings.ToUpper(h)
		}
		b.WriteString("%" + h)
	}
	return b.String()
}

// plantings are the ways a guest can write a value into a request that
// the matcher must see through.
func plantings(v string) []struct {
	name, text string
	form       Form
} {
	type p = struct {
		name, text string
		form       Form
	}
	out := []p{
		{"raw in JSON", `{"key":"` + v + `"}`, FormRaw},
		{"percent upper", "q=" + pctAll(v, true), FormPercent},
		{"percent lower", "q=" + pctAll(v, false), FormPercent},
		{"hex", "x" + hex.EncodeToString([]byte(v)) + "y", FormHex},
		{"HEX", strings.ToUpper(hex.EncodeToString([]byte(v))), FormHex},
	}
	for a := range 3 {
		for _, pre := range []string{"", "A", "AB"} {
			lead := strings.Repeat("z", a) + pre
			out = append(out,
				p{fmt.Sprintf("base64 after %d bytes", len(lead)), base64.StdEncoding.EncodeToString([]byte(lead + v + "tail")), FormBase64},
				p{fmt.Sprintf("base64url after %d bytes", len(lead)), base64.RawURLEncoding.EncodeToString([]byte(lead + "\xfb\xff" + v + "\xff")), FormBase64URL},
				p{fmt.Sprintf("base64 ending the text after %d bytes", len(lead)), base64.StdEncoding.EncodeToString([]byte(lead + v)), FormBase64},
			)
		}
	}
	// url.QueryEscape leaves the placeholder's characters as they are: raw
	// again, inside a form body; a value with reserved characters is
	// escaped in part.
	form := FormRaw
	if url.QueryEscape(v) != v {
		form = FormPercent
	}
	out = append(out, p{"form body", "a=1&k=" + url.QueryEscape(v), form}, p{"path", "/x/" + url.PathEscape(v) + "/y", form})
	return out
}

func TestMatcherFindsEveryForm(t *testing.T) {
	real := "sk-ant-api03-REAL+/value_with-chars=="
	m, err := NewMatcher([]Needle{{ID: 1, Value: []byte(ph)}, {ID: 2, Value: []byte(real)}})
	if err != nil {
		t.Fatal(err)
	}
	for id, v := range map[int]string{1: ph, 2: real} {
		for _, c := range plantings(v) {
			h, ok := m.FindString(c.text)
			if !ok || h.ID != id {
				t.Errorf("%s of needle %d: %q not found (%v %v)", c.name, id, c.text, h, ok)
				continue
			}
			// base64 and base64url of a value without + or / are the same
			// text: either form is a right answer.
			b64 := (c.form == FormBase64 || c.form == FormBase64URL) && (h.Form == FormBase64 || h.Form == FormBase64URL)
			if h.Form != c.form && !b64 {
				t.Errorf("%s of needle %d: found as %s", c.name, id, h.Form)
			}
		}
	}
	for _, clean := range []string{
		"", "capsem-secret-", ph[:len(ph)-1], strings.ToUpper(ph), "capsem-secret-0123456789abcdef0123456789abcdeX",
		base64.StdEncoding.EncodeToString([]byte(ph[:20])), hex.EncodeToString([]byte(ph[5:])),
	} {
		if h, ok := m.FindString(clean); ok {
			t.Errorf("%q: found %v, but it holds no needle", clean, h)
		}
	}
}

// TestStreamSplitsEverywhere plants each form at every split point of a
// two-write body and checks the hit, its offset, and that Safe never
// passes the start of a match.
func TestStreamSplitsEverywhere(t *testing.T) {
	m, err := NewMatcher([]Needle{{ID: 7, Value: []byte(ph)}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range plantings(ph) {
		body := []byte("prefix-bytes " + c.text + " suffix")
		whole, ok := m.Find(body)
		if !ok {
			t.Fatalf("%s: not found whole", c.name)
		}
		for cut := 0; cut <= len(body); cut++ {
			s := m.Stream()
			h, ok := s.Write(body[:cut])
			if ok {
				if int64(cut) < whole.Offset {
					t.Fatalf("%s cut %d: hit before the match was complete", c.name, cut)
				}
			} else {
				if s.Safe() > whole.Offset {
					t.Fatalf("%s cut %d: Safe %d is past the match at %d", c.name, cut, s.Safe(), whole.Offset)
				}
				h, ok = s.Write(body[cut:])
			}
			if !ok || h != whole {
				t.Fatalf("%s cut %d: got %v %v, want %v", c.name, cut, h, ok, whole)
			}
		}
	}
}

func TestNewMatcherRefusesShortNeedles(t *testing.T) {
	if _, err := NewMatcher([]Needle{{Value: []byte("abc")}}); err == nil {
		t.Fatal("a 3-byte needle was accepted")
	}
	m, err := NewMatcher(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.FindString(ph); ok {
		t.Fatal("an empty matcher found something")
	}
}

// FuzzMatchStream: the stream over arbitrary splits finds what Find finds
// on the whole, and a planted needle is always found.
func FuzzMatchStream(f *testing.F) {
	f.Add([]byte("hello "+ph+" world"), []byte{3, 9, 200}, uint8(0), uint8(5))
	f.Add([]byte("nothing here"), []byte{1}, uint8(3), uint8(2))
	m, err := NewMatcher([]Needle{{ID: 1, Value: []byte(ph)}, {ID: 2, Value: []byte("sk-REAL-value+/")}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data, sizes []byte, plant, at uint8) {
		if plant%4 != 0 {
			forms := plantings(ph)
			c := forms[int(plant)%len(forms)]
			pos := min(int(at), len(data))
			data = append(append(append([]byte{}, data[:pos]...), c.text...), data[pos:]...)
		}
		whole, wok := m.Find(data)
		if plant%4 != 0 && !wok {
			t.Fatalf("planted needle not found in %q", data)
		}
		s := m.Stream()
		var got Hit
		gok := false
		for rest, i := data, 0; len(rest) > 0 && !gok; i++ {
			n := len(rest)
			if len(sizes) > 0 {
				n = min(n, int(sizes[i%len(sizes)])+1)
			}
			if wok && s.Safe() > whole.Offset {
				t.Fatalf("Safe %d passed the match at %d", s.Safe(), whole.Offset)
			}
			got, gok = s.Write(rest[:n])
			rest = rest[n:]
		}
		if gok != wok {
			t.Fatalf("stream found %v (%v), whole found %v (%v) in %q", gok, got, wok, whole, data)
		}
		// Where the two may differ is which of two overlapping needles
		// they report; the stream's must really be at its offset.
		if h, ok := m.Find(data[got.Offset:]); gok && (!ok || h.Offset != 0 || h.ID != got.ID) {
			t.Fatalf("the stream's hit %v is not at its offset in %q", got, data)
		}
	})
}

func BenchmarkMatcher(b *testing.B) {
	needles := []Needle{
		{1, []byte(ph)}, {2, []byte("capsem-secret-fedcba9876543210fedcba9876543210")},
		{3, []byte("sk-ant-api03-" + strings.Repeat("x", 80))}, {4, []byte("ghp_" + strings.Repeat("y", 36))},
	}
	m, err := NewMatcher(needles)
	if err != nil {
		b.Fatal(err)
	}
	random := make([]byte, 256<<10)
	rand.Read(random)
	text := bytes.Repeat([]byte(`{"role":"user","content":"please summarise the secret plans of capsem for 2026"},`), (256<<10)/80)
	for _, c := range []struct {
		name string
		data []byte
	}{{"random", random}, {"zeros", make([]byte, 256<<10)}, {"json", text}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.data)))
			s := m.Stream()
			for b.Loop() {
				if _, ok := s.Write(c.data); ok {
					b.Fatal("found a needle in clean data")
				}
			}
		})
	}
}
