package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
)

func TestConfigDefaults(t *testing.T) {
	got, err := Config{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if got.Schema != "toolexec" || got.Channel != "toolexec_records" || got.Retention != 24*time.Hour ||
		got.SweepInterval != time.Minute || got.SweepBatch != 1000 || got.RecheckInterval != 5*time.Second ||
		got.MaxOutcomeBytes != 1<<20 || got.MaxBatch != 64 || got.BatchWriters != 0 || got.Logger == nil {
		t.Fatalf("defaults: %+v", got)
	}
	if SchemaVersion != len(migrations) {
		t.Fatalf("SchemaVersion %d, %d migrations", SchemaVersion, len(migrations))
	}
}

func TestConfigInvalid(t *testing.T) {
	for _, tt := range []struct {
		name string
		give Config
	}{
		{"schema with quote", Config{Schema: `a"b`}},
		{"schema upper case", Config{Schema: "Toolexec"}},
		{"schema starts with digit", Config{Schema: "1abc"}},
		{"schema too long", Config{Schema: strings.Repeat("a", 64)}},
		{"channel with space", Config{Channel: "a b"}},
		{"negative retention", Config{Retention: -time.Second}},
		{"negative batch", Config{SweepBatch: -1}},
		{"negative recheck", Config{RecheckInterval: -1}},
		{"negative max outcome", Config{MaxOutcomeBytes: -1}},
		{"negative max batch", Config{MaxBatch: -1}},
		{"negative batch writers", Config{BatchWriters: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.give.withDefaults(); !errors.Is(err, ErrBadConfig) {
				t.Fatalf("got %v, want ErrBadConfig", err)
			}
		})
	}
	if _, err := New(context.Background(), nil, Config{}); !errors.Is(err, ErrBadConfig) {
		t.Fatalf("nil pool: got %v, want ErrBadConfig", err)
	}
}

func TestEnsureSchemaTwice(t *testing.T) {
	s := newTestStore(t, Config{}) // runs it once
	if err := s.EnsureSchema(ctx(t)); err != nil {
		t.Fatalf("second EnsureSchema: %v", err)
	}
	var versions, maxV int
	if err := s.pool.QueryRow(ctx(t), `SELECT count(*), max(version) FROM `+s.quotedSchema+`.schema_version`).
		Scan(&versions, &maxV); err != nil {
		t.Fatal(err)
	}
	if versions != SchemaVersion || maxV != SchemaVersion {
		t.Fatalf("schema_version has %d rows, max %d; want %d", versions, maxV, SchemaVersion)
	}
	mustClaim(t, s, req("acme", newDigest(t), "w1", time.Minute))
}

func TestEnsureSchemaConcurrent(t *testing.T) {
	pool := testPool(t, nil)
	schema := freshSchema(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	stores := make([]*Store, 4)
	for i := range stores {
		s, err := New(ctx(t), pool, Config{Schema: schema, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		stores[i] = s
	}
	start := make(chan struct{})
	for i, s := range stores {
		wg.Go(func() {
			<-start
			errs[i] = s.EnsureSchema(ctx(t))
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("EnsureSchema #%d: %v", i, err)
		}
	}
	var versions int
	if err := pool.QueryRow(ctx(t), `SELECT count(*) FROM `+schema+`.schema_version`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if versions != SchemaVersion {
		t.Fatalf("schema_version rows = %d, want %d", versions, SchemaVersion)
	}
	mustClaim(t, stores[3], req("acme", newDigest(t), "w1", time.Minute))
}

func TestEnsureSchemaRefusesNewerVersion(t *testing.T) {
	s := newTestStore(t, Config{})
	if _, err := s.pool.Exec(ctx(t), `INSERT INTO `+s.quotedSchema+`.schema_version (version) VALUES (99)`); err != nil {
		t.Fatal(err)
	}
	err := s.EnsureSchema(ctx(t))
	if !errors.Is(err, ErrSchemaVersion) || errors.Is(err, kvstore.ErrUnavailable) {
		t.Fatalf("got %v, want ErrSchemaVersion (and not ErrUnavailable)", err)
	}
}

func TestNewCreatesNoTables(t *testing.T) {
	pool := testPool(t, nil)
	schema := freshSchema(t)
	s, err := New(ctx(t), pool, Config{Schema: schema, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Claim(ctx(t), req("acme", newDigest(t), "w1", time.Minute))
	if !errors.Is(err, kvstore.ErrUnavailable) || res.Claimed {
		t.Fatalf("Claim without schema: %+v, %v; want ErrUnavailable and no claim", res, err)
	}
	var exists bool
	if err := pool.QueryRow(ctx(t), `SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)`, schema).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Fatalf("New or Claim created schema %s", schema)
	}
}

func TestClaimFreshAndExisting(t *testing.T) {
	s := newTestStore(t, Config{Retention: time.Hour})
	d := newDigest(t)
	r1 := req("acme", d, "w1", 30*time.Second)
	res := mustClaim(t, s, r1)
	rec := res.Record
	if res.Lease.Tenant != "acme" || res.Lease.Key != d || res.Lease.Holder != "w1" || res.Lease.Token == "" {
		t.Fatalf("lease %+v", res.Lease)
	}
	if rec.State != kvstore.StateClaimed || rec.Tenant != "acme" || rec.Key != d || rec.Holder != "w1" ||
		rec.Lease != 30*time.Second || rec.CheckDigest != "cd-w1" || rec.Tool != "book" || rec.RunID != "run_1" ||
		rec.CallID != "call-w1" || rec.Revision == 0 || rec.LeaseExpired {
		t.Fatalf("claimed record %+v", rec)
	}
	if got := rec.LeaseUntil.Sub(rec.CreatedAt); got != 30*time.Second {
		t.Fatalf("lease_until - created_at = %v, want 30s", got)
	}
	if got := rec.ExpiresAt.Sub(rec.UpdatedAt); got != time.Hour {
		t.Fatalf("expires_at - updated_at = %v, want 1h", got)
	}

	res2, err := s.Claim(ctx(t), req("acme", d, "w2", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if res2.Claimed || res2.Lease != (kvstore.Lease{}) {
		t.Fatalf("second claim got the key: %+v", res2)
	}
	if res2.Record.Holder != "w1" || res2.Record.Revision != rec.Revision || res2.Record.State != kvstore.StateClaimed {
		t.Fatalf("second claim saw %+v, want w1's record", res2.Record)
	}
	got, err := s.Get(ctx(t), "acme", d)
	if err != nil {
		t.Fatal(err)
	}
	if got.Revision != rec.Revision || got.Holder != "w1" || !got.CreatedAt.Equal(rec.CreatedAt) {
		t.Fatalf("Get %+v, want %+v", got, rec)
	}
	if _, err := s.Get(ctx(t), "acme", newDigest(t)); !errors.Is(err, kvstore.ErrNotFound) {
		t.Fatalf("Get missing: %v", err)
	}
}

func TestTenantsAreSeparateEvenForOneDigest(t *testing.T) {
	s := newTestStore(t, Config{})
	d := newDigest(t)
	a := mustClaim(t, s, req("tenant-a", d, "w1", time.Minute))
	b := mustClaim(t, s, req("tenant-b", d, "w2", time.Minute))
	if err := s.Record(ctx(t), a.Lease, "A"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx(t), "tenant-b", d)
	if err != nil || got.State != kvstore.StateClaimed || got.Holder != "w2" {
		t.Fatalf("tenant-b record %+v, %v", got, err)
	}
	if err := s.Release(ctx(t), b.Lease); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctx(t), "tenant-a", d)
	if err != nil || got.Outcome != "A" {
		t.Fatalf("tenant-a record %+v, %v", got, err)
	}
}

func TestClaimRaceHasOneWinner(t *testing.T) {
	s := newTestStore(t, Config{})
	for round := range 3 {
		d := newDigest(t)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []string
			seen    = map[string]int{}
		)
		start := make(chan struct{})
		for i := range 50 {
			holder := "w" + string(rune('A'+i%26)) + strings.Repeat("x", i/26)
			wg.Go(func() {
				<-start
				res, err := s.Claim(ctx(t), req("acme", d, holder, time.Minute))
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
			})
		}
		close(start)
		wg.Wait()
		if len(winners) != 1 {
			t.Fatalf("round %d: %d winners %v, want 1", round, len(winners), winners)
		}
		if len(seen) != 1 || seen[winners[0]] != 49 {
			t.Fatalf("round %d: losers saw holders %v, want 49 × %s", round, seen, winners[0])
		}
	}
}

func TestClaimNeverTakesOverAnExpiredLease(t *testing.T) {
	s := newTestStore(t, Config{})
	d := newDigest(t)
	first := mustClaim(t, s, req("acme", d, "w1", 100*time.Millisecond))
	var stale kvstore.Record
	wait.Eventually(t, waitLimit, "lease to run out by the database clock", func() bool {
		r, err := s.Get(ctx(t), "acme", d)
		if err != nil {
			t.Fatal(err)
		}
		stale = r
		return r.LeaseExpired
	})
	res, err := s.Claim(ctx(t), req("acme", d, "w2", time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if res.Claimed {
		t.Fatal("Claim took over a claim whose lease ran out")
	}
	if !res.Record.LeaseExpired || res.Record.Holder != "w1" || res.Record.State != kvstore.StateClaimed {
		t.Fatalf("Claim answered %+v; want w1's claim with LeaseExpired", res.Record)
	}

	// TakeOver does it, once.
	lease, err := s.TakeOver(ctx(t), stale, req("acme", d, "w2", time.Minute))
	if err != nil {
		t.Fatalf("TakeOver: %v", err)
	}
	if lease.Holder != "w2" || lease.Token == "" || lease.Token == first.Lease.Token {
		t.Fatalf("TakeOver lease %+v", lease)
	}
	if _, err := s.TakeOver(ctx(t), stale, req("acme", d, "w3", time.Minute)); !errors.Is(err, kvstore.ErrLeaseHeld) {
		t.Fatalf("second TakeOver with the stale record: %v, want ErrLeaseHeld", err)
	}
	// The old holder is fenced off.
	if err := s.Record(ctx(t), first.Lease, "late"); !errors.Is(err, kvstore.ErrNotHolder) {
		t.Fatalf("old holder Record: %v, want ErrNotHolder", err)
	}
	got, err := s.Get(ctx(t), "acme", d)
	if err != nil {
		t.Fatal(err)
	}
	if got.Holder != "w2" || got.Revision <= stale.Revision || got.LeaseExpired || got.CallID != "call-w2" ||
		!got.CreatedAt.Equal(stale.CreatedAt) {
		t.Fatalf("after TakeOver: %+v", got)
	}
	if err := s.Record(ctx(t), lease, "done"); err != nil {
		t.Fatalf("new holder Record: %v", err)
	}
}

func TestTakeOverRefusals(t *testing.T) {
	s := newTestStore(t, Config{})
	d := newDigest(t)
	res := mustClaim(t, s, req("acme", d, "w1", time.Hour))
	if _, err := s.TakeOver(ctx(t), res.Record, req("acme", d, "w2", time.Minute)); !errors.Is(err, kvstore.ErrLeaseHeld) {
		t.Fatalf("TakeOver of a live lease: %v, want ErrLeaseHeld", err)
	}
	if _, err := s.TakeOver(ctx(t), res.Record, req("acme", newDigest(t), "w2", time.Minute)); !errors.Is(err, kvstore.ErrInvalid) {
		t.Fatalf("TakeOver for another key: %v, want ErrInvalid", err)
	}
	gone := res.Record
	gone.Key = newDigest(t)
	if _, err := s.TakeOver(ctx(t), gone, req("acme", gone.Key, "w2", time.Minute)); !errors.Is(err, kvstore.ErrNotFound) {
		t.Fatalf("TakeOver of a missing record: %v, want ErrNotFound", err)
	}
	// A completed record whose old lease deadline passed is not a claim to take.
	short := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Millisecond))
	if err := s.Record(ctx(t), short.Lease, "x"); err != nil {
		t.Fatal(err)
	}
	done, err := s.Get(ctx(t), "acme", short.Lease.Key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeOver(ctx(t), done, req("acme", done.Key, "w2", time.Minute)); !errors.Is(err, kvstore.ErrLeaseHeld) {
		t.Fatalf("TakeOver of a completed record: %v, want ErrLeaseHeld", err)
	}
}

func TestHolderTransitions(t *testing.T) {
	s := newTestStore(t, Config{})
	t.Run("record", func(t *testing.T) {
		d := newDigest(t)
		res := mustClaim(t, s, req("acme", d, "w1", time.Minute))
		if err := s.Record(ctx(t), res.Lease, `{"seat":"12A"}`); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx(t), "acme", d)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != kvstore.StateCompleted || got.Outcome != `{"seat":"12A"}` || got.Revision <= res.Record.Revision || got.Holder != "w1" {
			t.Fatalf("after Record: %+v", got)
		}
		for name, op := range map[string]func() error{
			"Record":            func() error { return s.Record(ctx(t), res.Lease, "again") },
			"Release":           func() error { return s.Release(ctx(t), res.Lease) },
			"MarkIndeterminate": func() error { return s.MarkIndeterminate(ctx(t), res.Lease, "body_failed", true) },
			"Renew":             func() error { _, err := s.Renew(ctx(t), res.Lease, time.Minute); return err },
		} {
			if err := op(); !errors.Is(err, kvstore.ErrNotHolder) {
				t.Errorf("%s after Record: %v, want ErrNotHolder", name, err)
			}
		}
		res2, err := s.Claim(ctx(t), req("acme", d, "w2", time.Minute))
		if err != nil || res2.Claimed || res2.Record.Outcome != `{"seat":"12A"}` {
			t.Fatalf("claim of a completed key: %+v, %v", res2, err)
		}
	})
	t.Run("release", func(t *testing.T) {
		d := newDigest(t)
		res := mustClaim(t, s, req("acme", d, "w1", time.Minute))
		if err := s.Release(ctx(t), res.Lease); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx(t), "acme", d); !errors.Is(err, kvstore.ErrNotFound) {
			t.Fatalf("Get after Release: %v", err)
		}
		if err := s.Release(ctx(t), res.Lease); !errors.Is(err, kvstore.ErrNotHolder) {
			t.Fatalf("second Release: %v, want ErrNotHolder", err)
		}
		again := mustClaim(t, s, req("acme", d, "w2", time.Minute))
		if again.Record.Revision <= res.Record.Revision {
			t.Fatalf("revision went from %d to %d across a release", res.Record.Revision, again.Record.Revision)
		}
		if err := s.Record(ctx(t), res.Lease, "stale"); !errors.Is(err, kvstore.ErrNotHolder) {
			t.Fatalf("released lease recorded on the new claim: %v", err)
		}
	})
	t.Run("mark indeterminate", func(t *testing.T) {
		d := newDigest(t)
		res := mustClaim(t, s, req("acme", d, "w1", time.Minute))
		if err := s.MarkIndeterminate(ctx(t), res.Lease, "body_failed", true); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx(t), "acme", d)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != kvstore.StateIndeterminate || got.Reason != "body_failed" || !got.BodyEntered || got.LeaseExpired {
			t.Fatalf("after MarkIndeterminate: %+v", got)
		}
		if err := s.Record(ctx(t), res.Lease, "x"); !errors.Is(err, kvstore.ErrNotHolder) {
			t.Fatalf("Record after mark: %v, want ErrNotHolder", err)
		}
	})
	t.Run("renew", func(t *testing.T) {
		d := newDigest(t)
		res := mustClaim(t, s, req("acme", d, "w1", time.Second))
		l2, err := s.Renew(ctx(t), res.Lease, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx(t), "acme", d)
		if err != nil {
			t.Fatal(err)
		}
		if got.Lease != time.Hour || got.LeaseUntil.Sub(got.UpdatedAt) != time.Hour || got.Revision <= res.Record.Revision {
			t.Fatalf("after Renew: %+v", got)
		}
		if _, err := s.Renew(ctx(t), l2, 0); !errors.Is(err, kvstore.ErrInvalid) {
			t.Fatalf("Renew by 0: %v, want ErrInvalid", err)
		}
		forged := l2
		forged.Token = "not-the-token"
		if _, err := s.Renew(ctx(t), forged, time.Minute); !errors.Is(err, kvstore.ErrNotHolder) {
			t.Fatalf("Renew with a forged token: %v, want ErrNotHolder", err)
		}
		if err := s.Record(ctx(t), l2, "ok"); err != nil {
			t.Fatalf("Record with the renewed lease: %v", err)
		}
	})
}

func TestOutcomeLimitsAndBytes(t *testing.T) {
	s := newTestStore(t, Config{MaxOutcomeBytes: 16})
	d := newDigest(t)
	res := mustClaim(t, s, req("acme", d, "w1", time.Minute))
	if err := s.Record(ctx(t), res.Lease, strings.Repeat("x", 17)); !errors.Is(err, kvstore.ErrTooLarge) {
		t.Fatalf("17-byte outcome: %v, want ErrTooLarge", err)
	}
	if err := s.MarkIndeterminate(ctx(t), res.Lease, strings.Repeat("r", MaxReasonBytes+1), false); !errors.Is(err, kvstore.ErrTooLarge) {
		t.Fatalf("long reason: %v, want ErrTooLarge", err)
	}
	got, err := s.Get(ctx(t), "acme", d)
	if err != nil || got.State != kvstore.StateClaimed || got.Revision != res.Record.Revision {
		t.Fatalf("refused writes changed the record: %+v, %v", got, err)
	}
	binary := "a\x00b\xff\xfe" // NUL and invalid UTF-8 survive: outcomes are bytes
	if err := s.Record(ctx(t), res.Lease, binary); err != nil {
		t.Fatal(err)
	}
	got, err = s.Get(ctx(t), "acme", d)
	if err != nil || got.Outcome != binary {
		t.Fatalf("outcome %q, %v; want %q", got.Outcome, err, binary)
	}
}

func TestInvalidRequests(t *testing.T) {
	s := newTestStore(t, Config{})
	d := newDigest(t)
	for _, tt := range []struct {
		name string
		give kvstore.ClaimRequest
	}{
		{"empty tenant", req("", d, "w", time.Minute)},
		{"tenant with dot", req("a.b", d, "w", time.Minute)},
		{"empty digest", req("acme", "", "w", time.Minute)},
		{"short digest", req("acme", d[:63], "w", time.Minute)},
		{"upper-case digest", req("acme", strings.ToUpper(d), "w", time.Minute)},
		{"zero lease", req("acme", d, "w", 0)},
		{"negative lease", req("acme", d, "w", -time.Second)},
		{"holder with NUL", req("acme", d, "w\x00", time.Minute)},
		{"tool not UTF-8", func() kvstore.ClaimRequest { r := req("acme", d, "w", time.Minute); r.Tool = "\xff"; return r }()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := s.Claim(ctx(t), tt.give)
			if !errors.Is(err, kvstore.ErrInvalid) || res.Claimed {
				t.Fatalf("got %+v, %v; want ErrInvalid", res, err)
			}
		})
	}
	if _, err := s.Get(ctx(t), "acme", "xyz"); !errors.Is(err, kvstore.ErrInvalid) {
		t.Fatalf("Get bad digest: %v", err)
	}
	if _, err := s.Forget(ctx(t), ""); !errors.Is(err, kvstore.ErrInvalid) {
		t.Fatalf("Forget empty tenant: %v", err)
	}
	if _, err := s.Wait(ctx(t), kvstore.Record{Tenant: "acme"}); !errors.Is(err, kvstore.ErrInvalid) {
		t.Fatalf("Wait without digest: %v", err)
	}
	if n := rowCount(t, s, ""); n != 0 {
		t.Fatalf("invalid requests wrote %d rows", n)
	}
}

func TestExpiredRecordsReadAsAbsent(t *testing.T) {
	s := newTestStore(t, Config{Retention: 300 * time.Millisecond}) // no sweeper
	d := newDigest(t)
	res := mustClaim(t, s, req("acme", d, "w1", time.Hour))
	if err := s.Record(ctx(t), res.Lease, "old"); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, waitLimit, "record to expire", func() bool {
		_, err := s.Get(ctx(t), "acme", d)
		return errors.Is(err, kvstore.ErrNotFound)
	})
	if n := rowCount(t, s, "digest = $1", d); n != 1 {
		t.Fatalf("expected the expired row to be still in the table (unswept), found %d", n)
	}
	if _, err := s.Resolve(ctx(t), "acme", d, kvstore.Resolution{Release: true}); !errors.Is(err, kvstore.ErrNotFound) {
		t.Fatalf("Resolve of an expired record: %v, want ErrNotFound", err)
	}
	again := mustClaim(t, s, req("acme", d, "w2", time.Hour))
	if again.Record.Outcome != "" || again.Record.Holder != "w2" || again.Record.Revision <= res.Record.Revision ||
		!again.Record.CreatedAt.After(res.Record.CreatedAt) {
		t.Fatalf("re-claim of an expired key: %+v", again.Record)
	}

	// A claim whose record expires is fenced off too.
	d2 := newDigest(t)
	res2 := mustClaim(t, s, req("acme", d2, "w1", time.Hour))
	wait.Eventually(t, waitLimit, "claim to expire", func() bool {
		_, err := s.Get(ctx(t), "acme", d2)
		return errors.Is(err, kvstore.ErrNotFound)
	})
	if err := s.Record(ctx(t), res2.Lease, "late"); !errors.Is(err, kvstore.ErrNotHolder) {
		t.Fatalf("Record on an expired claim: %v, want ErrNotHolder", err)
	}
}

func TestForget(t *testing.T) {
	s := newTestStore(t, Config{})
	var keep []string
	for range 3 {
		mustClaim(t, s, req("gone", newDigest(t), "w1", time.Minute))
	}
	for range 2 {
		d := newDigest(t)
		keep = append(keep, d)
		mustClaim(t, s, req("stays", d, "w1", time.Minute))
	}
	n, err := s.Forget(ctx(t), "gone")
	if err != nil || n != 3 {
		t.Fatalf("Forget = %d, %v; want 3", n, err)
	}
	if got := rowCount(t, s, "tenant = 'gone'"); got != 0 {
		t.Fatalf("%d rows of the forgotten tenant remain", got)
	}
	for _, d := range keep {
		if _, err := s.Get(ctx(t), "stays", d); err != nil {
			t.Fatalf("other tenant's record: %v", err)
		}
	}
	if n, err := s.Forget(ctx(t), "gone"); err != nil || n != 0 {
		t.Fatalf("second Forget = %d, %v; want 0", n, err)
	}
}

func TestResolve(t *testing.T) {
	s := newTestStore(t, Config{})
	park := func(t *testing.T) (string, kvstore.Record) {
		t.Helper()
		d := newDigest(t)
		res := mustClaim(t, s, req("acme", d, "w1", time.Minute))
		if err := s.MarkIndeterminate(ctx(t), res.Lease, "holder_lost", true); err != nil {
			t.Fatal(err)
		}
		rec, err := s.Get(ctx(t), "acme", d)
		if err != nil {
			t.Fatal(err)
		}
		return d, rec
	}
	t.Run("complete", func(t *testing.T) {
		d, before := park(t)
		got, err := s.Resolve(ctx(t), "acme", d, kvstore.Resolution{Outcome: "booked"})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != kvstore.StateCompleted || got.Outcome != "booked" || got.Revision <= before.Revision {
			t.Fatalf("resolved %+v", got)
		}
		if _, err := s.Resolve(ctx(t), "acme", d, kvstore.Resolution{Outcome: "again"}); !errors.Is(err, kvstore.ErrNotIndeterminate) {
			t.Fatalf("resolving a completed record: %v, want ErrNotIndeterminate", err)
		}
	})
	t.Run("release", func(t *testing.T) {
		d, before := park(t)
		got, err := s.Resolve(ctx(t), "acme", d, kvstore.Resolution{Release: true})
		if err != nil {
			t.Fatal(err)
		}
		if got.State != kvstore.StateIndeterminate || got.Revision != before.Revision || got.Reason != "holder_lost" {
			t.Fatalf("release returned %+v, want the record as it was", got)
		}
		if _, err := s.Get(ctx(t), "acme", d); !errors.Is(err, kvstore.ErrNotFound) {
			t.Fatalf("Get after release: %v", err)
		}
		mustClaim(t, s, req("acme", d, "w2", time.Minute))
	})
	t.Run("claimed", func(t *testing.T) {
		d := newDigest(t)
		mustClaim(t, s, req("acme", d, "w1", time.Minute))
		if _, err := s.Resolve(ctx(t), "acme", d, kvstore.Resolution{Release: true}); !errors.Is(err, kvstore.ErrNotIndeterminate) {
			t.Fatalf("resolving a claim: %v, want ErrNotIndeterminate", err)
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := s.Resolve(ctx(t), "acme", newDigest(t), kvstore.Resolution{Outcome: "x"}); !errors.Is(err, kvstore.ErrNotFound) {
			t.Fatalf("resolving a missing record: %v, want ErrNotFound", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		d, _ := park(t)
		big := strings.Repeat("x", s.cfg.MaxOutcomeBytes+1)
		if _, err := s.Resolve(ctx(t), "acme", d, kvstore.Resolution{Outcome: big}); !errors.Is(err, kvstore.ErrTooLarge) {
			t.Fatalf("resolving with a huge outcome: %v, want ErrTooLarge", err)
		}
	})
}

func TestClosedStore(t *testing.T) {
	s := newTestStore(t, Config{RecheckInterval: time.Hour})
	res := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
	waiting := goWait(t, s, ctx(t), res.Record)
	waitRegistered(t, s, res.Record.Key)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, waiting); !errors.Is(r.err, kvstore.ErrUnavailable) {
		t.Fatalf("Wait across Close: %+v; want ErrUnavailable", r)
	}
	if _, err := s.Claim(ctx(t), req("acme", newDigest(t), "w1", time.Minute)); !errors.Is(err, kvstore.ErrUnavailable) {
		t.Fatalf("Claim after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestDumpRawShowsRowsAsStored(t *testing.T) {
	s := newTestStore(t, Config{})
	d := newDigest(t)
	res := mustClaim(t, s, req("acme", d, "w1", time.Minute))
	if err := s.Record(ctx(t), res.Lease, `{"seat":"12A"}`); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, req("other", newDigest(t), "w1", time.Minute))
	raw, err := s.DumpRaw(ctx(t), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 1 {
		t.Fatalf("DumpRaw returned %d rows, want 1", len(raw))
	}
	var row map[string]any
	if err := json.Unmarshal(raw[0], &row); err != nil {
		t.Fatalf("dump is not JSON: %v\n%s", err, raw[0])
	}
	if row["digest"] != d || row["tenant"] != "acme" || row["outcome"] != `{"seat":"12A"}` {
		t.Fatalf("dumped row %s", raw[0])
	}
	// Exactly the table's columns: nothing that could hold arguments.
	want := []string{"body_entered", "call_id", "check_digest", "created_at", "digest", "expires_at", "holder",
		"lease", "lease_until", "outcome", "reason", "revision", "run_id", "state", "tenant", "token", "tool", "updated_at", "watched"}
	if len(row) != len(want) {
		t.Fatalf("dump has columns %v, want exactly %v", keys(row), want)
	}
	for _, k := range want {
		if _, ok := row[k]; !ok {
			t.Fatalf("dump lacks %q: %v", k, keys(row))
		}
	}
	raw, err = s.DumpRaw(ctx(t), "nobody")
	if err != nil || len(raw) != 0 {
		t.Fatalf("empty dump %q, %v", raw, err)
	}
}

func keys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestClaimBehindUncommittedClaim: a claim whose key another transaction has
// just claimed, uncommitted, waits for it; the claim statement's own read
// cannot see a row committed after it began, so Claim reads the record with a
// statement of its own, and reports the other claim, never its own.
func TestClaimBehindUncommittedClaim(t *testing.T) {
	s := newTestStore(t, Config{MaxBatch: 1})
	d := newDigest(t)
	first := req("acme", d, "first", time.Minute)
	tx, err := s.pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx(t)) }()
	var claimed bool
	if _, err := scanRecord(tx.QueryRow(ctx(t), s.sql.claim, first.Tenant, first.Key, first.CheckDigest, first.Tool,
		first.RunID, first.CallID, first.Holder, "tok-first", micros(first.Lease), s.retention()), &claimed); err != nil || !claimed {
		t.Fatalf("the first claim, in its transaction: claimed %v, %v", claimed, err)
	}
	holderPID := tx.Conn().PgConn().PID()

	type result struct {
		res kvstore.ClaimResult
		err error
	}
	second := make(chan result, 1)
	go func() {
		res, err := s.Claim(ctx(t), req("acme", d, "second", time.Minute))
		second <- result{res, err}
	}()
	waitBlockedBy(t, s, holderPID, "the second claim to wait for the first's row lock")
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	got := <-second
	if got.err != nil || got.res.Claimed || got.res.Record.Holder != "first" || got.res.Record.State != kvstore.StateClaimed {
		t.Fatalf("second claim = %+v, %v; want the first claim's record", got.res, got.err)
	}
}

// TestMissingSchemaIsErrNoSchema: a schema that does not exist is reported as
// ErrNoSchema (and, as every failure of the database, ErrUnavailable), by
// every operation that reads or writes the records.
func TestMissingSchemaIsErrNoSchema(t *testing.T) {
	pool := testPool(t, nil)
	s, err := New(ctx(t), pool, Config{Schema: "pgstore_absent_" + randHex(t, 8), SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	d := newDigest(t)
	for name, op := range map[string]func() error{
		"Claim":   func() error { _, err := s.Claim(ctx(t), req("acme", d, "w1", time.Minute)); return err },
		"Get":     func() error { _, err := s.Get(ctx(t), "acme", d); return err },
		"Forget":  func() error { _, err := s.Forget(ctx(t), "acme"); return err },
		"Resolve": func() error { _, err := s.Resolve(ctx(t), "acme", d, kvstore.Resolution{Release: true}); return err },
		"List":    func() error { _, err := s.List(ctx(t), "acme", kvstore.StateIndeterminate, 10); return err },
	} {
		err := op()
		if !errors.Is(err, ErrNoSchema) || !errors.Is(err, kvstore.ErrUnavailable) {
			t.Errorf("%s in a schema that does not exist: %v, want ErrNoSchema and ErrUnavailable", name, err)
		}
	}

	// A store that can be reached and has its tables is not ErrNoSchema when it
	// fails otherwise.
	ok := openStore(t, testPool(t, nil), Config{})
	c, cancel := context.WithTimeout(ctx(t), time.Nanosecond)
	defer cancel()
	<-c.Done()
	if _, err := ok.Get(c, "acme", d); errors.Is(err, ErrNoSchema) {
		t.Errorf("Get with an expired context: %v, matches ErrNoSchema", err)
	}
}
