package canonical

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string; plain says s is known to hold no
// character that needs escaping.
func appendString(dst, s []byte, plain bool) []byte {
	if !plain {
		return appendQuoted(dst, s)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// appendQuoted appends s as a JSON string, escaped as ECMAScript's JSON.stringify
// escapes it. s must be valid UTF-8.
func appendQuoted[S ~string | ~[]byte](dst []byte, s S) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendQuoted appends s to dst as a JSON string, quoted and escaped as the
// canonical form escapes strings: quotation mark, backslash and the control
// characters, those with a short escape (\b \t \n \f \r) by it and the others as
// \u00xx; every other character as it is. Unlike [AppendString] it neither checks
// nor normalises s, so it writes any valid UTF-8 string as one JSON reader and
// another read it; it is toolexec's one JSON string escaper.
func AppendQuoted(dst []byte, s string) []byte {
	return appendQuoted(dst, s)
}

// AppendString appends s, normalised to NFC, as a canonical JSON string (quoted and
// escaped) to dst. It returns dst unchanged and an [*Error] with code
// [CodeInvalidUnicode] if s is not valid UTF-8; the error's Offset is the offset of
// the first invalid byte in s.
func AppendString(dst []byte, s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return appendUnicode(dst, s, i)
		}
	}
	return appendQuoted(dst, s), nil
}

// appendUnicode is AppendString for a string with a non-ASCII byte at from.
func appendUnicode(dst []byte, s string, from int) ([]byte, error) {
	for i := from; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return dst, newError(CodeInvalidUnicode, i, "invalid UTF-8 byte %#02x in a string", s[i])
		}
		i += size
	}
	if !norm.NFC.IsNormalString(s) {
		s = norm.NFC.String(s)
	}
	return appendQuoted(dst, s), nil
}

// CompareNames compares a and b by their UTF-16 code units, the order RFC 8785 sorts
// member names in. It returns -1, 0 or +1. Both should be valid UTF-8; it does not
// normalise them.
func CompareNames(a, b string) int {
	return compareUTF16(a, b)
}

// compareUTF16 compares two UTF-8 strings in the order of their UTF-16 encodings.
//
// UTF-8 byte order is code point order, and so is UTF-16 order, except that the
// characters from U+10000 on (two surrogates, 0xD800-0xDBFF first) sort before
// U+E000-U+FFFF. So the bytes are compared as they are unless, at the first
// difference, one string has a four-byte sequence (lead byte 0xF0-0xF4) and the other
// a character from U+E000 (lead byte 0xEE or 0xEF).
func compareUTF16[A, B ~string | ~[]byte](a A, b B) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	if i == n {
		switch {
		case len(a) < len(b):
			return -1
		case len(a) > len(b):
			return 1
		}
		return 0
	}
	// Back up to the first byte of the character that differs; the strings agree up
	// to i, so it starts at the same offset in both.
	s := i
	for s > 0 && a[s]&0xC0 == 0x80 {
		s--
	}
	la, lb := a[s], b[s]
	switch {
	case la >= 0xF0 && (lb == 0xEE || lb == 0xEF):
		return -1
	case lb >= 0xF0 && (la == 0xEE || la == 0xEF):
		return 1
	case a[i] < b[i]:
		return -1
	}
	return 1
}
