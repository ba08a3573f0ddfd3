package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

func TestNewConfig(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: testenv.FreeAddr(t)})
	t.Cleanup(func() { _ = c.Close() })

	s, err := redisstore.New(c, redisstore.Config{})
	if err != nil {
		t.Fatalf("New with zero config: %v", err)
	}
	got := s.Config()
	want := redisstore.Config{
		Prefix:       redisstore.DefaultPrefix,
		Retention:    redisstore.DefaultRetention,
		MaxValueSize: redisstore.DefaultMaxValueSize,
		WaitRecheck:  redisstore.DefaultWaitRecheck,
		ForgetBatch:  redisstore.DefaultForgetBatch,
		MaxBatch:     redisstore.DefaultMaxBatch,
		Pipelines:    redisstore.DefaultPipelines,
	}
	if got != want {
		t.Fatalf("defaults: got %+v, want %+v", got, want)
	}
	if got.Prefix != "toolexec" || got.Retention != 24*time.Hour {
		t.Fatalf("documented defaults changed: %+v", got)
	}

	tests := []struct {
		name string
		give redisstore.Config
	}{
		{"prefix with brace", redisstore.Config{Prefix: "a{b"}},
		{"prefix with space", redisstore.Config{Prefix: "a b"}},
		{"prefix with control", redisstore.Config{Prefix: "a\x00b"}},
		{"sub-millisecond retention", redisstore.Config{Retention: time.Microsecond}},
		{"negative retention", redisstore.Config{Retention: -time.Second}},
		{"negative max value", redisstore.Config{MaxValueSize: -1}},
		{"negative recheck", redisstore.Config{WaitRecheck: -time.Second}},
		{"negative batch", redisstore.Config{ForgetBatch: -1}},
		{"negative max batch", redisstore.Config{MaxBatch: -1}},
		{"negative pipelines", redisstore.Config{Pipelines: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := redisstore.New(c, tt.give)
			wantErr(t, "New", err, kvstore.ErrInvalid)
		})
	}
	_, err = redisstore.New(nil, redisstore.Config{})
	wantErr(t, "New(nil)", err, kvstore.ErrInvalid)
}

// TestInvalidRequests checks that malformed requests are refused with ErrInvalid
// before any I/O: the store's client points at a dead port, so touching the
// backend would answer ErrUnavailable instead.
func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: testenv.FreeAddr(t), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	s, err := redisstore.New(c, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	good := claimReq("acme", "k", "w1", time.Second)
	goodLease := kvstore.Lease{Tenant: "acme", Key: good.Key, Holder: "w1", Token: "t"}
	bg := context.Background()

	tests := []struct {
		name string
		call func() error
	}{
		{"claim empty tenant", func() error { r := good; r.Tenant = ""; _, err := s.Claim(bg, r); return err }},
		{"claim tenant with brace", func() error { r := good; r.Tenant = "a}b"; _, err := s.Claim(bg, r); return err }},
		{"claim tenant with dot", func() error { r := good; r.Tenant = "a.b"; _, err := s.Claim(bg, r); return err }},
		{"claim tenant too long", func() error { r := good; r.Tenant = strings.Repeat("a", 129); _, err := s.Claim(bg, r); return err }},
		{"claim short digest", func() error { r := good; r.Key = "abc"; _, err := s.Claim(bg, r); return err }},
		{"claim upper-case digest", func() error { r := good; r.Key = strings.ToUpper(r.Key); _, err := s.Claim(bg, r); return err }},
		{"claim empty holder", func() error { r := good; r.Holder = ""; _, err := s.Claim(bg, r); return err }},
		{"claim zero lease", func() error { r := good; r.Lease = 0; _, err := s.Claim(bg, r); return err }},
		{"claim negative lease", func() error { r := good; r.Lease = -time.Second; _, err := s.Claim(bg, r); return err }},
		{"get bad digest", func() error { _, err := s.Get(bg, "acme", "zz"); return err }},
		{"record zero lease", func() error { return s.Record(bg, kvstore.Lease{}, "x") }},
		{"record no token", func() error { l := goodLease; l.Token = ""; return s.Record(bg, l, "x") }},
		{"release no holder", func() error { l := goodLease; l.Holder = ""; return s.Release(bg, l) }},
		{"mark bad tenant", func() error { l := goodLease; l.Tenant = "a b"; return s.MarkIndeterminate(bg, l, "r", true) }},
		{"renew zero", func() error { _, err := s.Renew(bg, goodLease, 0); return err }},
		{"take over mismatched key", func() error {
			_, err := s.TakeOver(bg, kvstore.Record{Tenant: "acme", Key: digest("other")}, good)
			return err
		}},
		{"take over no lease", func() error {
			r := good
			r.Lease = 0
			_, err := s.TakeOver(bg, kvstore.Record{Tenant: "acme", Key: good.Key}, r)
			return err
		}},
		{"wait bad tenant", func() error { _, err := s.Wait(bg, kvstore.Record{Key: good.Key}); return err }},
		{"forget empty tenant", func() error { _, err := s.Forget(bg, ""); return err }},
		{"resolve bad digest", func() error { _, err := s.Resolve(bg, "acme", "", kvstore.Resolution{}); return err }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			wantErr(t, tt.name, err, kvstore.ErrInvalid)
			if errors.Is(err, kvstore.ErrUnavailable) {
				t.Fatalf("%s touched the backend: %v", tt.name, err)
			}
		})
	}
}

func TestClaimRecordLifecycle(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, redisstore.Config{})
	req := claimReq("acme", "lifecycle", "w1", 30*time.Second)

	before := redisNow(t, c)
	res := mustClaim(t, s, req)
	after := redisNow(t, c)

	r := res.Record
	if r.State != kvstore.StateClaimed || r.Holder != "w1" || r.Tenant != "acme" || r.Key != req.Key {
		t.Fatalf("claimed record: %+v", r)
	}
	if r.CheckDigest != req.CheckDigest || r.Tool != "book" || r.RunID != "run-1" || r.CallID != "call-w1" {
		t.Fatalf("claim fields not stored: %+v", r)
	}
	if r.Lease != 30*time.Second || r.LeaseExpired || r.Revision == 0 {
		t.Fatalf("lease fields: %+v", r)
	}
	// The deadline is Redis's TIME at the claim plus the lease (ms precision).
	lo, hi := before.Add(req.Lease).Add(-time.Millisecond), after.Add(req.Lease).Add(time.Millisecond)
	if r.LeaseUntil.Before(lo) || r.LeaseUntil.After(hi) {
		t.Fatalf("LeaseUntil %v not within Redis TIME + lease [%v, %v]", r.LeaseUntil, lo, hi)
	}
	if r.CreatedAt.IsZero() || r.UpdatedAt.IsZero() || !r.ExpiresAt.Equal(r.UpdatedAt.Add(24*time.Hour)) {
		t.Fatalf("timestamps: created %v updated %v expires %v", r.CreatedAt, r.UpdatedAt, r.ExpiresAt)
	}
	if res.Lease.Tenant != "acme" || res.Lease.Key != req.Key || res.Lease.Holder != "w1" || res.Lease.Token == "" {
		t.Fatalf("lease: %+v", res.Lease)
	}

	// A second claim does not get the key: it sees the holder's record.
	other, err := s.Claim(ctx(t), claimReq("acme", "lifecycle", "w2", time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if other.Claimed || other.Record.Holder != "w1" || other.Record.State != kvstore.StateClaimed || other.Record.Revision != r.Revision {
		t.Fatalf("second claim: %+v", other)
	}
	if other.Lease != (kvstore.Lease{}) {
		t.Fatalf("losing claim got a lease: %+v", other.Lease)
	}

	// A forged lease (right holder, wrong token) is not the holder.
	forged := res.Lease
	forged.Token = "not-the-token"
	wantErr(t, "Record with forged token", s.Record(ctx(t), forged, "x"), kvstore.ErrNotHolder)
	wrongHolder := res.Lease
	wrongHolder.Holder = "w2"
	wantErr(t, "Record with wrong holder", s.Record(ctx(t), wrongHolder, "x"), kvstore.ErrNotHolder)

	if err := s.Record(ctx(t), res.Lease, `{"seat":"12A"}`); err != nil {
		t.Fatalf("Record: %v", err)
	}
	got, err := s.Get(ctx(t), "acme", req.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != kvstore.StateCompleted || got.Outcome != `{"seat":"12A"}` || got.Holder != "w1" || got.Revision <= r.Revision || got.LeaseExpired {
		t.Fatalf("after Record: %+v", got)
	}
	if !got.CreatedAt.Equal(r.CreatedAt) {
		t.Fatalf("CreatedAt moved: %v → %v", r.CreatedAt, got.CreatedAt)
	}

	// The completed record answers later claims, and the lease is spent.
	again, err := s.Claim(ctx(t), claimReq("acme", "lifecycle", "w3", time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if again.Claimed || again.Record.State != kvstore.StateCompleted || again.Record.Outcome != `{"seat":"12A"}` {
		t.Fatalf("claim after completion: %+v", again)
	}
	wantErr(t, "Record twice", s.Record(ctx(t), res.Lease, "again"), kvstore.ErrNotHolder)
	wantErr(t, "Release after Record", s.Release(ctx(t), res.Lease), kvstore.ErrNotHolder)
	wantErr(t, "Mark after Record", s.MarkIndeterminate(ctx(t), res.Lease, "body_failed", true), kvstore.ErrNotHolder)
	_, err = s.Renew(ctx(t), res.Lease, time.Minute)
	wantErr(t, "Renew after Record", err, kvstore.ErrNotHolder)

	_, err = s.Get(ctx(t), "acme", digest("never"))
	wantErr(t, "Get missing", err, kvstore.ErrNotFound)
}

func TestKeyLayoutAndRetention(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, redisstore.Config{Retention: time.Hour})
	p := s.Config().Prefix
	req := claimReq("acme", "layout", "w1", time.Minute)
	res := mustClaim(t, s, req)

	recKey := p + ":{acme}:" + req.Key
	if typ := c.Type(ctx(t), recKey).Val(); typ != "string" {
		t.Fatalf("record key %s has type %q", recKey, typ)
	}
	ttl := c.PTTL(ctx(t), recKey).Val()
	if ttl <= 0 || ttl > time.Hour {
		t.Fatalf("record PTTL %v, want (0, 1h]", ttl)
	}
	stored := readStored(t, c, recKey)
	if stored.flags != "2-c0" || stored.numbers[numRev] != strconv.FormatUint(res.Record.Revision, 10) ||
		stored.numbers[numCreated] != strconv.FormatInt(res.Record.CreatedAt.UnixMilli(), 10) ||
		stored.numbers[numLeaseUntil] != strconv.FormatInt(res.Record.LeaseUntil.UnixMilli(), 10) ||
		!strings.HasPrefix(stored.rest, "2:w1"+strconv.Itoa(len(res.Lease.Token))+":"+res.Lease.Token) {
		t.Fatalf("stored value %+v does not hold the claim %+v", stored, res)
	}
	// The index covers the record for a retention plus the slack (here another
	// hour); the index's and the revision counter's TTLs reach a slack further.
	score, err := c.ZScore(ctx(t), p+":{acme}:idx", req.Key).Result()
	if err != nil || int64(score) != res.Record.CreatedAt.Add(2*time.Hour).UnixMilli() {
		t.Fatalf("tenant index score %v (%v), want the claim's time plus 2h", score, err)
	}
	for _, k := range []string{p + ":{acme}:idx", p + ":{acme}:rev"} {
		if ttl := c.PTTL(ctx(t), k).Val(); ttl <= 2*time.Hour || ttl > 3*time.Hour {
			t.Fatalf("%s PTTL %v, want (2h, 3h]", k, ttl)
		}
	}

	// Retention counts from the last write: shorten the TTL behind the store's back,
	// then a write must restore it.
	if err := c.PExpire(ctx(t), recKey, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(ctx(t), res.Lease, time.Minute); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx(t), recKey).Val(); ttl <= time.Minute {
		t.Fatalf("Renew did not reset retention: PTTL %v", ttl)
	}
	if err := c.PExpire(ctx(t), recKey, time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.Record(ctx(t), res.Lease, "done"); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(ctx(t), recKey).Val(); ttl <= time.Minute {
		t.Fatalf("Record did not reset retention: PTTL %v", ttl)
	}
}

func TestRecordsExpireAfterRetention(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Config{Retention: 300 * time.Millisecond})
	req := claimReq("acme", "expiring", "w1", time.Minute)
	res := mustClaim(t, s, req)
	if err := s.Record(ctx(t), res.Lease, "done"); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, waitLimit, "the record to expire", func() bool {
		_, err := s.Get(ctx(t), "acme", req.Key)
		return errors.Is(err, kvstore.ErrNotFound)
	})
	again := mustClaim(t, s, claimReq("acme", "expiring", "w2", time.Minute))
	if again.Record.Revision <= res.Record.Revision {
		t.Fatalf("revision repeated after expiry: %d then %d", res.Record.Revision, again.Record.Revision)
	}
}

func TestTakeOver(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Config{})
	req := claimReq("acme", "takeover", "w1", 200*time.Millisecond)
	res := mustClaim(t, s, req)

	// Still leased: refused.
	_, err := s.TakeOver(ctx(t), res.Record, claimReq("acme", "takeover", "w2", time.Minute))
	wantErr(t, "TakeOver of a live lease", err, kvstore.ErrLeaseHeld)

	var seen kvstore.Record
	wait.Eventually(t, waitLimit, "the lease to run out", func() bool {
		seen, err = s.Get(ctx(t), "acme", req.Key)
		return err == nil && seen.LeaseExpired
	})

	// A stale view (wrong revision or holder) is refused even after the lease ran out.
	stale := seen
	stale.Revision--
	_, err = s.TakeOver(ctx(t), stale, claimReq("acme", "takeover", "w2", time.Minute))
	wantErr(t, "TakeOver with a stale revision", err, kvstore.ErrLeaseHeld)
	stale = seen
	stale.Holder = "someone-else"
	_, err = s.TakeOver(ctx(t), stale, claimReq("acme", "takeover", "w2", time.Minute))
	wantErr(t, "TakeOver with a wrong holder", err, kvstore.ErrLeaseHeld)

	// Racing take-overs of one expired claim: exactly one wins.
	const n = 16
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		won    []kvstore.Lease
		others []error
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.TakeOver(context.Background(), seen, claimReq("acme", "takeover", fmt.Sprintf("t%d", i), time.Minute))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won = append(won, l)
			} else {
				others = append(others, err)
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d take-overs won, want 1", len(won))
	}
	for _, err := range others {
		wantErr(t, "losing TakeOver", err, kvstore.ErrLeaseHeld)
	}
	newLease := won[0]

	got, err := s.Get(ctx(t), "acme", req.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got.Holder != newLease.Holder || got.State != kvstore.StateClaimed || got.LeaseExpired || got.Revision <= seen.Revision || got.Lease != time.Minute {
		t.Fatalf("after TakeOver: %+v", got)
	}
	if got.CallID != "call-"+newLease.Holder || !got.CreatedAt.Equal(res.Record.CreatedAt) {
		t.Fatalf("take-over fields: %+v", got)
	}

	// The old holder is fenced off; the new one is not.
	wantErr(t, "old holder Record", s.Record(ctx(t), res.Lease, "late"), kvstore.ErrNotHolder)
	_, err = s.Renew(ctx(t), res.Lease, time.Minute)
	wantErr(t, "old holder Renew", err, kvstore.ErrNotHolder)
	if err := s.Record(ctx(t), newLease, "done"); err != nil {
		t.Fatalf("new holder Record: %v", err)
	}

	// A completed record cannot be taken over, even with its current revision.
	done, err := s.Get(ctx(t), "acme", req.Key)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.TakeOver(ctx(t), done, claimReq("acme", "takeover", "w9", time.Minute))
	wantErr(t, "TakeOver of a completed record", err, kvstore.ErrLeaseHeld)

	// Nothing to take over.
	gone := seen
	gone.Key = digest("never-claimed")
	_, err = s.TakeOver(ctx(t), gone, kvstore.ClaimRequest{Tenant: gone.Tenant, Key: gone.Key, Holder: "w2", Lease: time.Minute})
	wantErr(t, "TakeOver of a missing record", err, kvstore.ErrNotFound)
}

// TestLeaseJudgedByStoredServerDeadline shows that whether a lease ran out is
// decided by comparing the stored deadline with Redis's TIME inside the script:
// moving the stored deadline (in Redis time) flips the answer immediately.
func TestLeaseJudgedByStoredServerDeadline(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, redisstore.Config{})
	req := claimReq("acme", "clock", "w1", time.Hour)
	res := mustClaim(t, s, req)
	recKey := s.Config().Prefix + ":{acme}:" + req.Key

	if res.Record.LeaseExpired {
		t.Fatal("fresh hour-long lease reported expired")
	}
	r := readStored(t, c, recKey)
	r.numbers[numLeaseUntil] = strconv.FormatInt(redisNow(t, c).Add(-time.Second).UnixMilli(), 10)
	writeStored(t, c, recKey, r)
	seen, err := s.Get(ctx(t), "acme", req.Key)
	if err != nil {
		t.Fatal(err)
	}
	if !seen.LeaseExpired {
		t.Fatalf("deadline in Redis's past not judged expired: %+v", seen)
	}
	if _, err := s.TakeOver(ctx(t), seen, claimReq("acme", "clock", "w2", time.Hour)); err != nil {
		t.Fatalf("TakeOver after the Redis-time deadline: %v", err)
	}
}

func TestRenew(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, redisstore.Config{})
	req := claimReq("acme", "renew", "w1", 100*time.Millisecond)
	res := mustClaim(t, s, req)

	before := redisNow(t, c)
	l2, err := s.Renew(ctx(t), res.Lease, time.Hour)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if l2 != res.Lease {
		t.Fatalf("Renew changed the lease: %+v → %+v", res.Lease, l2)
	}
	got, err := s.Get(ctx(t), "acme", req.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got.Lease != time.Hour || got.LeaseUntil.Before(before.Add(time.Hour).Add(-time.Millisecond)) || got.Revision <= res.Record.Revision {
		t.Fatalf("after Renew: %+v", got)
	}
	time.Sleep(200 * time.Millisecond) // past the original lease
	seen, err := s.Get(ctx(t), "acme", req.Key)
	if err != nil {
		t.Fatal(err)
	}
	if seen.LeaseExpired {
		t.Fatal("renewed lease reported expired")
	}
	_, err = s.TakeOver(ctx(t), seen, claimReq("acme", "renew", "w2", time.Minute))
	wantErr(t, "TakeOver of a renewed lease", err, kvstore.ErrLeaseHeld)

	// A holder whose lease ran out may still renew until someone takes over.
	if _, err := s.Renew(ctx(t), l2, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, waitLimit, "the short lease to run out", func() bool {
		r, err := s.Get(ctx(t), "acme", req.Key)
		return err == nil && r.LeaseExpired
	})
	if _, err := s.Renew(ctx(t), l2, time.Hour); err != nil {
		t.Fatalf("Renew after the lease ran out but before any take-over: %v", err)
	}
}

func TestReleaseAndRevisionsNeverRepeat(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Config{})
	var last uint64
	for i := range 5 {
		res := mustClaim(t, s, claimReq("acme", "cycle", fmt.Sprintf("w%d", i), time.Minute))
		if res.Record.Revision <= last {
			t.Fatalf("claim %d: revision %d not above %d", i, res.Record.Revision, last)
		}
		last = res.Record.Revision
		if err := s.Release(ctx(t), res.Lease); err != nil {
			t.Fatalf("Release: %v", err)
		}
		_, err := s.Get(ctx(t), "acme", digest("cycle"))
		wantErr(t, "Get after Release", err, kvstore.ErrNotFound)
		err = s.Release(ctx(t), res.Lease)
		wantErr(t, "Release twice", err, kvstore.ErrNotHolder, kvstore.ErrNotFound)
	}
}

func TestMarkIndeterminateAndResolve(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Config{})

	park := func(name string) kvstore.Record {
		t.Helper()
		res := mustClaim(t, s, claimReq("acme", name, "w1", time.Minute))
		if err := s.MarkIndeterminate(ctx(t), res.Lease, "body_failed", true); err != nil {
			t.Fatalf("MarkIndeterminate: %v", err)
		}
		wantErr(t, "Record after Mark", s.Record(ctx(t), res.Lease, "x"), kvstore.ErrNotHolder)
		r, err := s.Get(ctx(t), "acme", digest(name))
		if err != nil {
			t.Fatal(err)
		}
		if r.State != kvstore.StateIndeterminate || r.Reason != "body_failed" || !r.BodyEntered || r.Revision <= res.Record.Revision {
			t.Fatalf("after Mark: %+v", r)
		}
		// An indeterminate record answers claims; it is never re-run.
		again, err := s.Claim(ctx(t), claimReq("acme", name, "w2", time.Minute))
		if err != nil || again.Claimed || again.Record.State != kvstore.StateIndeterminate {
			t.Fatalf("claim of an indeterminate key: %+v, %v", again, err)
		}
		return r
	}

	parked := park("complete-me")
	done, err := s.Resolve(ctx(t), "acme", digest("complete-me"), kvstore.Resolution{Outcome: "operator says ok"})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if done.State != kvstore.StateCompleted || done.Outcome != "operator says ok" || done.Revision <= parked.Revision || done.Reason != "" {
		t.Fatalf("resolved record: %+v", done)
	}
	_, err = s.Resolve(ctx(t), "acme", digest("complete-me"), kvstore.Resolution{Outcome: "again"})
	wantErr(t, "Resolve of a completed record", err, kvstore.ErrNotIndeterminate)

	park("release-me")
	was, err := s.Resolve(ctx(t), "acme", digest("release-me"), kvstore.Resolution{Release: true})
	if err != nil {
		t.Fatalf("Resolve release: %v", err)
	}
	if was.State != kvstore.StateIndeterminate || was.Reason != "body_failed" {
		t.Fatalf("released record as it was: %+v", was)
	}
	mustClaim(t, s, claimReq("acme", "release-me", "w3", time.Minute))

	_, err = s.Resolve(ctx(t), "acme", digest("missing"), kvstore.Resolution{Release: true})
	wantErr(t, "Resolve of a missing record", err, kvstore.ErrNotFound)

	res := mustClaim(t, s, claimReq("acme", "claimed", "w1", time.Minute))
	_, err = s.Resolve(ctx(t), "acme", digest("claimed"), kvstore.Resolution{Outcome: "x"})
	wantErr(t, "Resolve of a claimed record", err, kvstore.ErrNotIndeterminate)
	if err := s.MarkIndeterminate(ctx(t), res.Lease, "holder_lost", false); err != nil {
		t.Fatal(err)
	}
	r, err := s.Get(ctx(t), "acme", digest("claimed"))
	if err != nil || r.BodyEntered || r.Reason != "holder_lost" {
		t.Fatalf("bodyEntered=false not kept: %+v %v", r, err)
	}
}

func TestValuesAreBinarySafeAndCapped(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Config{MaxValueSize: 64})

	res := mustClaim(t, s, claimReq("acme", "big", "w1", time.Minute))
	wantErr(t, "Record too large", s.Record(ctx(t), res.Lease, strings.Repeat("x", 65)), kvstore.ErrTooLarge)
	wantErr(t, "Mark too large", s.MarkIndeterminate(ctx(t), res.Lease, strings.Repeat("x", 65), true), kvstore.ErrTooLarge)
	r, err := s.Get(ctx(t), "acme", digest("big"))
	if err != nil || r.State != kvstore.StateClaimed || r.Revision != res.Record.Revision {
		t.Fatalf("refused write changed the record: %+v %v", r, err)
	}

	odd := "\x00\xff\xfe not utf-8 \"quoted\" {}\n\t"
	if err := s.Record(ctx(t), res.Lease, odd); err != nil {
		t.Fatal(err)
	}
	r, err = s.Get(ctx(t), "acme", digest("big"))
	if err != nil || r.Outcome != odd {
		t.Fatalf("outcome did not round-trip: %q %v", r.Outcome, err)
	}
}

func TestClaimRace(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	prefix := uniquePrefix(t, c)
	// Several stores (and clients) on one Redis, as separate replicas would be.
	stores := make([]*redisstore.Store, 4)
	for i := range stores {
		cl := newClient(t)
		s, err := redisstore.New(cl, redisstore.Config{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
	}
	for round := range 3 {
		const n = 64
		name := fmt.Sprintf("race-%d", round)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
			seen    = map[string]int{}
		)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				holder := fmt.Sprintf("w%d", i)
				res, err := stores[i%len(stores)].Claim(context.Background(), claimReq("acme", name, holder, time.Minute))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err != nil:
					t.Errorf("Claim: %v", err)
				case res.Claimed:
					winners = append(winners, holder)
				default:
					seen[res.Record.Holder]++
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %v, want 1", round, len(winners), winners)
		}
		if seen[winners[0]] != n-1 || len(seen) != 1 {
			t.Fatalf("round %d: losers saw holders %v, want %s ×%d", round, seen, winners[0], n-1)
		}
	}
}

// TestClosedStoreAnswersErrClosed: a closed store answers every operation with
// ErrUnavailable (the conformance suite's outage check, "closed store"), and the
// error matches ErrClosed too.
func TestClosedStoreAnswersErrClosed(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t, redisstore.Config{})
	_ = s.Close()
	_, err := s.Get(context.Background(), "acme", digest("down"))
	wantErr(t, "Get after Close", err, kvstore.ErrUnavailable, redisstore.ErrClosed)
}

// TestScriptFlush checks that every operation survives an emptied script cache
// (EVALSHA answers NOSCRIPT and the store falls back to EVAL).
func TestScriptFlush(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, redisstore.Config{})
	flush := func() {
		t.Helper()
		if err := c.ScriptFlush(ctx(t)).Err(); err != nil {
			t.Fatalf("SCRIPT FLUSH: %v", err)
		}
	}
	flush()
	res := mustClaim(t, s, claimReq("acme", "flush", "w1", time.Minute))
	flush()
	if _, err := s.Get(ctx(t), "acme", digest("flush")); err != nil {
		t.Fatal(err)
	}
	flush()
	l, err := s.Renew(ctx(t), res.Lease, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	flush()
	if err := s.MarkIndeterminate(ctx(t), l, "body_failed", true); err != nil {
		t.Fatal(err)
	}
	flush()
	if _, err := s.Resolve(ctx(t), "acme", digest("flush"), kvstore.Resolution{Outcome: "ok"}); err != nil {
		t.Fatal(err)
	}
	flush()
	res = mustClaim(t, s, claimReq("acme", "flush2", "w1", time.Minute))
	flush()
	if err := s.Record(ctx(t), res.Lease, "x"); err != nil {
		t.Fatal(err)
	}
	flush()
	res = mustClaim(t, s, claimReq("acme", "flush3", "w1", time.Millisecond))
	var seen kvstore.Record
	wait.Eventually(t, waitLimit, "lease to run out", func() bool {
		seen, err = s.Get(ctx(t), "acme", digest("flush3"))
		return err == nil && seen.LeaseExpired
	})
	flush()
	l, err = s.TakeOver(ctx(t), seen, claimReq("acme", "flush3", "w2", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	flush()
	if err := s.Release(ctx(t), l); err != nil {
		t.Fatal(err)
	}
	flush()
	if n, err := s.Forget(ctx(t), "acme"); err != nil || n != 2 {
		t.Fatalf("Forget after flush: %d, %v", n, err)
	}
}

func TestForget(t *testing.T) {
	t.Parallel()
	s, c := newStore(t, redisstore.Config{ForgetBatch: 3})
	p := s.Config().Prefix

	var leases []kvstore.Lease
	for i := range 7 {
		res := mustClaim(t, s, claimReq("gone", fmt.Sprintf("k%d", i), "w1", time.Minute))
		leases = append(leases, res.Lease)
	}
	if err := s.Record(ctx(t), leases[0], "done"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkIndeterminate(ctx(t), leases[1], "body_failed", true); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx(t), leases[2]); err != nil { // released: not counted
		t.Fatal(err)
	}
	// An index entry whose record vanished (expired) is not counted either.
	if err := c.Unlink(ctx(t), p+":{gone}:"+digest("k3")).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		mustClaim(t, s, claimReq("kept", fmt.Sprintf("k%d", i), "w1", time.Minute))
	}
	// A tenant whose name is a prefix of the other's.
	mustClaim(t, s, claimReq("gon", "k0", "w1", time.Minute))

	n, err := s.Forget(ctx(t), "gone")
	if err != nil {
		t.Fatalf("Forget: %v", err)
	}
	if n != 5 { // k0, k1, k4, k5, k6
		t.Fatalf("Forget removed %d, want 5", n)
	}
	for i := range 7 {
		_, err := s.Get(ctx(t), "gone", digest(fmt.Sprintf("k%d", i)))
		wantErr(t, "Get after Forget", err, kvstore.ErrNotFound)
	}
	if c.Exists(ctx(t), p+":{gone}:idx").Val() != 0 {
		t.Fatal("tenant index left behind")
	}
	for i := range 4 {
		if _, err := s.Get(ctx(t), "kept", digest(fmt.Sprintf("k%d", i))); err != nil {
			t.Fatalf("other tenant's record touched: %v", err)
		}
	}
	if _, err := s.Get(ctx(t), "gon", digest("k0")); err != nil {
		t.Fatalf("prefix-sharing tenant's record touched: %v", err)
	}
	// The fenced holder of a forgotten claim is refused.
	wantErr(t, "Record after Forget", s.Record(ctx(t), leases[4], "late"), kvstore.ErrNotHolder)

	n, err = s.Forget(ctx(t), "gone")
	if err != nil || n != 0 {
		t.Fatalf("second Forget: %d, %v", n, err)
	}
	n, err = s.Forget(ctx(t), "never-seen")
	if err != nil || n != 0 {
		t.Fatalf("Forget of an unknown tenant: %d, %v", n, err)
	}
	// The key is free again after Forget.
	mustClaim(t, s, claimReq("gone", "k0", "w2", time.Minute))
}

// TestIndexPrunesExpiredEntries checks that the tenant index does not grow with
// records that expired on their own.
func TestIndexPrunesExpiredEntries(t *testing.T) {
	t.Parallel()
	short, c := newStore(t, redisstore.Config{Retention: 50 * time.Millisecond})
	// A store on the same prefix with a longer retention keeps the index alive:
	// the index lives as long as its longest-lived record.
	long, err := redisstore.New(c, redisstore.Config{Prefix: short.Config().Prefix, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	mustClaim(t, long, claimReq("acme", "anchor", "w1", time.Minute))
	idx := short.Config().Prefix + ":{acme}:idx"
	for i := range 5 {
		mustClaim(t, short, claimReq("acme", fmt.Sprintf("old%d", i), "w1", time.Minute))
	}
	if ttl := c.PTTL(ctx(t), idx).Val(); ttl < 50*time.Minute {
		t.Fatalf("a short-retention write shortened the index's TTL to %v", ttl)
	}
	time.Sleep(1200 * time.Millisecond) // past retention, the index slack and the prune's 1 s slack
	// About one claim in sixteen prunes; a thousand without one would take odds
	// of (15/16)^1000, about 1e-28.
	want := map[string]bool{digest("anchor"): true}
	for i := range 1000 {
		name := fmt.Sprintf("new%d", i)
		mustClaim(t, short, claimReq("acme", name, "w1", time.Hour))
		want[digest(name)] = true
		members, err := c.ZRange(ctx(t), idx, 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(members) == len(want) {
			for _, m := range members {
				if !want[m] {
					t.Fatalf("index holds %v, want only the anchor and the new digests", members)
				}
			}
			return
		}
	}
	t.Fatal("a thousand claims left the expired entries in the index")
}
