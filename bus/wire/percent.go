package wire

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

const upperHex = "0123456789ABCDEF"

// mustEscape reports whether byte b of a header value is percent-encoded: space,
// '"', '%' and every byte outside the printable ASCII range U+0021–U+007E.
func mustEscape(b byte) bool {
	return b <= ' ' || b > '~' || b == '"' || b == '%'
}

// PercentEncode returns s as a binary-mode header value: each byte of its UTF-8
// form that is a space, '"', '%' or outside U+0021–U+007E is written as '%'
// followed by two upper-case hex digits; every other byte is kept.
func PercentEncode(s string) string {
	n := 0
	for i := 0; i < len(s); i++ {
		if mustEscape(s[i]) {
			n++
		}
	}
	if n == 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 2*n)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mustEscape(c) {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&0xF])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// PercentDecode undoes [PercentEncode]. Hex digits of either case are accepted.
// A '%' not followed by two hex digits, or a result that is not valid UTF-8, is
// an error matching [ErrBadEncoding].
func PercentDecode(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 {
		if !utf8.ValidString(s) {
			return "", fmt.Errorf("%w: not valid UTF-8", ErrBadEncoding)
		}
		return s, nil
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			out = append(out, c)
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("%w: %q at offset %d is not followed by two hex digits", ErrBadEncoding, '%', i)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", fmt.Errorf("%w: %q at offset %d is not followed by two hex digits", ErrBadEncoding, '%', i)
		}
		out = append(out, hi<<4|lo)
		i += 2
	}
	if !utf8.Valid(out) {
		return "", fmt.Errorf("%w: the decoded value is not valid UTF-8", ErrBadEncoding)
	}
	return string(out), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// headerValue returns the attribute value carried by a binary-mode header
// value v, as the binding's next revision reads one: quoted strings (RFC 7230
// §3.2.6, which older senders may use) are unescaped first, then the result is
// percent-decoded once ([PercentDecode]). An unclosed quoted string is an error
// matching [ErrBadEncoding].
func headerValue(v string) (string, error) {
	if strings.IndexByte(v, '"') < 0 {
		return PercentDecode(v)
	}
	var b strings.Builder
	b.Grow(len(v))
	quoted := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '"':
			quoted = !quoted
		case quoted && c == '\\':
			if i+1 == len(v) {
				return "", fmt.Errorf("%w: the quoted string ends in a backslash", ErrBadEncoding)
			}
			i++
			b.WriteByte(v[i])
		default:
			b.WriteByte(c)
		}
	}
	if quoted {
		return "", fmt.Errorf("%w: a quoted string is not closed", ErrBadEncoding)
	}
	return PercentDecode(b.String())
}
