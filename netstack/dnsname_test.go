package netstack

import (
	"strconv"
	"strings"
	"testing"
)

func TestPresentName(t *testing.T) {
	for _, c := range []struct {
		raw, want string
		why       string
	}{
		{"api.example.com.", "api.example.com", "a host name is unchanged but for the trailing dot"},
		{"API.Example.COM.", "api.example.com", "ASCII case is folded, as the policy matches"},
		{".", "", "the root"},
		{"_dmarc.x-y.example.", "_dmarc.x-y.example", "underscores and hyphens are printable"},
		{"x\x1b]0;pwned\x07\n\x1b[8m.example.", `x\027]0;pwned\007\010\027[8m.example`, "ESC, BEL and newline: a terminal title and a forged row"},
		{"a b.example.", `a\032b.example`, "a space is escaped: names are split on spaces when read"},
		{"back\\slash.", `back\\slash`, "a backslash is escaped, so escapes stay unambiguous"},
		{"\xc3\xa9t\xc3\xa9.", `\195\169t\195\169`, "non-ASCII bytes (UTF-8 or not) become \\DDD, never raw"},
		{"\x00\xff.", `\000\255`, "the extremes"},
		{"\x7f.", `\127`, "DEL is not printable"},
	} {
		if got := presentName(c.raw); got != c.want {
			t.Errorf("presentName(%q) = %q, want %q (%s)", c.raw, got, c.want, c.why)
		}
	}
	if n := testing.AllocsPerRun(100, func() { presentName("api.example.com.") }); n != 0 {
		t.Errorf("a valid name costs %.0f allocations, want none", n)
	}
}

// unpresent reverses presentName's escapes, for the fuzz target.
func unpresent(s string) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] != '\\':
			b.WriteByte(s[i])
		case i+1 < len(s) && s[i+1] == '\\':
			b.WriteByte('\\')
			i++
		case i+4 <= len(s):
			n, err := strconv.Atoi(s[i+1 : i+4])
			if err != nil || n > 255 {
				return "", false
			}
			b.WriteByte(byte(n))
			i += 3
		default:
			return "", false
		}
	}
	return b.String(), true
}

// asciiLower folds ASCII letters only, as presentName does.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// FuzzPresentName: whatever bytes a guest puts in a query name, the stored
// form is printable ASCII, it reads back as exactly the bytes asked (up to
// ASCII case), and a name that needed an escape is never allowed.
func FuzzPresentName(f *testing.F) {
	for _, s := range []string{"api.example.com.", "x\x1b]0;t\x07\n.", "\\.", "\xff\x00", "A.B.", "a.example."} {
		f.Add(s)
	}
	pol := mustPolicy(f, "[network]\nallow = [\"*.example\"]\n")
	f.Fuzz(func(t *testing.T, raw string) {
		got := presentName(raw)
		for i := 0; i < len(got); i++ {
			if c := got[i]; c < 0x21 || c > 0x7e {
				t.Fatalf("presentName(%q) = %q holds byte %#x", raw, got, c)
			}
		}
		if back, ok := unpresent(got); !ok || back != asciiLower(strings.TrimSuffix(raw, ".")) {
			t.Fatalf("presentName(%q) = %q, which reads back as %q", raw, got, back)
		}
		if strings.Contains(got, `\`) && pol.DecideName(got).Allowed {
			t.Fatalf("escaped name %q is allowed by *.example", got)
		}
	})
}
