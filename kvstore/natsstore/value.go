package natsstore

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
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

// newClaim returns the value of a fresh claim for req.
func newClaim(req kvstore.ClaimRequest, created time.Time) value {
	return value{
		Version: formatVersion,
		State:   string(kvstore.StateClaimed),
		Holder:  text(req.Holder),
		Claim:   newID(),
		Write:   newID(),
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

func (v value) encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

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

// text is a string that survives JSON whatever its bytes: valid UTF-8 is
// written as a JSON string, anything else as {"b64": base64}. encoding/json alone
// would replace invalid bytes with U+FFFD.
type text string

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

// token is what a Lease's Token carries: the revision the claim was last
// written at, and the claim's value as then written, so that a holder's next
// write needs no read (reads may be served stale by followers).
type token struct {
	Rev   uint64
	Value value
}

const tokenPrefix = "n1."

func (t token) String() string {
	b, err := t.Value.encode()
	if err != nil {
		// value holds only strings, numbers and bools: it always encodes.
		panic(fmt.Sprintf("natsstore: encoding a lease token: %v", err))
	}
	return tokenPrefix + strconv.FormatUint(t.Rev, 10) + "." + base64.RawURLEncoding.EncodeToString(b)
}

func parseToken(s string) (token, error) {
	rest, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return token{}, fmt.Errorf("token is not one of this store's: %w", kvstore.ErrNotHolder)
	}
	revStr, enc, ok := strings.Cut(rest, ".")
	if !ok {
		return token{}, fmt.Errorf("malformed token: %w", kvstore.ErrNotHolder)
	}
	rev, err := strconv.ParseUint(revStr, 10, 64)
	if err != nil || rev == 0 {
		return token{}, fmt.Errorf("malformed token revision: %w", kvstore.ErrNotHolder)
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return token{}, fmt.Errorf("malformed token: %w", kvstore.ErrNotHolder)
	}
	v, err := decodeValue(b)
	if err != nil || kvstore.State(v.State) != kvstore.StateClaimed {
		return token{}, fmt.Errorf("malformed token value: %w", kvstore.ErrNotHolder)
	}
	return token{Rev: rev, Value: v}, nil
}

// newID returns 16 random bytes in hex.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
