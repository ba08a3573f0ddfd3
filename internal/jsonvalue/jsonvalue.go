// Package jsonvalue decodes a JSON document into the generic values a JSON
// Schema validator takes: what encoding/json's Decoder with UseNumber makes of
// it (map[string]any, []any, string, json.Number, bool, nil), and so what
// jsonschema.UnmarshalJSON returns.
//
// Every call validates its arguments and every caller validates the answer it
// receives, so this decoding runs twice on each call's path. The Decoder reads
// its input through a buffer it allocates and grows, scans the value once to
// find its end and again to decode it, and builds each member through
// reflection. Parse reads the common documents (objects of plain strings,
// numbers and literals) in one pass over the bytes, and hands anything it does
// not read itself to jsonschema.UnmarshalJSON: escaped or invalid UTF-8
// strings go to encoding/json one string at a time, and a document that is not
// JSON, or nests deeper than maxDepth, goes to it whole, so that every error,
// and its text, is the Decoder's.
package jsonvalue

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxDepth is the nesting Parse reads itself; deeper documents go to the
// Decoder, which has its own limit.
const maxDepth = 256

// Parse decodes data, one JSON value with optional white space around it, as
// jsonschema.UnmarshalJSON does, with the same values and the same errors.
func Parse(data []byte) (any, error) {
	p := parser{data: data}
	p.space()
	if v, ok := p.value(0); ok {
		p.space()
		if p.i == len(p.data) {
			return v, nil
		}
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(data))
}

// parser reads data from i on; each method reports false for anything it
// does not read (bad JSON, or JSON that Parse leaves to the Decoder).
type parser struct {
	data []byte
	i    int
}

func (p *parser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (any, bool) {
	if p.i >= len(p.data) {
		return nil, false
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, ok := p.string()
		return s, ok
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *parser) literal(word string) bool {
	if !bytes.HasPrefix(p.data[p.i:], []byte(word)) {
		return false
	}
	p.i += len(word)
	return true
}

func (p *parser) object(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	m := map[string]any{}
	more, ok := p.open('}')
	for ; more; more, ok = p.next('}') {
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, false
		}
		k, read := p.string()
		if !read {
			return nil, false
		}
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.space()
		v, read := p.value(depth)
		if !read {
			return nil, false
		}
		m[k] = v // a repeated name keeps its last value, as encoding/json does
	}
	if !ok {
		return nil, false
	}
	return m, true
}

func (p *parser) array(depth int) (any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	a := []any{}
	more, ok := p.open(']')
	for ; more; more, ok = p.next(']') {
		v, read := p.value(depth)
		if !read {
			return nil, false
		}
		a = append(a, v)
	}
	if !ok {
		return nil, false
	}
	return a, true
}

// open steps over the bracket at i and the space after it. It reports whether
// an element follows: false when the bracket is closed at once by end (which it
// steps over too).
func (p *parser) open(end byte) (more, ok bool) {
	p.i++
	p.space()
	if p.i < len(p.data) && p.data[p.i] == end {
		p.i++
		return false, true
	}
	return true, true
}

// next steps over what follows an element: a comma and the space after it
// (more is true), or the closing end (more is false). Anything else is not
// JSON (ok is false).
func (p *parser) next(end byte) (more, ok bool) {
	p.space()
	if p.i >= len(p.data) {
		return false, false
	}
	switch p.data[p.i] {
	case ',':
		p.i++
		p.space()
		return true, true
	case end:
		p.i++
		return false, true
	}
	return false, false
}

// string reads the string at i (its opening quote). A string without escapes
// whose bytes are valid UTF-8 is copied as it is; any other goes to
// encoding/json, whose unquoting (escapes, U+FFFD for bad bytes) is the rule.
func (p *parser) string() (string, bool) {
	start := p.i
	plain := true
	for j := start + 1; j < len(p.data); j++ {
		switch c := p.data[j]; {
		case c == '"':
			p.i = j + 1
			if plain {
				return string(p.data[start+1 : j]), true
			}
			var s string
			if err := json.Unmarshal(p.data[start:j+1], &s); err != nil {
				return "", false
			}
			return s, true
		case c == '\\':
			plain = false
			j++ // the escaped byte cannot end the string
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf && plain:
			r, size := utf8.DecodeRune(p.data[j:])
			if r == utf8.RuneError && size == 1 {
				plain = false
			} else {
				j += size - 1
			}
		}
	}
	return "", false
}

// number reads a number at i in JSON's grammar and keeps its text, as
// json.Number.
func (p *parser) number() (any, bool) {
	d, start := p.data, p.i
	i := start
	if d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		i = digits(d, i)
	default:
		return nil, false
	}
	if i < len(d) && d[i] == '.' {
		if i++; i >= len(d) || !isDigit(d[i]) {
			return nil, false
		}
		i = digits(d, i)
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || !isDigit(d[i]) {
			return nil, false
		}
		i = digits(d, i)
	}
	p.i = i
	return json.Number(d[start:i]), true
}

func digits(d []byte, i int) int {
	for i < len(d) && isDigit(d[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
