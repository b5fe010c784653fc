package jsonscan

import (
	"io"
	"strings"
	"testing"
)

// feed writes b to w in pieces of n bytes (all at once when n <= 0).
func feed(w io.Writer, b []byte, n int) {
	if n <= 0 {
		n = len(b) + 1
	}
	for len(b) > 0 {
		k := min(n, len(b))
		w.Write(b[:k])
		b = b[k:]
	}
}

// collect returns the strings found at path pat (from the root) in doc.
func collect(doc string, chunk int, pat ...string) []string {
	var out []string
	s := New(1000, func(s *Scanner, k Kind) {
		if k == String && s.At(0, pat...) {
			out = append(out, string(s.Str()))
		}
	})
	feed(s, []byte(doc), chunk)
	s.Close()
	return out
}

func TestScannerStrings(t *testing.T) {
	doc := `{"a": ["x\"y", "\u00e9\ud83d\ude00", "\ud800", "\udc00z", "\ud800\u0041", "tab\there", "\/"], "b": {"a": ["no"]}}`
	want := []string{`x"y`, "é😀", "\uFFFD", "\uFFFDz", "\uFFFDA", "tab\there", "/"}
	for _, n := range []int{0, 1, 2, 5} {
		got := collect(doc, n, "a", "#")
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("pieces of %d: %q", n, got)
		}
	}
}

func TestScannerCapture(t *testing.T) {
	doc := `{"skip": {"x": "}"}, "args": { "q" : "a } \" { b" , "n": [1, 2.5e3, true, null] }, "after": "ok"}`
	for _, n := range []int{0, 1, 3} {
		var got string
		var after []string
		s := New(100, func(s *Scanner, k Kind) {
			switch {
			case s.At(0, "args") && k == ObjStart:
				s.Capture(1 << 10)
			case s.At(0, "args") && k == ObjEnd:
				b, trunc := s.Captured()
				if trunc {
					t.Error("truncated")
				}
				got = string(b)
			case s.At(0, "after") && k == String:
				after = append(after, string(s.Str()))
			}
		})
		feed(s, []byte(doc), n)
		if want := `{"q":"a } \" { b","n":[1,2.5e3,true,null]}`; got != want {
			t.Fatalf("pieces of %d: captured %s, want %s", n, got, want)
		}
		if len(after) != 1 {
			t.Fatal("the scan did not go on after the capture")
		}
	}
	// A capture over its cap is cut and flagged.
	s := New(100, func(s *Scanner, k Kind) {
		if k == ObjStart && s.Depth() == 0 {
			s.Capture(5)
		}
		if k == ObjEnd && s.Depth() == 0 {
			b, trunc := s.Captured()
			if string(b) != `{"abc` || !trunc {
				t.Fatalf("%q %v", b, trunc)
			}
		}
	})
	feed(s, []byte(`{"abcdef": 1}`), 0)
}

func TestScannerCamelKeys(t *testing.T) {
	var keys []string
	s := New(100, func(s *Scanner, k Kind) {
		if k == Number {
			keys = append(keys, string(s.Key(s.Depth()-1)))
		}
	})
	s.CamelKeys(true)
	feed(s, []byte(`{"system_instruction": 1, "function_response": 2, "plain": 3, "_x": 4, "a__b": 5}`), 1)
	if got := strings.Join(keys, ","); got != "systemInstruction,functionResponse,plain,X,aB" {
		t.Fatal(got)
	}
}

func TestScannerStopsOnBadInput(t *testing.T) {
	for _, doc := range []string{`{"a" 1}`, `[1 2]`, `{"a":tru}`, `}`, `{"a":1]`, strings.Repeat("[", MaxDepth+1)} {
		n := 0
		s := New(100, func(*Scanner, Kind) { n++ })
		feed(s, []byte(doc), 1)
		if !s.Failed() {
			t.Errorf("%.20s: not failed", doc)
		}
		before := n
		s.Write([]byte(`{"more": "tokens"}`))
		if n != before {
			t.Errorf("%.20s: tokens after the failure", doc)
		}
	}
}

func TestScannerTopLevelNumber(t *testing.T) {
	var got string
	s := New(10, func(s *Scanner, k Kind) {
		if k == Number {
			got = string(s.Num())
		}
	})
	feed(s, []byte("-12.5e-3"), 1)
	s.Close()
	if got != "-12.5e-3" {
		t.Fatal(got)
	}
}

func TestScannerStringCap(t *testing.T) {
	var got []string
	s := New(4, func(s *Scanner, k Kind) {
		switch {
		case k == StrStart && s.At(0, "big"):
			s.Keep(8)
		case k == String:
			got = append(got, string(s.Str()))
		}
	})
	feed(s, []byte(`{"small": "abcdefgh", "big": "abcdefghijk", "utf8": "aé€"}`), 3)
	if strings.Join(got, ",") != "abcd,abcdefgh,aé" {
		t.Fatalf("%q", got)
	}
}

func TestScannerOffset(t *testing.T) {
	doc := `  [ {"a": "x\"}"}, [1, {}] ,{"b":{"c":2}}]`
	// The spans of the elements of the top-level array, cut from doc.
	want := []string{`{"a": "x\"}"}`, `[1, {}]`, `{"b":{"c":2}}`}
	for _, n := range []int{0, 1, 2, 7} {
		var got []string
		var start int64
		s := New(0, func(s *Scanner, k Kind) {
			if s.Depth() != 1 {
				return
			}
			switch k {
			case ObjStart, ArrStart:
				start = s.Offset() - 1
			case ObjEnd, ArrEnd:
				got = append(got, doc[start:s.Offset()])
			}
		})
		feed(s, []byte(doc), n)
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Fatalf("pieces of %d: %q", n, got)
		}
		if s.Offset() != int64(len(doc)) {
			t.Fatalf("pieces of %d: offset %d after %d bytes", n, s.Offset(), len(doc))
		}
	}
}
