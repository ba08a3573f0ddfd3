package redisstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// TestIndexCoversRecords: the tenant index entry of a record, and the index's
// and revision counter's TTLs, reach past the record's expiry. A write that
// stays within that reach (the record that completes a claim) leaves the index
// alone; one that would outlive it moves the entry and both TTLs.
func TestIndexCoversRecords(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, redisstore.Config{Retention: time.Hour})
	p := s.Config().Prefix
	idx, ctr := p+":{acme}:idx", p+":{acme}:rev"
	score := func(name string) int64 {
		t.Helper()
		v, err := c.ZScore(ctx(t), idx, digest(name)).Result()
		if err != nil {
			t.Fatalf("ZSCORE %s: %v", name, err)
		}
		return int64(v)
	}

	res := mustClaim(t, s, claimReq("acme", "quick", "w1", time.Minute))
	before := score("quick")
	if err := s.Record(ctx(t), res.Lease, "done"); err != nil {
		t.Fatal(err)
	}
	if got := score("quick"); got != before {
		t.Fatalf("Record within the slack moved the index entry: %d → %d", before, got)
	}

	// A record whose stored reach ends before its next write's expiry (as if
	// it had been renewed for longer than the slack) is indexed again.
	res = mustClaim(t, s, claimReq("acme", "long", "w1", time.Minute))
	key := p + ":{acme}:" + digest("long")
	r := readStored(t, c, key)
	r.numbers[numIndexedUntil] = r.numbers[numCreated]
	writeStored(t, c, key, r)
	for _, k := range []string{idx, ctr} {
		if err := c.PExpire(ctx(t), k, time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.ZAdd(ctx(t), idx, redis.Z{Score: 1, Member: digest("long")}).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(ctx(t), res.Lease, time.Minute); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx(t), "acme", digest("long"))
	if err != nil {
		t.Fatal(err)
	}
	want := got.UpdatedAt.Add(2 * time.Hour).UnixMilli()
	if sc := score("long"); sc != want {
		t.Fatalf("index score after a write past the reach: %d, want the write's time plus 2h (%d)", sc, want)
	}
	if iu := readStored(t, c, key).numbers[numIndexedUntil]; iu != strconv.FormatInt(want, 10) {
		t.Fatalf("stored indexed-until %s, want %d", iu, want)
	}
	for _, k := range []string{idx, ctr} {
		if ttl := c.PTTL(ctx(t), k).Val(); ttl <= 2*time.Hour {
			t.Fatalf("%s PTTL %v after a write past the reach, want over the reach (2h)", k, ttl)
		}
	}
}

// TestRevisionsReservedForTheNextWrite: a claim takes two revisions from the
// tenant's counter, the second for the record's next write; writes after that
// take new ones. Revisions of one key keep growing across release and claim.
func TestRevisionsReservedForTheNextWrite(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, redisstore.Config{})
	ctr := s.Config().Prefix + ":{acme}:rev"
	counter := func() uint64 {
		t.Helper()
		n, err := c.Get(ctx(t), ctr).Uint64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	rev := func(name string) uint64 {
		t.Helper()
		r, err := s.Get(ctx(t), "acme", digest(name))
		if err != nil {
			t.Fatal(err)
		}
		return r.Revision
	}

	res := mustClaim(t, s, claimReq("acme", "k", "w1", time.Minute))
	if top := counter(); top != res.Record.Revision+1 {
		t.Fatalf("counter %d after a claim at revision %d, want one reserved above", top, res.Record.Revision)
	}
	if _, err := s.Renew(ctx(t), res.Lease, time.Minute); err != nil {
		t.Fatal(err)
	}
	if r := rev("k"); r != res.Record.Revision+1 || counter() != r {
		t.Fatalf("the first write after the claim: revision %d, counter %d; want the reserved %d", r, counter(), res.Record.Revision+1)
	}
	if _, err := s.Renew(ctx(t), res.Lease, time.Minute); err != nil {
		t.Fatal(err)
	}
	second := rev("k")
	if second <= res.Record.Revision+1 || counter() != second+1 {
		t.Fatalf("the second write: revision %d, counter %d; want a new pair from the counter", second, counter())
	}
	if err := s.Release(ctx(t), res.Lease); err != nil {
		t.Fatal(err)
	}
	again := mustClaim(t, s, claimReq("acme", "k", "w1", time.Minute))
	if again.Record.Revision <= second+1 {
		t.Fatalf("claim after release: revision %d, not above everything reserved before (%d)", again.Record.Revision, second+1)
	}

	// A counter that is gone restarts at Redis's time in ms times 1000.
	if err := c.Del(ctx(t), ctr).Err(); err != nil {
		t.Fatal(err)
	}
	before := redisNow(t, c).UnixMilli() * 1000
	fresh := mustClaim(t, s, claimReq("acme", "after-loss", "w1", time.Minute))
	if fresh.Record.Revision < uint64(before) {
		t.Fatalf("claim after the counter's loss: revision %d, below Redis time ×1000 (%d)", fresh.Record.Revision, before)
	}
	if ttl := c.PTTL(ctx(t), ctr).Val(); ttl <= 0 {
		t.Fatalf("restarted counter has PTTL %v, want a TTL", ttl)
	}
}

// TestWaiterFlag: a write publishes only when a Wait flagged the record since
// the last write; the flag is part of the stored value, and a write clears it.
func TestWaiterFlag(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, redisstore.Config{WaitRecheck: noisyRecheck})
	key := s.Config().Prefix + ":{acme}:" + digest("flag")
	res := mustClaim(t, s, claimReq("acme", "flag", "w1", time.Minute))
	if f := readStored(t, c, key).flags; f != "2-c0" {
		t.Fatalf("flags after a claim: %q", f)
	}
	ch := waitInBackground(ctx(t), s, res.Record)
	wait.Eventually(t, waitLimit, "the waiter to flag the record", func() bool {
		return readStored(t, c, key).flags == "2wc0"
	})
	ttl := c.PTTL(ctx(t), key).Val()
	if ttl <= 0 {
		t.Fatalf("flagging lost the record's TTL: PTTL %v", ttl)
	}
	if _, err := s.Renew(ctx(t), res.Lease, time.Minute); err != nil {
		t.Fatal(err)
	}
	got := receive(t, ch)
	if got.err != nil || got.rec.Revision <= res.Record.Revision {
		t.Fatalf("Wait: %+v, %v", got.rec, got.err)
	}
	if f := readStored(t, c, key).flags; f != "2-c0" {
		t.Fatalf("flags after the write that woke the waiter: %q, want the flag cleared", f)
	}
}

// TestWaitNeverMissesARacingWrite races writes against Waits that are still
// subscribing: whichever comes first, every Wait returns with the change, long
// before its safety-net re-read (an hour) could have saved it.
func TestWaitNeverMissesARacingWrite(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Config{WaitRecheck: noisyRecheck})
	for i := range 50 {
		name := fmt.Sprintf("race-%d", i)
		res := mustClaim(t, s, claimReq("acme", name, "w1", time.Minute))
		first := waitInBackground(ctx(t), s, res.Record)
		l, err := s.Renew(ctx(t), res.Lease, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		got := receive(t, first)
		if got.err != nil || got.rec.Revision == res.Record.Revision {
			t.Fatalf("%s: Wait raced by Renew: %+v, %v", name, got.rec, got.err)
		}
		second := waitInBackground(ctx(t), s, got.rec)
		if err := s.Record(ctx(t), l, "done"); err != nil {
			t.Fatal(err)
		}
		if got := receive(t, second); got.err != nil || got.rec.State != kvstore.StateCompleted {
			t.Fatalf("%s: Wait raced by Record: %+v, %v", name, got.rec, got.err)
		}
	}
}

// previousRecord is a record as the previous version of this store kept it: a
// hash with these fields, in the tenant index scored by its expiry, with the
// tenant's revision counter at or above its revision.
type previousRecord struct {
	name, state, holder, token string
	leaseUntil                 time.Time
	rev                        uint64
	extra                      []string // outcome, or reason and body_entered
}

// writePrevious stores r as the previous version's claim, record and mark
// scripts did.
func writePrevious(t *testing.T, c redis.UniversalClient, prefix string, r previousRecord, now time.Time) {
	t.Helper()
	key := prefix + ":{acme}:" + digest(r.name)
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	expires := now.Add(24 * time.Hour)
	fields := append([]string{
		"tenant", "acme", "digest", digest(r.name), "state", r.state,
		"holder", r.holder, "token", r.token, "lease_ms", "30000", "lease_until", ms(r.leaseUntil),
		"rev", strconv.FormatUint(r.rev, 10), "created", ms(now.Add(-time.Minute)),
		"check_digest", "chk-" + r.name, "tool", "book", "run_id", "run-1", "call_id", "call-" + r.holder,
		"updated", ms(now), "expires", ms(expires),
	}, r.extra...)
	args := make([]any, len(fields))
	for i, f := range fields {
		args[i] = f
	}
	if err := c.HSet(ctx(t), key, args...).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.PExpire(ctx(t), key, 24*time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ZAdd(ctx(t), prefix+":{acme}:idx", redis.Z{Score: float64(expires.UnixMilli()), Member: digest(r.name)}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.Set(ctx(t), prefix+":{acme}:rev", strconv.FormatUint(r.rev, 10), 24*time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestPreviousLayout: a deployment upgraded in place keeps the records the
// previous version wrote (hashes). The store reads them, answers claims from
// them, lets their holders finish, takes them over, resolves, lists, dumps and
// forgets them, and wakes waiters on them; a write stores the new layout.
func TestPreviousLayout(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, redisstore.Config{WaitRecheck: noisyRecheck})
	p := s.Config().Prefix
	now := redisNow(t, c)
	rev := uint64(now.UnixMilli()) * 1000
	for _, r := range []previousRecord{
		{name: "done", state: "completed", holder: "w0", token: "tok-done", leaseUntil: now, rev: rev + 1, extra: []string{"outcome", `{"seat":"12A"}`}},
		{name: "parked", state: "indeterminate", holder: "w0", token: "tok-parked", leaseUntil: now, rev: rev + 2, extra: []string{"reason", "body_failed", "body_entered", "1"}},
		{name: "held", state: "claimed", holder: "w1", token: "tok-held", leaseUntil: now.Add(time.Hour), rev: rev + 3},
		{name: "stale", state: "claimed", holder: "w1", token: "tok-stale", leaseUntil: now.Add(-time.Second), rev: rev + 4},
		{name: "dropped", state: "claimed", holder: "w1", token: "tok-dropped", leaseUntil: now.Add(time.Hour), rev: rev + 5},
	} {
		writePrevious(t, c, p, r, now)
	}
	typeOf := func(name string) string { return c.Type(ctx(t), p+":{acme}:"+digest(name)).Val() }

	// Reads and refused claims answer from the old record without rewriting it.
	got, err := s.Get(ctx(t), "acme", digest("done"))
	if err != nil {
		t.Fatal(err)
	}
	if got.State != kvstore.StateCompleted || got.Outcome != `{"seat":"12A"}` || got.Holder != "w0" || got.Revision != rev+1 ||
		got.Tool != "book" || got.CallID != "call-w0" || got.CheckDigest != "chk-done" || got.Lease != 30*time.Second ||
		!got.UpdatedAt.Equal(now.Truncate(time.Millisecond).UTC()) || !got.ExpiresAt.Equal(got.UpdatedAt.Add(24*time.Hour)) {
		t.Fatalf("Get of a completed record in the previous layout: %+v", got)
	}
	dup, err := s.Claim(ctx(t), claimReq("acme", "done", "w2", time.Minute))
	if err != nil || dup.Claimed || dup.Record.Outcome != `{"seat":"12A"}` {
		t.Fatalf("Claim of a completed record in the previous layout: %+v, %v", dup, err)
	}
	if typ := typeOf("done"); typ != "hash" {
		t.Fatalf("a read rewrote the record: type %q", typ)
	}
	stale, err := s.Get(ctx(t), "acme", digest("stale"))
	if err != nil || !stale.LeaseExpired {
		t.Fatalf("Get of a claim whose lease ran out: %+v, %v", stale, err)
	}

	// Listing and dumping see them.
	parked, err := s.List(ctx(t), "acme", kvstore.StateIndeterminate, 0)
	if err != nil || len(parked) != 1 || parked[0].Reason != "body_failed" || !parked[0].BodyEntered || parked[0].Key != digest("parked") {
		t.Fatalf("List(indeterminate): %+v, %v", parked, err)
	}
	claimed, err := s.List(ctx(t), "acme", kvstore.StateClaimed, 0)
	if err != nil || len(claimed) != 3 {
		t.Fatalf("List(claimed): %d records, %v; want 3", len(claimed), err)
	}
	raw, err := s.DumpRaw(ctx(t), "acme")
	if err != nil || len(raw) != 5 || !strings.Contains(string(bytes.Join(raw, nil)), "\nstate=completed\n") {
		t.Fatalf("DumpRaw: %d records, %v", len(raw), err)
	}

	// The holder of an old claim finishes it, and a waiter on it is woken.
	held, err := s.Get(ctx(t), "acme", digest("held"))
	if err != nil {
		t.Fatal(err)
	}
	ch := waitInBackground(ctx(t), s, held)
	subscribed(t, s, "acme", "held", 1)
	lease := kvstore.Lease{Tenant: "acme", Key: digest("held"), Holder: "w1", Token: "tok-held"}
	wantErr(t, "Record with another token", s.Record(ctx(t), kvstore.Lease{Tenant: "acme", Key: digest("held"), Holder: "w1", Token: "tok-other"}, "x"), kvstore.ErrNotHolder)
	if err := s.Record(ctx(t), lease, "late but done"); err != nil {
		t.Fatalf("Record by the holder of a claim in the previous layout: %v", err)
	}
	w := receive(t, ch)
	if w.err != nil || w.rec.State != kvstore.StateCompleted || w.rec.Outcome != "late but done" || w.rec.Revision <= rev+5 ||
		w.rec.CallID != "call-w1" || !w.rec.CreatedAt.Equal(held.CreatedAt) {
		t.Fatalf("Wait on a claim in the previous layout: %+v, %v", w.rec, w.err)
	}
	if typ := typeOf("held"); typ != "string" {
		t.Fatalf("a write left the previous layout: type %q", typ)
	}
	if err := s.Release(ctx(t), kvstore.Lease{Tenant: "acme", Key: digest("dropped"), Holder: "w1", Token: "tok-dropped"}); err != nil {
		t.Fatalf("Release of a claim in the previous layout: %v", err)
	}

	// An old claim whose lease ran out is taken over; an old indeterminate
	// record is resolved.
	if _, err := s.TakeOver(ctx(t), stale, claimReq("acme", "stale", "w2", time.Minute)); err != nil {
		t.Fatalf("TakeOver of a claim in the previous layout: %v", err)
	}
	done, err := s.Resolve(ctx(t), "acme", digest("parked"), kvstore.Resolution{Outcome: "by operator"})
	if err != nil || done.State != kvstore.StateCompleted || done.Outcome != "by operator" || done.Reason != "" {
		t.Fatalf("Resolve of a record in the previous layout: %+v, %v", done, err)
	}

	// Revisions continue above the previous version's counter.
	fresh := mustClaim(t, s, claimReq("acme", "fresh", "w3", time.Minute))
	if fresh.Record.Revision <= rev+5 {
		t.Fatalf("a new claim's revision %d does not continue above the old counter %d", fresh.Record.Revision, rev+5)
	}

	n, err := s.Forget(ctx(t), "acme")
	if err != nil || n != 5 { // done (still a hash), parked, held, stale, fresh
		t.Fatalf("Forget: %d, %v; want 5", n, err)
	}
	_, err = s.Get(ctx(t), "acme", digest("done"))
	if !errors.Is(err, kvstore.ErrNotFound) {
		t.Fatalf("Get after Forget: %v", err)
	}
}
