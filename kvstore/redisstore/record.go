package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// A record is stored as one string, so that a script reads it with one GET and
// writes it with one SET … PX:
//
//	2 W S B ' ' rev ' ' top ' ' lease_ms ' ' lease_until ' ' created ' ' updated
//	    ' ' expires ' ' indexed_until ' ' id_len '\n' identity tail
//
// "2" is the layout (the previous version kept a hash: see luaLoad in
// scripts.go). W is the waiter flag: 'w' once a Wait has read the record since
// its last write, '-' otherwise. S is the state: 'c' claimed, 'd' completed,
// 'i' indeterminate. B is '1' when the body was entered (indeterminate records),
// '0' otherwise. The numbers are decimal: revision, the highest revision
// reserved for the record's next writes, the lease in ms, and times in ms since
// the Unix epoch by Redis's clock (the lease deadline, the claim, the last write,
// the expiry, and how long the tenant index covers the record). The identity,
// id_len bytes, is the claim's holder, token, check digest, tool, run id and call
// id, each written as <decimal length>:<bytes> (see encodeIdentity). The tail,
// the rest of the value, is the outcome of a completed record or the reason of
// an indeterminate one, as given.

// The record states as stored.
const (
	stClaimed       = 'c'
	stCompleted     = 'd'
	stIndeterminate = 'i'
)

// writeLP writes s to b as <decimal length>:<bytes>.
func writeLP(b *strings.Builder, s string) {
	var n [20]byte
	b.Write(strconv.AppendInt(n[:0], int64(len(s)), 10))
	b.WriteByte(':')
	b.WriteString(s)
}

// lpLen is the length of s as writeLP writes it.
func lpLen(s string) int {
	n := 1 + len(s)
	for l := len(s); ; l /= 10 {
		n++
		if l < 10 {
			return n
		}
	}
}

// encodeIdentity is the identity stored with a claim: the lease's holder and
// token first, so that encodeLeaseID(holder, token) is its prefix, then the
// request's check digest, tool, run id and call id.
func encodeIdentity(req kvstore.ClaimRequest, token string) string {
	fields := [...]string{req.Holder, token, req.CheckDigest, req.Tool, req.RunID, req.CallID}
	var b strings.Builder
	n := 0
	for _, f := range fields {
		n += lpLen(f)
	}
	b.Grow(n)
	for _, f := range fields {
		writeLP(&b, f)
	}
	return b.String()
}

// encodeLeaseID is how a lease's holder and token start the identity of the
// claim they hold: the scripts compare it with the stored identity's prefix.
func encodeLeaseID(holder, token string) string {
	var b strings.Builder
	b.Grow(lpLen(holder) + lpLen(token))
	writeLP(&b, holder)
	writeLP(&b, token)
	return b.String()
}

// encodeHolder is how holder starts a stored identity.
func encodeHolder(holder string) string {
	var b strings.Builder
	b.Grow(lpLen(holder))
	writeLP(&b, holder)
	return b.String()
}

// errMalformed is wrapped by the errors of decode.
var errMalformed = errors.New("malformed record value")

// decode parses a stored value into the record of tenant/digest, judging the
// lease at now (Redis's clock, ms), and returns the claim's token too.
func decode(tenant, digest, v string, now int64) (kvstore.Record, string, error) {
	bad := func(what string) (kvstore.Record, string, error) {
		return kvstore.Record{}, "", fmt.Errorf("%w: %s: %.40q", errMalformed, what, v)
	}
	if len(v) < 5 || v[0] != '2' || v[4] != ' ' {
		return bad("header")
	}
	r := kvstore.Record{Tenant: tenant, Key: digest, BodyEntered: v[3] == '1'}
	switch v[2] {
	case stClaimed:
		r.State = kvstore.StateClaimed
	case stCompleted:
		r.State = kvstore.StateCompleted
	case stIndeterminate:
		r.State = kvstore.StateIndeterminate
	default:
		return bad("state")
	}
	// rev, top, lease_ms, lease_until, created, updated, expires, indexed_until, id_len
	var n [9]int64
	rest := v[5:]
	for i := range n {
		sep := byte(' ')
		if i == len(n)-1 {
			sep = '\n'
		}
		end := strings.IndexByte(rest, sep)
		if end < 0 {
			return bad("numbers")
		}
		x, err := strconv.ParseInt(rest[:end], 10, 64)
		if err != nil {
			return bad("numbers")
		}
		n[i], rest = x, rest[end+1:]
	}
	if n[8] < 0 || n[8] > int64(len(rest)) {
		return bad("identity length")
	}
	id, tail := rest[:n[8]], rest[n[8]:]
	var fields [6]string
	for i := range fields {
		colon := strings.IndexByte(id, ':')
		if colon < 0 {
			return bad("identity")
		}
		l, err := strconv.Atoi(id[:colon])
		if err != nil || l < 0 || l > len(id)-colon-1 {
			return bad("identity")
		}
		fields[i], id = id[colon+1:colon+1+l], id[colon+1+l:]
	}
	if id != "" {
		return bad("identity")
	}
	r.Holder, r.CheckDigest, r.Tool, r.RunID, r.CallID = fields[0], fields[2], fields[3], fields[4], fields[5]
	switch r.State {
	case kvstore.StateCompleted:
		r.Outcome = tail
	case kvstore.StateIndeterminate:
		r.Reason = tail
	}
	r.Revision = uint64(n[0])
	r.Lease = time.Duration(n[2]) * time.Millisecond
	r.LeaseUntil = msTime(n[3])
	r.CreatedAt, r.UpdatedAt, r.ExpiresAt = msTime(n[4]), msTime(n[5]), msTime(n[6])
	r.LeaseExpired = r.State == kvstore.StateClaimed && now >= n[3]
	return r, fields[1], nil
}

// msTime is the UTC time of ms milliseconds since the Unix epoch, or the zero
// time for 0.
func msTime(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// splitReply splits a script's answer "<status>[ <now>[ <rest>]]".
func splitReply(v any) (status string, now int64, rest string, err error) {
	s, ok := v.(string)
	if !ok {
		return "", 0, "", fmt.Errorf("unexpected script reply %T", v)
	}
	status, s, ok = strings.Cut(s, " ")
	if !ok {
		return status, 0, "", nil
	}
	ns, rest, _ := strings.Cut(s, " ")
	now, err = strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return "", 0, "", fmt.Errorf("unexpected script time %q", ns)
	}
	return status, now, rest, nil
}
