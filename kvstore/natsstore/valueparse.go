package natsstore

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// parseValue reads a value in the exact shape appendValue writes: the fields
// in declaration order, the optional ones only when set, numbers as plain
// integers, strings with the escapes appendValue uses except \u, texts as
// strings or {"b64":...}. For anything else it reports false and decodeValue
// falls back to encoding/json, which reads every spelling of the format.
//
// Written by hand because a duplicate's claim, Wait, List and the census read
// every record they see (docs/BENCHMARKS.md measures it against encoding/json
// with BenchmarkValueJSON/decode). FuzzParseValue holds it to encoding/json's
// reading.
func parseValue(b []byte) (value, bool) {
	p := valueParser{b: b}
	var v value
	version, ok := p.num(`{"v":`)
	v.Version = int(version)
	ok = ok && p.lit(`,"s":`) && p.str(&v.State) &&
		p.lit(`,"h":`) && p.text(&v.Holder) &&
		p.lit(`,"c":`) && p.str(&v.Claim) &&
		p.lit(`,"w":`) && p.str(&v.Write)
	if !ok {
		return value{}, false
	}
	if v.Lease, ok = p.num(`,"l":`); !ok {
		return value{}, false
	}
	if v.Created, ok = p.num(`,"ca":`); !ok {
		return value{}, false
	}
	for _, f := range [...]struct {
		name string
		t    *text
	}{{`,"o":`, &v.Outcome}, {`,"r":`, &v.Reason}} {
		if p.lit(f.name) && !p.text(f.t) {
			return value{}, false
		}
	}
	if p.lit(`,"b":true`) {
		v.Entered = true
	}
	for _, f := range [...]struct {
		name string
		t    *text
	}{{`,"k":`, &v.Check}, {`,"t":`, &v.Tool}, {`,"run":`, &v.RunID}, {`,"call":`, &v.CallID}} {
		if p.lit(f.name) && !p.text(f.t) {
			return value{}, false
		}
	}
	if !p.lit("}") || p.i != len(b) {
		return value{}, false
	}
	return v, true
}

// valueParser reads b from i on.
type valueParser struct {
	b []byte
	i int
}

// lit consumes s if it comes next: a fixed part, or an optional field's name.
func (p *valueParser) lit(s string) bool {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return false
	}
	p.i += len(s)
	return true
}

// num reads the field name and an integer as encoding/json writes one.
func (p *valueParser) num(name string) (int64, bool) {
	if !p.lit(name) {
		return 0, false
	}
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		p.i++
	}
	if p.i == digits || (p.b[digits] == '0' && p.i-digits > 1) {
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return n, err == nil
}

// str reads a JSON string into s.
func (p *valueParser) str(s *string) bool {
	if p.i >= len(p.b) || p.b[p.i] != '"' {
		return false
	}
	p.i++
	start := p.i
	var out []byte // nil while no escape was met: s is then a plain slice of b
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			if out == nil {
				*s = string(p.b[start:p.i])
			} else {
				*s = string(append(out, p.b[start:p.i]...))
			}
			p.i++
			return true
		case c < 0x20:
			return false // encoding/json refuses it
		case c == '\\':
			if p.i+1 >= len(p.b) {
				return false
			}
			var r byte
			switch p.b[p.i+1] {
			case '"', '\\', '/':
				r = p.b[p.i+1]
			case 'b':
				r = '\b'
			case 'f':
				r = '\f'
			case 'n':
				r = '\n'
			case 'r':
				r = '\r'
			case 't':
				r = '\t'
			default:
				return false // \u and anything else: encoding/json's business
			}
			if out == nil {
				out = make([]byte, 0, len(p.b)-start) // the string cannot be longer
			}
			out = append(append(out, p.b[start:p.i]...), r)
			p.i += 2
			start = p.i
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(p.b[p.i:])
			if r == utf8.RuneError && size == 1 {
				return false // encoding/json replaces it with U+FFFD
			}
			p.i += size
		default:
			p.i++
		}
	}
	return false
}

// text reads a text: a JSON string, or {"b64":"..."} holding its bytes.
func (p *valueParser) text(t *text) bool {
	var s string
	if p.i < len(p.b) && p.b[p.i] == '{' {
		if !p.lit(`{"b64":`) || !p.str(&s) || !p.lit("}") {
			return false
		}
		raw, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return false
		}
		*t = text(raw)
		return true
	}
	if !p.str(&s) {
		return false
	}
	*t = text(s)
	return true
}
