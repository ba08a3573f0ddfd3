// Package jsonobj reads the top level of a JSON object without decoding its
// values: the member names and the raw bytes of each value. It does in one pass
// over the bytes what walking the object with encoding/json's Decoder.Token
// does in many small allocations, on the hot path of every call.
package jsonobj

import (
	"encoding/json"
	"unicode/utf8"
)

// Members splits data, a JSON object, into its top-level members: each name,
// decoded, mapped to the raw bytes of its value (without the whitespace around
// it). dup is the first name that appears more than once (the map keeps its
// first value); ok is false when data is not a JSON object.
//
// Members checks the object's own structure and its member names, not the
// grammar inside the values (numbers, literals, matching brackets): callers
// that need valid JSON check it first (json.Valid), which is also why nesting
// depth is not limited here — a value nested deeper than encoding/json reads
// does not hide the members beside it. Nor does Members look past the object's
// closing brace: whatever follows is for json.Valid to refuse.
func Members(data []byte) (members map[string]json.RawMessage, dup string, ok bool) {
	return (*Names)(nil).Members(data)
}

// Names is a set of member names a reader expects. Its Members returns those
// names as the strings given to NewNames instead of allocating a copy of each
// one it meets: on the hot path, an event's dozen attribute names. A nil
// *Names expects none.
type Names struct {
	known map[string]string
}

// NewNames returns the set of names.
func NewNames(names ...string) *Names {
	n := &Names{known: make(map[string]string, len(names))}
	for _, name := range names {
		n.known[name] = name
	}
	return n
}

// name returns the string of raw, the bytes of a name without escapes.
func (n *Names) name(raw []byte) string {
	if n != nil {
		if s, ok := n.known[string(raw)]; ok { // a lookup by string(raw) does not allocate
			return s
		}
	}
	return string(raw)
}

// Members is the package's Members, with n's names not allocated.
func (n *Names) Members(data []byte) (members map[string]json.RawMessage, dup string, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, "", false
	}
	members = make(map[string]json.RawMessage, 8)
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return members, "", true
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return nil, "", false
		}
		end, escaped := scanString(data, i)
		if end < 0 {
			return nil, "", false
		}
		var name string
		if escaped || !utf8.Valid(data[i+1:end-1]) {
			// encoding/json decodes the escapes and turns bytes that are not
			// UTF-8 into U+FFFD; a name is the same here as there.
			if err := json.Unmarshal(data[i:end], &name); err != nil {
				return nil, "", false
			}
		} else {
			name = n.name(data[i+1 : end-1])
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return nil, "", false
		}
		i = skipSpace(data, i+1)
		vend := skipValue(data, i)
		if vend < 0 {
			return nil, "", false
		}
		if _, seen := members[name]; seen {
			if dup == "" {
				dup = name
			}
		} else {
			members[name] = json.RawMessage(data[i:vend:vend])
		}
		i = skipSpace(data, vend)
		if i >= len(data) {
			return nil, "", false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return members, dup, true
		default:
			return nil, "", false
		}
	}
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

// scanString reads the string starting at data[i] (a quote) and returns the
// index just past its closing quote, or -1 when it is not closed, and whether
// it holds an escape.
func scanString(data []byte, i int) (end int, escaped bool) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '"':
			return j + 1, escaped
		case '\\':
			escaped = true
			j++ // the escaped character, which may be a quote
		}
	}
	return -1, escaped
}

// skipValue returns the index just past the value starting at data[i], or -1
// when there is none. Arrays and objects are skipped by counting brackets
// outside strings.
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return -1
	}
	switch data[i] {
	case '"':
		end, _ := scanString(data, i)
		return end
	case '{', '[':
		depth := 0
		for j := i; j < len(data); j++ {
			switch data[j] {
			case '"':
				end, _ := scanString(data, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	case ',', '}', ']', ':':
		return -1
	}
	j := i
	for j < len(data) && !isSpace(data[j]) && data[j] != ',' && data[j] != '}' && data[j] != ']' {
		j++
	}
	return j
}
