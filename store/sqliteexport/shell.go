package sqliteexport

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ShellJoin returns argv as one line, the way a POSIX shell (sh, bash)
// would read back the same words, kept readable: a word of characters the
// shell takes literally stays bare; another is put in single quotes, or in
// double quotes when it holds a ' and nothing double quotes would expand;
// a word holding a control or invisible character (a newline, an escape,
// a bidi override) is written as $'…' with those characters escaped, so
// that the line is one line and shows what is there.
func ShellJoin(argv []string) string {
	var b strings.Builder
	for i, w := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		shellQuote(&b, w, i == 0)
	}
	return b.String()
}

func shellQuote(b *strings.Builder, w string, first bool) {
	switch {
	case w == "":
		b.WriteString("''")
	case isBareWord(w, first):
		b.WriteString(w)
	case strings.IndexFunc(w, needsEscape) >= 0:
		ansiQuote(b, w)
	case !strings.Contains(w, "'"):
		b.WriteByte('\'')
		b.WriteString(w)
		b.WriteByte('\'')
	case !strings.ContainsAny(w, "\"$`\\!"):
		b.WriteByte('"')
		b.WriteString(w)
		b.WriteByte('"')
	default:
		b.WriteByte('\'')
		b.WriteString(strings.ReplaceAll(w, "'", `'\''`))
		b.WriteByte('\'')
	}
}

// isBareWord reports whether the shell reads w, unquoted, as itself: ASCII
// letters and digits, -_./:,+%@ and '=' (except in the first word, where
// NAME=value would be read as an assignment), and letters and digits
// beyond ASCII (café, 日本).
func isBareWord(w string, first bool) bool {
	for _, r := range w {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("-_./:,+%@", r):
		case r == '=' && !first:
		case r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)):
		default:
			return false
		}
	}
	return true
}

// needsEscape reports a character that must not appear raw in the line:
// a control character or one that is not printed (a format character such
// as a bidi override, a separator other than the space).
func needsEscape(r rune) bool { return !unicode.IsPrint(r) }

// ansiQuote writes w as $'…' (bash, zsh, ksh and POSIX.1-2024 sh).
func ansiQuote(b *strings.Builder, w string) {
	b.WriteString("$'")
	for _, r := range w {
		switch r {
		case '\\':
			b.WriteString(`\\`)
		case '\'':
			b.WriteString(`\'`)
		case '\a':
			b.WriteString(`\a`)
		case '\b':
			b.WriteString(`\b`)
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\v':
			b.WriteString(`\v`)
		case '\f':
			b.WriteString(`\f`)
		case '\r':
			b.WriteString(`\r`)
		case 0x1b:
			b.WriteString(`\E`)
		default:
			switch {
			case !needsEscape(r):
				b.WriteRune(r)
			case r < 0x80:
				fmt.Fprintf(b, `\x%02x`, r)
			case r <= 0xffff:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				fmt.Fprintf(b, `\U%08x`, r)
			}
		}
	}
	b.WriteByte('\'')
}
