package wire

import (
	"bytes"
	"errors"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// member is one top-level member of a JSON object: its name, decoded, and the
// bytes of its value as they stand in the payload, without the whitespace
// around them.
type member struct {
	name  string
	value []byte
}

// members are the top-level members of an object in the order they appear,
// the first of each name only. An event has a dozen: a slice scanned in order
// costs less to build and to read than a map.
type members []member

// get returns the value of the member called name.
func (ms members) get(name string) ([]byte, bool) {
	for i := range ms {
		if ms[i].name == name {
			return ms[i].value, true
		}
	}
	return nil, false
}

// has reports whether ms holds a member called name. Past smallObject members
// it keeps the set *seen of their names (built on first need) and looks
// there; the caller adds each new name to it.
func (ms members) has(name string, seen *map[string]struct{}) bool {
	if *seen == nil {
		if len(ms) < smallObject {
			_, ok := ms.get(name)
			return ok
		}
		*seen = make(map[string]struct{}, 2*len(ms))
		for _, m := range ms {
			(*seen)[m.name] = struct{}{}
		}
	}
	_, ok := (*seen)[name]
	return ok
}

// smallObject is the number of members up to which a repeated name is looked
// for by scanning those already read; past it a set is kept, so that an object
// of many members costs linear time, not quadratic.
const smallObject = 16

// knownNames are the member names the wire reads: the CloudEvents attributes,
// the data, the extensions, and the arguments of a call's data. readMembers
// returns these strings instead of allocating a copy of each name it meets.
var knownNames = func() map[string]string {
	m := make(map[string]string)
	for _, n := range []string{"specversion", "id", "source", "type", "subject", "time",
		"datacontenttype", "dataschema", "data", "data_base64", "traceparent", "tracestate",
		ExtTenant, ExtRunID, ExtCallID, ExtIdempotencyKey, "arguments"} {
		m[n] = n
	}
	return m
}()

// errNotObject is readMembers' error for a payload that is not a JSON object.
var errNotObject = errors.New("not a JSON object")

// memberReader is a token reader of jsontext over a payload's own bytes (a
// bytes.Buffer is read in place, not copied), kept in a pool between payloads.
type memberReader struct {
	dec *jsontext.Decoder
	buf *bytes.Buffer
}

// memberOptions accept what encoding/json accepts: a repeated name is for
// readMembers to report, and bytes that are not UTF-8 are judged by the caller
// (Peek reads whatever a sender wrote).
var memberOptions = []jsontext.Options{jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true)}

var memberReaders = sync.Pool{New: func() any {
	buf := new(bytes.Buffer)
	return &memberReader{dec: jsontext.NewDecoder(buf, memberOptions...), buf: buf}
}}

// readMembers appends to dst (empty, a buffer to reuse) the top-level members
// of data, a JSON object, and returns the first name that appears more than
// once (the object keeps its first value). The values share data's bytes and
// cannot be grown into the bytes after them. Nothing past the object's closing
// brace is read.
//
// On an error the members read before it are returned with it: Peek takes an
// id from a payload whose later members are not JSON. The error is errNotObject
// when data does not open an object.
func readMembers(dst members, data []byte) (ms members, dup string, err error) {
	r := memberReaders.Get().(*memberReader)
	*r.buf = *bytes.NewBuffer(data)
	r.dec.Reset(r.buf, memberOptions...)
	defer func() {
		*r.buf = bytes.Buffer{} // keep no payload alive through the pool
		r.dec.Reset(r.buf, memberOptions...)
		memberReaders.Put(r)
	}()

	ms = dst[:0]
	if r.dec.PeekKind() != '{' {
		return ms, "", errNotObject
	}
	if _, err := r.dec.ReadToken(); err != nil {
		return ms, "", err
	}
	var seen map[string]struct{} // once there are more than smallObject members
	for r.dec.PeekKind() == '"' {
		raw, err := r.dec.ReadValue()
		if err != nil {
			return ms, dup, err
		}
		name := memberName(raw)
		val, err := r.dec.ReadValue()
		if err != nil {
			return ms, dup, err
		}
		end := int(r.dec.InputOffset())
		v := data[end-len(val) : end : end]
		switch {
		case !ms.has(name, &seen):
			ms = append(ms, member{name: name, value: v})
			if seen != nil {
				seen[name] = struct{}{}
			}
		case dup == "":
			dup = name
		}
	}
	if _, err := r.dec.ReadToken(); err != nil { // the closing brace, or the mistake in its place
		return ms, dup, err
	}
	return ms, dup, nil
}

// memberName decodes raw, a name as jsontext read it (quoted, valid): a name
// the wire knows is returned as its own string, and bytes that are not UTF-8
// become U+FFFD as encoding/json makes them.
func memberName(raw []byte) string {
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		if s, ok := knownNames[string(inner)]; ok { // a lookup by string(b) does not allocate
			return s
		}
		return string(inner)
	}
	b, _ := jsontext.AppendUnquote(nil, raw) // an error only reports bytes it made U+FFFD
	return string(b)
}
