package canonical

import (
	"fmt"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Object is the canonical form of a JSON object with its top-level members kept
// apart: each member's NFC name and the canonical bytes of `"name":value` can be read
// without parsing again. Members are indexed 0..Len()-1 in canonical order. An Object
// is immutable and safe for concurrent use; the slices its methods return must not be
// modified.
type Object struct {
	data    []byte // the canonical object, then the NFC names of its members
	size    int    // length of the canonical object in data
	members []objectMember
}

type objectMember struct {
	name  span // NFC name, in data
	seg   span // `"name":value`, in data
	value int  // start of the value, in data
}

// ParseObject canonicalises raw, which must be a JSON object, and returns it as an
// [Object], within lim (see [Limits]; the zero value bounds only the depth, by
// [MaxDepth]).
//
// The whole document is checked first, so a malformed document returns the same
// [*Error] that [Canonicalize] would; a well-formed document whose value is not an
// object returns an error matching [ErrNotObject].
func ParseObject(raw []byte, lim Limits) (*Object, error) {
	o := new(Object)
	if err := o.Parse(raw, lim); err != nil {
		return nil, err
	}
	return o, nil
}

// Parse is [ParseObject] into o: it replaces o's contents with the canonical form of
// raw, reusing o's storage, so that a caller can keep a pool of Objects. o must not
// be in use elsewhere meanwhile. On error o is left empty (Len 0, Bytes nil).
func (o *Object) Parse(raw []byte, lim Limits) error {
	_, err := o.parse(raw, lim, false)
	return err
}

// ParseObjectValue is [ParseObject] that also returns the object decoded, built in
// the same pass over raw: the value encoding/json's Decoder with UseNumber gives
// (map[string]any, []any, string, json.Number, bool and nil), with names and strings
// as the document spells them, not in NFC, and each number's text as written. It is
// what a JSON Schema validator reads. Where ParseObject fails, it returns the same
// error and a nil map.
func ParseObjectValue(raw []byte, lim Limits) (*Object, map[string]any, error) {
	o := new(Object)
	v, err := o.parse(raw, lim, true)
	if err != nil {
		return nil, nil, err
	}
	return o, v, nil
}

// parse is Parse, building the decoded object too when decode is set.
func (o *Object) parse(raw []byte, lim Limits, decode bool) (map[string]any, error) {
	o.data, o.size, o.members = o.data[:0], 0, o.members[:0]
	e := getEncoder(raw, lim)
	defer putEncoder(e)
	e.keepTop = true
	e.decode = decode
	e.out = e.own[:0]
	err := e.document()
	e.own = e.out[:0]
	if err != nil {
		return nil, err
	}
	if e.out[0] != '{' {
		return nil, fmt.Errorf("%w: the document is %s", ErrNotObject, kind(e.out[0]))
	}
	var value map[string]any
	if decode {
		value = e.vals[0].(map[string]any)
	}

	size := len(e.out)
	for _, m := range e.members {
		size += m.name.end - m.name.start
	}
	if cap(o.data) < size {
		o.data = make([]byte, 0, size)
	}
	if cap(o.members) < len(e.members) {
		o.members = make([]objectMember, 0, len(e.members))
	}
	o.data = append(o.data, e.out...)
	o.size = len(e.out)
	for _, m := range e.members {
		start := len(o.data)
		o.data = append(o.data, e.names[m.name.start:m.name.end]...)
		o.members = append(o.members, objectMember{
			name:  span{start, len(o.data)},
			seg:   m.seg,
			value: m.value,
		})
	}
	return value, nil
}

func kind(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// Bytes returns the canonical form of the whole object.
func (o *Object) Bytes() []byte {
	if o.size == 0 {
		return nil
	}
	return o.data[:o.size:o.size]
}

// Len returns the number of members.
func (o *Object) Len() int { return len(o.members) }

// Name returns the NFC name of member i.
func (o *Object) Name(i int) string {
	m := o.members[i]
	return string(o.data[m.name.start:m.name.end])
}

// Member returns the canonical bytes of member i as it appears in [Object.Bytes]:
// its quoted name, a colon and its value.
func (o *Object) Member(i int) []byte {
	m := o.members[i]
	return o.data[m.seg.start:m.seg.end:m.seg.end]
}

// Value returns the canonical bytes of member i's value.
func (o *Object) Value(i int) []byte {
	m := o.members[i]
	return o.data[m.value:m.seg.end:m.seg.end]
}

// Index returns the index of the member named name, or -1 if there is none. The
// name is normalised to NFC before the lookup, as member names are; a name that is
// not valid UTF-8 names no member.
func (o *Object) Index(name string) int {
	if !isASCII(name) {
		if !utf8.ValidString(name) {
			return -1
		}
		if !norm.NFC.IsNormalString(name) {
			name = norm.NFC.String(name)
		}
	}
	lo, hi := 0, len(o.members)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		m := o.members[mid]
		switch c := compareUTF16(o.data[m.name.start:m.name.end], name); {
		case c == 0:
			return mid
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return -1
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
