package main

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// jsParser reads a JavaScript literal: objects, arrays, strings (quoted and
// template literals without substitutions), numbers, true/false/!0/!1,
// null, undefined and void 0 — the subset a bundler emits for static data.
// Anything else is an error, so a change in the bundle's layout is reported
// rather than misread. Values come out as encoding/json would decode them:
// map[string]any, []any, string, float64, bool, nil.
type jsParser struct {
	s     []byte
	i     int
	depth int
}

func (p *jsParser) errorf(format string, a ...any) error {
	return fmt.Errorf("offset %d: %s", p.i, fmt.Sprintf(format, a...))
}

func (p *jsParser) skipSpace() {
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.i++
		case c == '/' && p.i+1 < len(p.s) && p.s[p.i+1] == '/':
			for p.i < len(p.s) && p.s[p.i] != '\n' {
				p.i++
			}
		case c == '/' && p.i+1 < len(p.s) && p.s[p.i+1] == '*':
			end := strings.Index(string(p.s[p.i+2:]), "*/")
			if end < 0 {
				p.i = len(p.s)
				return
			}
			p.i += end + 4
		default:
			return
		}
	}
}

func (p *jsParser) value() (any, error) {
	p.skipSpace()
	if p.i >= len(p.s) {
		return nil, p.errorf("unexpected end")
	}
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > 200 {
		return nil, p.errorf("nesting too deep")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"' || c == '\'':
		return p.quoted(c)
	case c == '`':
		return p.template()
	case c == '!':
		p.i++
		p.skipSpace()
		if p.i < len(p.s) && (p.s[p.i] == '0' || p.s[p.i] == '1') {
			v := p.s[p.i] == '0'
			p.i++
			return v, nil
		}
		return nil, p.errorf("unsupported expression after '!'")
	case c == '-' || c == '+' || c == '.' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		id := p.ident()
		switch id {
		case "true":
			return true, nil
		case "false":
			return false, nil
		case "null", "undefined":
			return nil, nil
		case "void":
			p.skipSpace()
			if p.i < len(p.s) && p.s[p.i] == '0' {
				p.i++
				return nil, nil
			}
		}
		return nil, p.errorf("unsupported token %q", id)
	}
}

func isIdent(c byte, first bool) bool {
	return c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9')
}

func (p *jsParser) ident() string {
	start := p.i
	for p.i < len(p.s) && isIdent(p.s[p.i], p.i == start) {
		p.i++
	}
	return string(p.s[start:p.i])
}

func (p *jsParser) object() (any, error) {
	p.i++ // {
	out := map[string]any{}
	for {
		p.skipSpace()
		if p.i >= len(p.s) {
			return nil, p.errorf("unterminated object")
		}
		if p.s[p.i] == '}' {
			p.i++
			return out, nil
		}
		var key string
		switch c := p.s[p.i]; {
		case c == '"' || c == '\'':
			k, err := p.quoted(c)
			if err != nil {
				return nil, err
			}
			key = k.(string)
		case c >= '0' && c <= '9':
			start := p.i
			for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.') {
				p.i++
			}
			key = string(p.s[start:p.i])
		default:
			key = p.ident()
			if key == "" {
				return nil, p.errorf("expected a property name")
			}
		}
		p.skipSpace()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.errorf("expected ':' after %q (shorthand properties and methods are not data)", key)
		}
		p.i++
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out[key] = v
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '}' {
			continue
		}
		return nil, p.errorf("expected ',' or '}' in object")
	}
}

func (p *jsParser) array() (any, error) {
	p.i++ // [
	out := []any{}
	for {
		p.skipSpace()
		if p.i >= len(p.s) {
			return nil, p.errorf("unterminated array")
		}
		if p.s[p.i] == ']' {
			p.i++
			return out, nil
		}
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		p.skipSpace()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == ']' {
			continue
		}
		return nil, p.errorf("expected ',' or ']' in array")
	}
}

func (p *jsParser) number() (any, error) {
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == 'x' || c == 'X' ||
			c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == '_' ||
			((c == '-' || c == '+') && (p.i == start || p.s[p.i-1] == 'e' || p.s[p.i-1] == 'E')) {
			p.i++
			continue
		}
		break
	}
	lit := strings.ReplaceAll(string(p.s[start:p.i]), "_", "")
	if strings.HasPrefix(lit, "0x") || strings.HasPrefix(lit, "0X") {
		n, err := strconv.ParseInt(lit[2:], 16, 64)
		if err != nil {
			return nil, p.errorf("bad number %q", lit)
		}
		return float64(n), nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return nil, p.errorf("bad number %q", lit)
	}
	return f, nil
}

// quoted reads a '...' or "..." string with JavaScript escapes.
func (p *jsParser) quoted(q byte) (any, error) {
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == q:
			p.i++
			return b.String(), nil
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return nil, err
			}
		case c == '\n':
			return nil, p.errorf("newline in string")
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return nil, p.errorf("unterminated string")
}

// template reads a `...` literal; a ${...} substitution is not data.
func (p *jsParser) template() (any, error) {
	p.i++
	var b strings.Builder
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '`':
			p.i++
			return b.String(), nil
		case c == '\\':
			if err := p.escape(&b); err != nil {
				return nil, err
			}
		case c == '$' && p.i+1 < len(p.s) && p.s[p.i+1] == '{':
			return nil, p.errorf("template substitution")
		case c == '\r':
			p.i++ // template literals normalise CRLF and CR to LF
			if p.i < len(p.s) && p.s[p.i] == '\n' {
				p.i++
			}
			b.WriteByte('\n')
		default:
			b.WriteByte(c)
			p.i++
		}
	}
	return nil, p.errorf("unterminated template literal")
}

func (p *jsParser) escape(b *strings.Builder) error {
	p.i++ // backslash
	if p.i >= len(p.s) {
		return p.errorf("unterminated escape")
	}
	c := p.s[p.i]
	p.i++
	switch c {
	case 'n':
		b.WriteByte('\n')
	case 't':
		b.WriteByte('\t')
	case 'r':
		b.WriteByte('\r')
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'v':
		b.WriteByte('\v')
	case '0':
		b.WriteByte(0)
	case '\n':
		// line continuation
	case '\r':
		if p.i < len(p.s) && p.s[p.i] == '\n' {
			p.i++
		}
	case 'x':
		if p.i+2 > len(p.s) {
			return p.errorf("bad \\x escape")
		}
		n, err := strconv.ParseUint(string(p.s[p.i:p.i+2]), 16, 8)
		if err != nil {
			return p.errorf("bad \\x escape")
		}
		p.i += 2
		b.WriteRune(rune(n))
	case 'u':
		r, err := p.unicodeEscape()
		if err != nil {
			return err
		}
		// A surrogate pair is two \u escapes.
		if r >= 0xD800 && r < 0xDC00 && p.i+1 < len(p.s) && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
			save := p.i
			p.i += 2
			lo, err := p.unicodeEscape()
			if err == nil && lo >= 0xDC00 && lo < 0xE000 {
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
			} else {
				p.i = save
			}
		}
		if r >= 0xD800 && r < 0xE000 {
			r = utf8.RuneError
		}
		b.WriteRune(r)
	default:
		b.WriteByte(c) // \\ \' \" \` and identity escapes
	}
	return nil
}

func (p *jsParser) unicodeEscape() (rune, error) {
	if p.i < len(p.s) && p.s[p.i] == '{' {
		end := strings.IndexByte(string(p.s[p.i:min(len(p.s), p.i+10)]), '}')
		if end < 0 {
			return 0, p.errorf("bad \\u{} escape")
		}
		n, err := strconv.ParseUint(string(p.s[p.i+1:p.i+end]), 16, 32)
		if err != nil || n > utf8.MaxRune {
			return 0, p.errorf("bad \\u{} escape")
		}
		p.i += end + 1
		return rune(n), nil
	}
	if p.i+4 > len(p.s) {
		return 0, p.errorf("bad \\u escape")
	}
	n, err := strconv.ParseUint(string(p.s[p.i:p.i+4]), 16, 16)
	if err != nil {
		return 0, p.errorf("bad \\u escape")
	}
	p.i += 4
	return rune(n), nil
}
