package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// snapshot is a record as one script read it, with the server's time at that read.
type snapshot struct {
	found  bool
	now    int64 // Redis TIME, milliseconds since the Unix epoch
	fields map[string]string
}

// parseReply splits a script reply {status, now, field, value, ...}.
func parseReply(v any) (status string, snap snapshot, err error) {
	arr, ok := v.([]any)
	if !ok || len(arr) == 0 {
		return "", snap, fmt.Errorf("unexpected script reply %T", v)
	}
	status, ok = arr[0].(string)
	if !ok {
		return "", snap, fmt.Errorf("unexpected script status %T", arr[0])
	}
	if len(arr) >= 2 {
		n, ok := arr[1].(int64)
		if !ok {
			return "", snap, fmt.Errorf("unexpected script time %T", arr[1])
		}
		snap.now = n
	}
	rest := arr[min(2, len(arr)):]
	if len(rest)%2 != 0 {
		return "", snap, fmt.Errorf("odd number of record fields (%d)", len(rest))
	}
	if len(rest) > 0 {
		snap.found = true
		snap.fields = make(map[string]string, len(rest)/2)
		for i := 0; i < len(rest); i += 2 {
			k, ok1 := rest[i].(string)
			val, ok2 := rest[i+1].(string)
			if !ok1 || !ok2 {
				return "", snap, fmt.Errorf("non-string record field %T=%T", rest[i], rest[i+1])
			}
			snap.fields[k] = val
		}
	}
	return status, snap, nil
}

// record converts a snapshot into a kvstore.Record, judging the lease by the
// server time the snapshot was read at.
func (s snapshot) record() (kvstore.Record, error) {
	f := s.fields
	var perr error
	num := func(name string) int64 {
		v, ok := f[name]
		if !ok || v == "" {
			return 0
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			x, ferr := strconv.ParseFloat(v, 64)
			if ferr != nil {
				perr = fmt.Errorf("field %s=%q: %w", name, v, err)
				return 0
			}
			n = int64(x)
		}
		return n
	}
	ms := func(name string) time.Time {
		n := num(name)
		if n == 0 {
			return time.Time{}
		}
		return time.UnixMilli(n).UTC()
	}
	r := kvstore.Record{
		Tenant:      f["tenant"],
		Digest:      f["digest"],
		State:       kvstore.State(f["state"]),
		Outcome:     f["outcome"],
		Reason:      f["reason"],
		BodyEntered: f["body_entered"] == "1",
		CheckDigest: f["check_digest"],
		Tool:        f["tool"],
		RunID:       f["run_id"],
		CallID:      f["call_id"],
		Holder:      f["holder"],
		Lease:       time.Duration(num("lease_ms")) * time.Millisecond,
		LeaseUntil:  ms("lease_until"),
		Revision:    uint64(num("rev")),
		CreatedAt:   ms("created"),
		UpdatedAt:   ms("updated"),
		ExpiresAt:   ms("expires"),
	}
	if perr != nil {
		return kvstore.Record{}, perr
	}
	switch r.State {
	case kvstore.StateClaimed, kvstore.StateCompleted, kvstore.StateIndeterminate:
	default:
		return kvstore.Record{}, fmt.Errorf("unknown state %q", r.State)
	}
	r.LeaseExpired = r.State == kvstore.StateClaimed && s.now >= num("lease_until")
	return r, nil
}

// leaseLeft is how long, by the server's clock at the snapshot, until the claim's
// lease runs out (zero or negative once it has).
func (s snapshot) leaseLeft() time.Duration {
	n, _ := strconv.ParseInt(s.fields["lease_until"], 10, 64)
	return time.Duration(n-s.now) * time.Millisecond
}
