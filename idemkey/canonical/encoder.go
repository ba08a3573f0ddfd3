package canonical

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// span is a half-open byte range [start, end) in one of the encoder's buffers.
type span struct{ start, end int }

// member is one object member while its object is being encoded.
type member struct {
	name    span // NFC name, in encoder.names
	rawName span // name as spelled (unescaped, before NFC), in encoder.names
	seg     span // `"name":value`, canonical, in encoder.out
	value   int  // start of the canonical value in encoder.out
	offset  int  // offset of the name's opening quote in the input
}

// encoder canonicalises one document in a single pass over its bytes. Each object's
// members are written to out as they come and, if they were not already in
// canonical order, rearranged when the object closes; nested values are final by
// then, so they move as opaque byte ranges.
type encoder struct {
	raw      []byte
	pos      int
	depth    int
	maxDepth int
	lim      Limits // Members, Elements and Values; 0 is no bound
	values   int    // values met so far, containers included
	keepTop  bool   // keep the top-level object's members after it closes
	decode   bool   // build the decoded value as well, in vals

	out     []byte   // output being written
	own     []byte   // pooled storage for out when the caller gives none
	members []member // members of the open objects, innermost last
	names   []byte   // member names of the open objects
	str     []byte   // an unescaped string
	nfc     []byte   // an unescaped string after NFC, when it differed
	reorder []byte   // copy of an object's members while they are rearranged
	vals    []any    // decoded values of the open containers, innermost last
}

// push records a decoded value when the encoder builds them. For a value that
// costs an allocation to make, check e.decode first instead.
func (e *encoder) push(v any) {
	if e.decode {
		e.vals = append(e.vals, v)
	}
}

func (e *encoder) syntax(offset int, format string, args ...any) error {
	return newError(CodeInvalidJSON, offset, format, args...)
}

// document encodes the whole input, which must be exactly one value.
func (e *encoder) document() error {
	if bytes.HasPrefix(e.raw, []byte("\xef\xbb\xbf")) {
		return e.syntax(0, "a byte order mark is not allowed")
	}
	e.skipSpace()
	if err := e.value(); err != nil {
		return err
	}
	e.skipSpace()
	if e.pos != len(e.raw) {
		return e.syntax(e.pos, "unexpected %s after the value", describe(e.raw[e.pos]))
	}
	return nil
}

func (e *encoder) skipSpace() {
	for e.pos < len(e.raw) {
		switch e.raw[e.pos] {
		case ' ', '\t', '\n', '\r':
			e.pos++
		default:
			return
		}
	}
}

func (e *encoder) value() error {
	if e.pos >= len(e.raw) {
		return e.syntax(e.pos, "unexpected end of input, want a value")
	}
	e.values++
	if e.lim.Values > 0 && e.values > e.lim.Values {
		return newError(CodeTooManyValues, e.pos, "the document holds more than %d values", e.lim.Values)
	}
	switch c := e.raw[e.pos]; {
	case c == '{':
		return e.object()
	case c == '[':
		return e.array()
	case c == '"':
		s, spelled, plain, err := e.string()
		if err != nil {
			return err
		}
		if e.decode {
			if spelled != nil {
				e.vals = append(e.vals, string(spelled))
			} else {
				e.vals = append(e.vals, string(s))
			}
		}
		e.out = appendString(e.out, s, plain)
		return nil
	case c == 't':
		e.push(true)
		return e.literal("true")
	case c == 'f':
		e.push(false)
		return e.literal("false")
	case c == 'n':
		e.push(nil)
		return e.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		start := e.pos
		if err := e.number(); err != nil {
			return err
		}
		if e.decode { // the conversion allocates: only when the value is wanted
			e.vals = append(e.vals, json.Number(e.raw[start:e.pos]))
		}
		return nil
	default:
		return e.syntax(e.pos, "unexpected %s, want a value", describe(c))
	}
}

func (e *encoder) literal(word string) error {
	if !bytes.HasPrefix(e.raw[e.pos:], []byte(word)) {
		return e.syntax(e.pos, "invalid literal, want %s", word)
	}
	e.pos += len(word)
	e.out = append(e.out, word...)
	return nil
}

func (e *encoder) enter() error {
	e.depth++
	if e.depth > e.maxDepth {
		return newError(CodeTooDeep, e.pos, "containers nest deeper than %d", e.maxDepth)
	}
	return nil
}

func (e *encoder) array() error {
	if err := e.enter(); err != nil {
		return err
	}
	open := e.pos
	e.pos++
	e.out = append(e.out, '[')
	mark := len(e.vals)
	e.skipSpace()
	if e.pos < len(e.raw) && e.raw[e.pos] == ']' {
		e.pos++
		e.out = append(e.out, ']')
		e.depth--
		if e.decode {
			e.vals = append(e.vals, []any{})
		}
		return nil
	}
	for n := 1; ; n++ {
		e.skipSpace()
		if e.lim.Elements > 0 && n > e.lim.Elements {
			return newError(CodeTooManyValues, e.pos, "an array holds more than %d elements", e.lim.Elements)
		}
		if err := e.value(); err != nil {
			return err
		}
		e.skipSpace()
		if e.pos >= len(e.raw) {
			return e.syntax(open, "unterminated array")
		}
		switch c := e.raw[e.pos]; c {
		case ',':
			e.pos++
			e.out = append(e.out, ',')
		case ']':
			e.pos++
			e.out = append(e.out, ']')
			e.depth--
			if e.decode {
				a := slices.Clone(e.vals[mark:])
				clear(e.vals[mark:])
				e.vals = append(e.vals[:mark], a)
			}
			return nil
		default:
			return e.syntax(e.pos, "unexpected %s in array, want , or ]", describe(c))
		}
	}
}

func (e *encoder) object() error {
	if err := e.enter(); err != nil {
		return err
	}
	open := e.pos
	e.pos++
	e.out = append(e.out, '{')
	first := len(e.members)
	namesMark := len(e.names)
	mark := len(e.vals)
	e.skipSpace()
	if e.pos < len(e.raw) && e.raw[e.pos] == '}' {
		e.pos++
		e.out = append(e.out, '}')
		e.depth--
		if e.decode {
			e.vals = append(e.vals, map[string]any{})
		}
		return nil
	}
	body := len(e.out)
	for {
		e.skipSpace()
		if e.pos >= len(e.raw) {
			return e.syntax(open, "unterminated object")
		}
		if c := e.raw[e.pos]; c != '"' {
			return e.syntax(e.pos, "unexpected %s in object, want a member name", describe(c))
		}
		if e.lim.Members > 0 && len(e.members)-first >= e.lim.Members {
			return newError(CodeTooManyValues, e.pos, "an object holds more than %d members", e.lim.Members)
		}
		m := member{offset: e.pos}
		name, spelled, plain, err := e.string()
		if err != nil {
			return err
		}
		m.name.start = len(e.names)
		e.names = append(e.names, name...)
		m.name.end = len(e.names)
		m.rawName = m.name
		if spelled != nil {
			m.rawName.start = len(e.names)
			e.names = append(e.names, spelled...)
			m.rawName.end = len(e.names)
		}
		if len(e.members) > first {
			e.out = append(e.out, ',')
		}
		m.seg.start = len(e.out)
		e.out = appendString(e.out, name, plain)
		e.out = append(e.out, ':')

		e.skipSpace()
		if e.pos >= len(e.raw) {
			return e.syntax(open, "unterminated object")
		}
		if c := e.raw[e.pos]; c != ':' {
			return e.syntax(e.pos, "unexpected %s after a member name, want :", describe(c))
		}
		e.pos++
		e.skipSpace()
		m.value = len(e.out)
		if err := e.value(); err != nil {
			return err
		}
		m.seg.end = len(e.out)
		e.members = append(e.members, m)

		e.skipSpace()
		if e.pos >= len(e.raw) {
			return e.syntax(open, "unterminated object")
		}
		c := e.raw[e.pos]
		if c == ',' {
			e.pos++
			continue
		}
		if c != '}' {
			return e.syntax(e.pos, "unexpected %s in object, want , or }", describe(c))
		}
		e.pos++
		break
	}
	if e.decode {
		e.decodeObject(first, mark)
	}
	if err := e.order(first, body); err != nil {
		return err
	}
	e.out = append(e.out, '}')
	e.depth--
	if e.depth > 0 || !e.keepTop {
		e.members = e.members[:first]
		e.names = e.names[:namesMark]
	}
	return nil
}

// decodeObject replaces the values of the members from index first on, which
// start at vals[mark], with the map of the object they make, keyed by the names as
// spelled. Two names that are equal after NFC make order refuse the object, so no
// value is lost to a repeated key.
func (e *encoder) decodeObject(first, mark int) {
	ms := e.members[first:]
	m := make(map[string]any, len(ms))
	for i, mem := range ms {
		m[string(e.names[mem.rawName.start:mem.rawName.end])] = e.vals[mark+i]
	}
	clear(e.vals[mark:])
	e.vals = append(e.vals[:mark], m)
}

// order puts the members from index first on into canonical order, both in
// e.members and in e.out (where they start at body), and refuses duplicate names.
func (e *encoder) order(first, body int) error {
	ms := e.members[first:]
	if len(ms) < 2 {
		return nil
	}
	cmp := func(a, b member) int {
		return compareUTF16(e.names[a.name.start:a.name.end], e.names[b.name.start:b.name.end])
	}
	moved, same := false, false
	if len(ms) <= 16 {
		// Insertion sort: n-1 comparisons when the members are already in order, and
		// every pair of equal names meets when the later one is inserted.
		for i := 1; i < len(ms) && !same; i++ {
			for j := i; j > 0; j-- {
				c := cmp(ms[j-1], ms[j])
				if c < 0 {
					break
				}
				if c == 0 {
					same = true
					break
				}
				ms[j-1], ms[j] = ms[j], ms[j-1]
				moved = true
			}
		}
	} else {
		for i := 1; i < len(ms); i++ {
			if cmp(ms[i-1], ms[i]) >= 0 {
				moved = true
				break
			}
		}
		if moved {
			slices.SortFunc(ms, cmp)
			for i := 1; i < len(ms) && !same; i++ {
				same = cmp(ms[i-1], ms[i]) == 0
			}
		}
	}
	if same {
		slices.SortFunc(ms, cmp)
		for i := 0; i < len(ms); {
			j := i + 1
			for j < len(ms) && cmp(ms[i], ms[j]) == 0 {
				j++
			}
			if j-i > 1 {
				return e.sameNames(ms[i:j])
			}
			i = j
		}
	}
	if !moved {
		return nil
	}

	e.reorder = append(e.reorder[:0], e.out[body:]...)
	e.out = e.out[:body]
	for i := range ms {
		m := &ms[i]
		if i > 0 {
			e.out = append(e.out, ',')
		}
		start := len(e.out)
		e.out = append(e.out, e.reorder[m.seg.start-body:m.seg.end-body]...)
		m.value = start + (m.value - m.seg.start)
		m.seg = span{start, len(e.out)}
	}
	return nil
}

// sameNames builds the error for members whose NFC names are equal: a duplicate if
// two of them are spelled alike, an NFC collision otherwise.
func (e *encoder) sameNames(ms []member) error {
	for i := range ms {
		for j := i + 1; j < len(ms); j++ {
			a, b := ms[i], ms[j]
			if bytes.Equal(e.names[a.rawName.start:a.rawName.end], e.names[b.rawName.start:b.rawName.end]) {
				return newError(CodeDuplicateMember, max(a.offset, b.offset),
					"duplicate member name %q", e.names[a.rawName.start:a.rawName.end])
			}
		}
	}
	a, b := ms[0], ms[1]
	return newError(CodeNFCCollision, max(a.offset, b.offset),
		"member names %+q and %+q are equal after NFC",
		e.names[a.rawName.start:a.rawName.end], e.names[b.rawName.start:b.rawName.end])
}

// string reads the string starting at the quote at e.pos. It returns its content,
// unescaped, checked and in NFC; when NFC changed it, the content as spelled (nil
// otherwise); and whether the content is known to need no escaping. The slices may
// alias the input or the encoder's scratch buffers, so they are only good until the
// next call.
func (e *encoder) string() (text, spelled []byte, plain bool, err error) {
	open := e.pos
	i := open + 1
	for i < len(e.raw) {
		c := e.raw[i]
		if c == '"' {
			e.pos = i + 1
			return e.raw[open+1 : i], nil, true, nil
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		i++
	}
	buf := append(e.str[:0], e.raw[open+1:i]...)
	ascii := true
	for {
		if i >= len(e.raw) {
			e.str = buf
			return nil, nil, false, e.syntax(open, "unterminated string")
		}
		c := e.raw[i]
		switch {
		case c == '"':
			i++
		case c == '\\':
			r, next, err := e.escape(i)
			if err != nil {
				e.str = buf
				return nil, nil, false, err
			}
			if r >= utf8.RuneSelf {
				ascii = false
			}
			buf = utf8.AppendRune(buf, r)
			i = next
			continue
		case c < 0x20:
			e.str = buf
			return nil, nil, false, e.syntax(i, "control character %#02x must be escaped in a string", c)
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
			continue
		default:
			r, size := utf8.DecodeRune(e.raw[i:])
			if r == utf8.RuneError && size <= 1 {
				e.str = buf
				return nil, nil, false, newError(CodeInvalidUnicode, i, "invalid UTF-8 byte %#02x in a string", c)
			}
			buf = append(buf, e.raw[i:i+size]...)
			i += size
			ascii = false
			continue
		}
		break
	}
	e.str = buf
	e.pos = i
	if ascii || norm.NFC.IsNormal(buf) {
		return buf, nil, false, nil
	}
	e.nfc = norm.NFC.Append(e.nfc[:0], buf...)
	return e.nfc, buf, false, nil
}

// escape decodes the escape sequence at the backslash at i, joining a surrogate pair
// into one rune. It returns the rune and the offset after the sequence.
func (e *encoder) escape(i int) (rune, int, error) {
	if i+1 >= len(e.raw) {
		return 0, 0, e.syntax(i, "unterminated escape sequence")
	}
	switch c := e.raw[i+1]; c {
	case '"', '\\', '/':
		return rune(c), i + 2, nil
	case 'b':
		return '\b', i + 2, nil
	case 'f':
		return '\f', i + 2, nil
	case 'n':
		return '\n', i + 2, nil
	case 'r':
		return '\r', i + 2, nil
	case 't':
		return '\t', i + 2, nil
	case 'u':
		r, err := e.hex4(i)
		if err != nil {
			return 0, 0, err
		}
		switch {
		case 0xDC00 <= r && r <= 0xDFFF:
			return 0, 0, newError(CodeInvalidUnicode, i, "lone low surrogate \\u%04x", r)
		case 0xD800 <= r && r <= 0xDBFF:
			j := i + 6
			if j+1 < len(e.raw) && e.raw[j] == '\\' && e.raw[j+1] == 'u' {
				lo, err := e.hex4(j)
				if err != nil {
					return 0, 0, err
				}
				if 0xDC00 <= lo && lo <= 0xDFFF {
					return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), j + 6, nil
				}
			}
			return 0, 0, newError(CodeInvalidUnicode, i, "high surrogate \\u%04x without a low surrogate after it", r)
		}
		return r, i + 6, nil
	default:
		return 0, 0, e.syntax(i, "invalid escape sequence \\%c", rune(c))
	}
}

// hex4 reads the four hex digits of the \u escape at i.
func (e *encoder) hex4(i int) (rune, error) {
	if i+6 > len(e.raw) {
		return 0, e.syntax(i, "truncated \\u escape")
	}
	var r rune
	for _, c := range e.raw[i+2 : i+6] {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, e.syntax(i, "invalid \\u escape, want four hex digits")
		}
		r = r<<4 | rune(d)
	}
	return r, nil
}

// describe names a byte for an error message.
func describe(c byte) string {
	if c >= 0x20 && c < utf8.RuneSelf {
		return "character '" + string(rune(c)) + "'"
	}
	const hex = "0123456789abcdef"
	return "byte 0x" + string([]byte{hex[c>>4], hex[c&0xf]})
}
