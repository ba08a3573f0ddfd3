package natsstore

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
// The JSON is encoding/json's, with the tags below and HTML escaping off.
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
	buf := bytes.NewBuffer((*p)[:0])
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("natsstore: encoding a value: " + err.Error()) // a value's fields always encode
	}
	*p = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return p
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
	var v value
	if err := json.Unmarshal(b, &v); err != nil {
		return value{}, fmt.Errorf("%w: %v", ErrCorrupt, err)
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

// MarshalJSON writes t as a JSON string if it is valid UTF-8 (without HTML
// escaping, as the value around it), and otherwise as {"b64": base64}.
func (t text) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(t)) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(string(t)); err != nil {
			return nil, err
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
	}
	return json.Marshal(struct {
		B64 []byte `json:"b64"`
	}{[]byte(t)})
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
		Digest:      digest,
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
