// Package jsonobj reads the top level of a JSON object without decoding its
// values: the member names and the raw bytes of each value. It does in one pass
// over the bytes what walking the object with encoding/json's Decoder.Token
// does in many small allocations, on the hot path of every call.
package jsonobj

import (
	"encoding/json"
	"unicode/utf8"
)

// Member is one top-level member of an object: its name, decoded, and the raw
// bytes of its value (without the whitespace around it).
type Member struct {
	Name  string
	Value json.RawMessage
}

// Object is the top level of a JSON object: its members in the order they
// appear, the first of each name only. An event has a dozen members: a slice
// scanned in order costs less to build and to read than a map.
type Object []Member

// Get returns the value of the member called name.
func (o Object) Get(name string) (json.RawMessage, bool) {
	for i := range o {
		if o[i].Name == name {
			return o[i].Value, true
		}
	}
	return nil, false
}

// smallObject is the number of members up to which Members looks for a repeated
// name by scanning those it has; past it, a set of the names is kept, so that
// an object of many members costs linear time, not quadratic.
const smallObject = 16

// Members splits data, a JSON object, into its top-level members. dup is the
// first name that appears more than once (the object keeps its first value);
// ok is false when data is not a JSON object.
//
// Members checks the object's own structure and its member names, not the
// grammar inside the values (numbers, literals, matching brackets): callers
// that need valid JSON check it first (json.Valid), which is also why nesting
// depth is not limited here — a value nested deeper than encoding/json reads
// does not hide the members beside it. Nor does Members look past the object's
// closing brace: whatever follows is for json.Valid to refuse.
func Members(data []byte) (members Object, dup string, ok bool) {
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

// expected is the number of members to make room for: as many as n knows (an
// object's usual members), or a few.
func (n *Names) expected() int {
	if n == nil || len(n.known) == 0 {
		return 4
	}
	return len(n.known)
}

// Members is the package's Members, with n's names not allocated.
func (n *Names) Members(data []byte) (members Object, dup string, ok bool) {
	return n.AppendMembers(make(Object, 0, n.expected()), data)
}

// AppendMembers is Members appending the members to dst, which must be empty
// (a buffer to reuse): on success it returns dst grown, on failure nil. The
// members' values share data's bytes, and names n knows are its own strings.
func (n *Names) AppendMembers(dst Object, data []byte) (members Object, dup string, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, "", false
	}
	members = dst[:0]
	var names map[string]struct{} // once there are more than smallObject members
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
			var ok bool
			if name, ok = decodeName(data[i:end]); !ok {
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
		if members.seen(name, &names) {
			if dup == "" {
				dup = name
			}
		} else {
			members = append(members, Member{Name: name, Value: json.RawMessage(data[i:vend:vend])})
			if names != nil {
				names[name] = struct{}{}
			}
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

// seen reports whether o has a member called name. Past smallObject members
// it builds the set *names of their names and looks there; the caller adds
// each new name to it.
func (o Object) seen(name string, names *map[string]struct{}) bool {
	if *names == nil {
		if len(o) < smallObject {
			_, ok := o.Get(name)
			return ok
		}
		*names = make(map[string]struct{}, 2*len(o))
		for _, m := range o {
			(*names)[m.Name] = struct{}{}
		}
	}
	_, ok := (*names)[name]
	return ok
}

// decodeName decodes the JSON string raw as encoding/json does: escapes
// decoded, bytes that are not UTF-8 turned into U+FFFD. (In a function of its
// own so that the caller's name does not move to the heap on every member.)
func decodeName(raw []byte) (string, bool) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
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
