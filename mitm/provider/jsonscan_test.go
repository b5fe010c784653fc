package provider

import (
	"strings"
	"testing"
)

// collect returns the strings found at path pat (from the root) in doc.
func collect(doc string, chunk int, pat ...string) []string {
	var out []string
	s := newScanner(1000, func(s *scanner, k tokKind) {
		if k == tokString && s.at(0, pat...) {
			out = append(out, string(s.str))
		}
	})
	feed(s, []byte(doc), chunk)
	s.close()
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
		s := newScanner(100, func(s *scanner, k tokKind) {
			switch {
			case s.at(0, "args") && k == tokObjStart:
				s.capture(1 << 10)
			case s.at(0, "args") && k == tokObjEnd:
				b, trunc := s.captured()
				if trunc {
					t.Error("truncated")
				}
				got = string(b)
			case s.at(0, "after") && k == tokString:
				after = append(after, string(s.str))
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
	s := newScanner(100, func(s *scanner, k tokKind) {
		if k == tokObjStart && s.depth() == 0 {
			s.capture(5)
		}
		if k == tokObjEnd && s.depth() == 0 {
			b, trunc := s.captured()
			if string(b) != `{"abc` || !trunc {
				t.Fatalf("%q %v", b, trunc)
			}
		}
	})
	feed(s, []byte(`{"abcdef": 1}`), 0)
}

func TestScannerCamelKeys(t *testing.T) {
	var keys []string
	s := newScanner(100, func(s *scanner, k tokKind) {
		if k == tokNumber {
			keys = append(keys, string(s.stack[len(s.stack)-1].key))
		}
	})
	s.camelKeys = true
	feed(s, []byte(`{"system_instruction": 1, "function_response": 2, "plain": 3, "_x": 4, "a__b": 5}`), 1)
	if got := strings.Join(keys, ","); got != "systemInstruction,functionResponse,plain,X,aB" {
		t.Fatal(got)
	}
}

func TestScannerStopsOnBadInput(t *testing.T) {
	for _, doc := range []string{`{"a" 1}`, `[1 2]`, `{"a":tru}`, `}`, `{"a":1]`, strings.Repeat("[", maxDepth+1)} {
		n := 0
		s := newScanner(100, func(*scanner, tokKind) { n++ })
		feed(s, []byte(doc), 1)
		if !s.failed {
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
	s := newScanner(10, func(s *scanner, k tokKind) {
		if k == tokNumber {
			got = string(s.num)
		}
	})
	feed(s, []byte("-12.5e-3"), 1)
	s.close()
	if got != "-12.5e-3" {
		t.Fatal(got)
	}
}

func TestScannerStringCap(t *testing.T) {
	var got []string
	s := newScanner(4, func(s *scanner, k tokKind) {
		switch {
		case k == tokStrStart && s.at(0, "big"):
			s.keep(8)
		case k == tokString:
			got = append(got, string(s.str))
		}
	})
	feed(s, []byte(`{"small": "abcdefgh", "big": "abcdefghijk", "utf8": "aé€"}`), 3)
	if strings.Join(got, ",") != "abcd,abcdefgh,aé" {
		t.Fatalf("%q", got)
	}
}
