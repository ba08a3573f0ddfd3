package natsstore

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tesserix/toolexec/kvstore"
)

// formatVersion is written into every value so that a later layout can be told
// apart from this one.
const formatVersion = 1

// value is a record as stored in the bucket: compact JSON with short names. It
// holds no timestamps of the server's (those come from the entry) and never a
// call's arguments.
//
// The JSON is encoding/json's, with the tags below and HTML escaping off:
// encode writes those bytes by hand (see appendValue).
type value struct {
	Version int    `json:"v"`
	State   string `json:"s"`           // kvstore.State
	Holder  text   `json:"h"`           // the claim's holder
	Claim   string `json:"c"`           // random id of the claim, kept across renewals
	Write   string `json:"w"`           // random id of this write, to recognise it after an ambiguous ack
	Lease   int64  `json:"l"`           // lease duration in nanoseconds
	Created int64  `json:"ca"`          // when the key was first claimed, Unix ns by the claimer's clock
	Outcome text   `json:"o,omitempty"` // completed
	Reason  text   `json:"r,omitempty"` // indeterminate
	Entered bool   `json:"b,omitempty"` // indeterminate: body entered
	Check   text   `json:"k,omitempty"`
	Tool    text   `json:"t,omitempty"`
	RunID   text   `json:"run,omitempty"`
	CallID  text   `json:"call,omitempty"`
}

// text is a string that survives JSON whatever its bytes: valid UTF-8 is
// written as a JSON string, anything else as {"b64": base64}. encoding/json alone
// would replace invalid bytes with U+FFFD.
type text string

// newClaim returns the value of a fresh claim for req.
func newClaim(req kvstore.ClaimRequest, created time.Time) value {
	claim, write := newIDPair()
	return value{
		Version: formatVersion,
		State:   string(kvstore.StateClaimed),
		Holder:  text(req.Holder),
		Claim:   claim,
		Write:   write,
		Lease:   int64(req.Lease),
		Created: created.UnixNano(),
		Check:   text(req.CheckDigest),
		Tool:    text(req.Tool),
		RunID:   text(req.RunID),
		CallID:  text(req.CallID),
	}
}

// next returns a copy of v for another write: a new write id, and the
// state-specific fields cleared.
func (v value) next(state kvstore.State) value {
	v.State = string(state)
	v.Write = newID()
	v.Outcome, v.Reason, v.Entered = "", "", false
	return v
}

// maxPooled is the capacity above which a buffer is not put back into bufPool:
// one large outcome should not keep its buffer alive for every later write.
const maxPooled = 64 << 10

// bufPool holds the buffers values are encoded into.
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, 0, 1024)
	return &b
}}

// encode writes v's JSON into a buffer taken from bufPool. The caller gives it
// back with putBuf once nothing refers to it any more: a publish copies the
// bytes it sends before it returns.
func (v *value) encode() *[]byte {
	p := bufPool.Get().(*[]byte)
	*p = appendValue((*p)[:0], v)
	return p
}

// appendValue appends v's JSON to b: the bytes encoding/json writes for v
// with HTML escaping off (fields in declaration order, the omitempty ones
// left out when empty, a text of invalid UTF-8 as {"b64":...}), which every
// release has stored. Written by hand because it is on every claim's and
// record's path (docs/BENCHMARKS.md measures it against encoding/json with
// BenchmarkValueJSON/encode). TestAppendValueMatchesEncodingJSON holds the two
// to the same bytes.
func appendValue(b []byte, v *value) []byte {
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
	for _, f := range [...]struct {
		name string
		t    text
	}{{`,"o":`, v.Outcome}, {`,"r":`, v.Reason}} {
		if f.t != "" {
			b = appendText(append(b, f.name...), f.t)
		}
	}
	if v.Entered {
		b = append(b, `,"b":true`...)
	}
	for _, f := range [...]struct {
		name string
		t    text
	}{{`,"k":`, v.Check}, {`,"t":`, v.Tool}, {`,"run":`, v.RunID}, {`,"call":`, v.CallID}} {
		if f.t != "" {
			b = appendText(append(b, f.name...), f.t)
		}
	}
	return append(b, '}')
}

// appendString appends s as encoding/json writes a string with HTML escaping
// off: quotes, backslashes and control characters escaped (\b \f \n \r \t
// short, the others as \u00XX), U+2028 and U+2029 as \u2028 and \u2029, and
// each invalid UTF-8 byte replaced by U+FFFD.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0 // s[start:i] is still to be copied
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, `\b`...)
			case '\f':
				b = append(b, `\f`...)
			case '\n':
				b = append(b, `\n`...)
			case '\r':
				b = append(b, `\r`...)
			case '\t':
				b = append(b, `\t`...)
			default:
				b = append(b, `\u00`...)
				b = append(b, hex[c>>4], hex[c&0xf])
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
			b = append(b, `\u202`...)
			b = append(b, hex[r&0xf])
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

// appendText appends t: a JSON string if it is valid UTF-8, else
// {"b64": base64}, so that its bytes survive.
func appendText(b []byte, t text) []byte {
	if utf8.ValidString(string(t)) {
		return appendString(b, string(t))
	}
	b = append(b, `{"b64":"`...)
	b = base64.StdEncoding.AppendEncode(b, []byte(t))
	return append(b, `"}`...)
}

// putBuf returns a buffer from encode to bufPool.
func putBuf(p *[]byte) {
	if cap(*p) <= maxPooled {
		bufPool.Put(p)
	}
}

// decodeValue reads a stored value. It returns ErrCorrupt for anything that is
// not a record of this format.
func decodeValue(b []byte) (value, error) {
	v, ok := parseValue(b)
	if !ok {
		if err := json.Unmarshal(b, &v); err != nil {
			return value{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
		}
	}
	if v.Version != formatVersion {
		return value{}, fmt.Errorf("%w: format version %d", ErrCorrupt, v.Version)
	}
	switch kvstore.State(v.State) {
	case kvstore.StateClaimed, kvstore.StateCompleted, kvstore.StateIndeterminate:
	default:
		return value{}, fmt.Errorf("%w: state %q", ErrCorrupt, v.State)
	}
	return v, nil
}

// UnmarshalJSON reads a text written as a JSON string or as {"b64": base64}.
func (t *text) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '{' {
		var raw struct {
			B64 []byte `json:"b64"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			return err
		}
		*t = text(raw.B64)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	*t = text(s)
	return nil
}

// record turns a stored value into the contract's record. updated is the
// server's time of the write (the entry's Created), or, for a record the store
// just wrote and did not read back, the writer's estimate of it.
func (v value) record(tenant, digest string, rev uint64, updated time.Time, retention time.Duration) kvstore.Record {
	r := kvstore.Record{
		Tenant:      tenant,
		Key:         digest,
		State:       kvstore.State(v.State),
		Outcome:     string(v.Outcome),
		Reason:      string(v.Reason),
		BodyEntered: v.Entered,
		CheckDigest: string(v.Check),
		Tool:        string(v.Tool),
		RunID:       string(v.RunID),
		CallID:      string(v.CallID),
		Holder:      string(v.Holder),
		Lease:       time.Duration(v.Lease),
		Revision:    rev,
		CreatedAt:   time.Unix(0, v.Created),
		UpdatedAt:   updated,
		ExpiresAt:   updated.Add(retention),
	}
	if r.State == kvstore.StateClaimed {
		r.LeaseUntil = updated.Add(r.Lease)
	}
	return r
}

// newID returns 16 random bytes in hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	var h [32]byte
	hex.Encode(h[:], b[:])
	return string(h[:])
}

// newIDPair returns two ids as newID does, from one read and one allocation.
func newIDPair() (string, string) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	var h [64]byte
	hex.Encode(h[:], b[:])
	s := string(h[:])
	return s[:32], s[32:]
}
