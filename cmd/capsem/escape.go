package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// The event store holds what the guest chose: query names, hosts, paths,
// previews, commands, file names. Printed raw, such a string drives the
// terminal it is shown on — ESC]0;…BEL retitles the window, ESC[8m hides
// what follows, a newline or CR forges a row, a bidi override reorders the
// text — so every human-facing printer of capsem shows guest-controlled
// text through display, and every JSON printer through writeJSON.

// display returns s as a terminal may show it: every rune that is not
// graphic (C0 controls, DEL, C1 controls, format characters such as the
// bidi overrides and zero-width joiners, line and paragraph separators,
// unassigned code points) as a Go escape (\n, \t, \x1b, \u202e), each byte
// of invalid UTF-8 as \xNN, and the backslash doubled, so that the escaped
// text reads back unambiguously. Spaces and printable text of any script
// are kept.
func display(s string) string { return escapeText(s, false) }

// displayMessage is display for an error message of capsem's own that may
// quote guest text (an agent's error, the guest console's last lines): its
// newlines and backslashes (from %q) are kept, so that it reads as written,
// while everything else that could drive the terminal is escaped.
func displayMessage(s string) string { return escapeText(s, true) }

func escapeText(s string, message bool) string {
	shown := func(r rune, n int) bool { return safe(r, n) || message && (r == '\n' || r == '\\') }
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !shown(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case shown(r, n):
			b.WriteString(s[i : i+n])
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		i += n
	}
	return b.String()
}

// safe reports whether the rune r, n bytes of UTF-8, is shown as itself.
func safe(r rune, n int) bool {
	if r < utf8.RuneSelf {
		return r >= ' ' && r < 0x7f && r != '\\'
	}
	if r == utf8.RuneError && n == 1 {
		return false
	}
	return unicode.IsGraphic(r)
}

// writeJSON writes v as indented JSON in which, besides what encoding/json
// escapes (the C0 controls; invalid UTF-8 becomes U+FFFD), every non-ASCII
// rune that is not graphic — DEL, the C1 controls, bidi overrides and other
// format characters — is written as a \u escape too. A JSON reader gets
// the same strings; a terminal that shows the JSON gets nothing to act on.
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(escapeJSON(buf.Bytes()))
	return err
}

// escapeJSON rewrites the non-graphic runes of encoding/json's output as \u
// escapes. Outside strings JSON is ASCII, so every such rune is inside a
// string, where the escape means the same rune.
func escapeJSON(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == 0x7f || (r >= utf8.RuneSelf && !(r == utf8.RuneError && n == 1) && !unicode.IsGraphic(r)):
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		default:
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}
