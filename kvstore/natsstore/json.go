package natsstore

import (
	"encoding/base64"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// The stored JSON, written and read without reflection. appendJSON writes
// byte for byte what encoding/json wrote for a value (an Encoder with HTML
// escaping off, fields in declaration order), so records written before and
// after read alike. parseValue reads that form and the rest of strict JSON's
// whitespace and escapes; for anything else (a key spelt in another case, null,
// a number with a fraction, a text object with other keys) it gives up and
// decodeValue asks encoding/json, so that no document reads differently than it
// did. FuzzValueJSON holds both to encoding/json.

// appendJSON appends v's JSON to b.
func (v *value) appendJSON(b []byte) []byte {
	b = append(b, `{"v":`...)
	b = strconv.AppendInt(b, int64(v.Version), 10)
	b = append(b, `,"s":`...)
	b = appendString(b, v.State)
	b = append(b, `,"h":`...)
	b = appendText(b, v.Holder)
	b = append(b, `,"c":`...)
	b = appendString(b, v.Claim)
	b = append(b, `,"w":`...)
	b = appendString(b, v.Write)
	b = append(b, `,"l":`...)
	b = strconv.AppendInt(b, v.Lease, 10)
	b = append(b, `,"ca":`...)
	b = strconv.AppendInt(b, v.Created, 10)
	b = appendField(b, `,"o":`, v.Outcome)
	b = appendField(b, `,"r":`, v.Reason)
	if v.Entered {
		b = append(b, `,"b":true`...)
	}
	b = appendField(b, `,"k":`, v.Check)
	b = appendField(b, `,"t":`, v.Tool)
	b = appendField(b, `,"run":`, v.RunID)
	b = appendField(b, `,"call":`, v.CallID)
	return append(b, '}')
}

// appendField appends name and t unless t is empty (omitempty).
func appendField(b []byte, name string, t text) []byte {
	if t == "" {
		return b
	}
	return appendText(append(b, name...), t)
}

// appendText appends t as a JSON string if it is valid UTF-8, and otherwise as
// {"b64":"<standard base64>"}.
func appendText(b []byte, t text) []byte {
	if utf8.ValidString(string(t)) {
		return appendString(b, string(t))
	}
	b = append(b, `{"b64":"`...)
	b = base64.StdEncoding.AppendEncode(b, []byte(t))
	return append(b, `"}`...)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string (RFC 8259), escaped as encoding/json
// escapes it with HTML escaping off: '"' and '\\' and the control characters
// (\b, \f, \n, \r, \t by name, the others as \u00XX), U+2028 and U+2029 as \u
// escapes, and each byte of invalid UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= ' ' && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// parseValue reads a value's JSON. ok is false when b is not a JSON object
// whose members are all among value's keys, spelt exactly, with values of their
// types (an integer within range, a string, a bool; for a text, a string or
// {"b64": <string without escapes>}), or when a string holds invalid UTF-8 or
// an unpaired surrogate escape: decodeValue then leaves b to encoding/json.
// Fields are substrings of one copy of b.
func parseValue(b []byte) (v value, ok bool) {
	p := parser{s: string(b)}
	p.space()
	if !p.consume('{') {
		return value{}, false
	}
	p.space()
	if !p.consume('}') {
		for {
			p.space()
			key, ok := p.key()
			if !ok {
				return value{}, false
			}
			p.space()
			if !p.consume(':') {
				return value{}, false
			}
			p.space()
			if !p.member(&v, key) {
				return value{}, false
			}
			p.space()
			if p.consume(',') {
				continue
			}
			if p.consume('}') {
				break
			}
			return value{}, false
		}
	}
	p.space()
	return v, p.i == len(p.s)
}

// parser reads JSON from s, at i.
type parser struct {
	s string
	i int
}

// member reads the value of key into v.
func (p *parser) member(v *value, key string) bool {
	var ok bool
	switch key {
	case "v":
		var n int64
		n, ok = p.integer()
		v.Version = int(n)
		ok = ok && int64(v.Version) == n
	case "s":
		v.State, ok = p.str()
	case "h":
		v.Holder, ok = p.text()
	case "c":
		v.Claim, ok = p.str()
	case "w":
		v.Write, ok = p.str()
	case "l":
		v.Lease, ok = p.integer()
	case "ca":
		v.Created, ok = p.integer()
	case "o":
		v.Outcome, ok = p.text()
	case "r":
		v.Reason, ok = p.text()
	case "b":
		v.Entered, ok = p.boolean()
	case "k":
		v.Check, ok = p.text()
	case "t":
		v.Tool, ok = p.text()
	case "run":
		v.RunID, ok = p.text()
	case "call":
		v.CallID, ok = p.text()
	}
	return ok
}

// space skips JSON whitespace.
func (p *parser) space() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// consume skips c if it is next.
func (p *parser) consume(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// key reads a member name: a string of printable ASCII without escapes.
func (p *parser) key() (string, bool) {
	if !p.consume('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return p.s[start : p.i-1], true
		case c < ' ' || c == '\\' || c >= utf8.RuneSelf:
			return "", false
		}
		p.i++
	}
	return "", false
}

// integer reads a JSON number without fraction or exponent that fits an int64.
func (p *parser) integer() (int64, bool) {
	neg := p.consume('-')
	start := p.i
	var n uint64
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		if p.i-start == 19 { // more digits than any int64 has
			return 0, false
		}
		n = n*10 + uint64(p.s[p.i]-'0')
		p.i++
	}
	digits := p.i - start
	if digits == 0 || (digits > 1 && p.s[start] == '0') {
		return 0, false
	}
	if p.i < len(p.s) {
		switch p.s[p.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	switch {
	case !neg && n <= math.MaxInt64:
		return int64(n), true
	case neg && n <= math.MaxInt64+1:
		return int64(-n), true
	}
	return 0, false
}

// boolean reads true or false.
func (p *parser) boolean() (bool, bool) {
	rest := p.s[p.i:]
	switch {
	case len(rest) >= 4 && rest[:4] == "true":
		p.i += 4
		return true, true
	case len(rest) >= 5 && rest[:5] == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// text reads a text: a string, or {"b64": "<standard base64>"}.
func (p *parser) text() (text, bool) {
	if !p.consume('{') {
		s, ok := p.str()
		return text(s), ok
	}
	p.space()
	if key, ok := p.key(); !ok || key != "b64" {
		return "", false
	}
	p.space()
	if !p.consume(':') {
		return "", false
	}
	p.space()
	enc, ok := p.key() // base64 needs no escapes; anything else goes to encoding/json
	if !ok {
		return "", false
	}
	p.space()
	if !p.consume('}') {
		return "", false
	}
	// As encoding/json decodes a []byte.
	raw := make([]byte, base64.StdEncoding.DecodedLen(len(enc)))
	n, err := base64.StdEncoding.Decode(raw, []byte(enc))
	if err != nil {
		return "", false
	}
	return text(raw[:n]), true
}

// str reads a JSON string. A string without escapes is returned as a substring
// of the input.
func (p *parser) str() (string, bool) {
	if !p.consume('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return p.s[start : p.i-1], true
		case c == '\\':
			return p.unescape(start)
		case c < ' ':
			return "", false
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			p.i += size
		}
	}
	return "", false
}

// unescape reads the rest of a string that has escapes, from p.i; the string's
// contents began at start.
func (p *parser) unescape(start int) (string, bool) {
	out := make([]byte, 0, p.i-start+64)
	out = append(out, p.s[start:p.i]...)
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(out), true
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", false
			}
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", false
				}
				if utf16.IsSurrogate(r) {
					if !p.consume('\\') || !p.consume('u') {
						return "", false
					}
					r2, ok := p.hex4()
					if r = utf16.DecodeRune(r, r2); !ok || r == utf8.RuneError {
						return "", false
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", false
			}
		case c < ' ':
			return "", false
		case c < utf8.RuneSelf:
			out = append(out, c)
			p.i++
		default:
			r, size := utf8.DecodeRuneInString(p.s[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			out = append(out, p.s[p.i:p.i+size]...)
			p.i += size
		}
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape.
func (p *parser) hex4() (rune, bool) {
	if p.i+4 > len(p.s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(p.s[p.i : p.i+4]) {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}
