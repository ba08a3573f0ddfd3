package natsstore

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/tesserix/toolexec/kvstore"
)

// token is what a Lease's Token carries: the revision the claim was last
// written at, and of the claim what a holder's next write keeps (its id, the
// holder, the lease, the creation time and the call's check digest, tool, run
// and call ids), so that the write needs no read first (and reads may be behind
// across a leader change). Not carried: the state (always claimed), the format
// version and the write id, which every write draws anew.
type token struct {
	Rev   uint64
	Value value
}

// tokenPrefix starts every token; the "2" tells this layout from the first,
// which carried the value's JSON. Tokens live in the process that claimed, so
// no token of the first layout is ever presented to this code.
const tokenPrefix = "n2."

// String encodes t as tokenPrefix and, in unpadded URL-safe base64, the
// revision, lease and creation time as varints followed by the holder, claim id,
// check digest, tool, run id and call id, each preceded by its length.
func (t token) String() string {
	v := &t.Value
	var stack [192]byte
	b := binary.AppendUvarint(stack[:0], t.Rev)
	b = binary.AppendVarint(b, v.Lease)
	b = binary.AppendVarint(b, v.Created)
	for _, s := range [...]string{string(v.Holder), v.Claim, string(v.Check), string(v.Tool), string(v.RunID), string(v.CallID)} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	out := make([]byte, 0, len(tokenPrefix)+base64.RawURLEncoding.EncodedLen(len(b)))
	out = append(out, tokenPrefix...)
	return string(base64.RawURLEncoding.AppendEncode(out, b))
}

// parseToken decodes a token made by String. Anything else is refused with
// kvstore.ErrNotHolder.
func parseToken(s string) (token, error) {
	enc, ok := strings.CutPrefix(s, tokenPrefix)
	if !ok {
		return token{}, fmt.Errorf("token is not one of this store's: %w", kvstore.ErrNotHolder)
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return token{}, fmt.Errorf("malformed token: %w", kvstore.ErrNotHolder)
	}
	r := tokenReader{b: b, s: string(b)}
	tok := token{Rev: r.uvarint()}
	v := &tok.Value
	v.Version, v.State = formatVersion, string(kvstore.StateClaimed)
	v.Lease, v.Created = r.varint(), r.varint()
	v.Holder, v.Claim = text(r.str()), r.str()
	v.Check, v.Tool, v.RunID, v.CallID = text(r.str()), text(r.str()), text(r.str()), text(r.str())
	if r.bad || r.i != len(b) || tok.Rev == 0 || v.Lease <= 0 || v.Claim == "" {
		return token{}, fmt.Errorf("malformed token: %w", kvstore.ErrNotHolder)
	}
	return tok, nil
}

// tokenReader reads the fields of a decoded token from b, at i; s is b as a
// string, which the strings read are substrings of. bad is set by a read past
// the end or a malformed varint.
type tokenReader struct {
	b   []byte
	s   string
	i   int
	bad bool
}

func (r *tokenReader) uvarint() uint64 {
	n, size := binary.Uvarint(r.b[r.i:])
	if size <= 0 {
		r.bad = true
		return 0
	}
	r.i += size
	return n
}

func (r *tokenReader) varint() int64 {
	n, size := binary.Varint(r.b[r.i:])
	if size <= 0 {
		r.bad = true
		return 0
	}
	r.i += size
	return n
}

func (r *tokenReader) str() string {
	n := r.uvarint()
	if r.bad || n > math.MaxInt32 || int(n) > len(r.b)-r.i {
		r.bad = true
		return ""
	}
	s := r.s[r.i : r.i+int(n)]
	r.i += int(n)
	return s
}
