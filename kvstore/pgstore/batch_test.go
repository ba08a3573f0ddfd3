package pgstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/kvstore"
)

// claimedRow is what a claim's statement returned: the record, and whether
// the statement claimed it.
type claimedRow struct {
	row
	claimed bool
}

// claimWrite is the write Claim queues for r, and where its row goes.
func claimWrite(s *Store, r kvstore.ClaimRequest, token string) (*write, *claimedRow) {
	var got claimedRow
	w := &write{
		tenant: r.Tenant, digest: r.Key, query: s.sql.claim,
		args: []any{r.Tenant, r.Key, r.CheckDigest, r.Tool, r.RunID, r.CallID,
			r.Holder, token, micros(r.Lease), s.retention()},
		scan: func(q pgx.Row) (err error) { got.row, err = scanRecord(q, &got.claimed); return err },
		done: make(chan error, 1),
	}
	return w, &got
}

// TestGroupCommitConcurrentClaims claims keys from many goroutines at once while
// the only batch writer is held up, so that they queue and go in one batch:
// each key is claimed once, its duplicates see the winner's claim, and the
// winners' records complete in batches too.
func TestGroupCommitConcurrentClaims(t *testing.T) {
	pool := testPool(t, nil)
	s := openStore(t, pool, Config{MaxBatch: 64, BatchWriters: 1})

	// Hold the writer: a Record waits on a row another transaction has locked.
	blocker := mustClaim(t, s, req("t1", newDigest(t), "blocker", time.Minute))
	tx, err := pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx(t), `SELECT 1 FROM `+s.quotedSchema+`.records WHERE digest = $1 FOR UPDATE`, blocker.Lease.Key); err != nil {
		t.Fatal(err)
	}
	held := make(chan error, 1)
	go func() { held <- s.Record(ctx(t), blocker.Lease, "held") }()
	time.Sleep(100 * time.Millisecond) // the Record is in the writer, waiting on the lock

	const keys, copies = 12, 3
	digests := make([]string, keys)
	for i := range digests {
		digests[i] = newDigest(t)
	}
	results := make([][]kvstore.ClaimResult, keys)
	var wg sync.WaitGroup
	var mu sync.Mutex
	errs := make(chan error, keys*copies)
	for i, d := range digests {
		for c := range copies {
			wg.Go(func() {
				res, err := s.Claim(ctx(t), req("t1", d, fmt.Sprintf("h%d-%d", i, c), time.Minute))
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				results[i] = append(results[i], res)
				mu.Unlock()
			})
		}
	}
	time.Sleep(300 * time.Millisecond) // every claim is queued behind the held writer
	if err := tx.Rollback(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-held; err != nil {
		t.Fatalf("held Record: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Claim: %v", err)
	}

	var leases []kvstore.Lease
	for i, rs := range results {
		var winners []kvstore.ClaimResult
		for _, r := range rs {
			if r.Claimed {
				winners = append(winners, r)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("key %d: %d of %d claims won, want exactly 1", i, len(winners), len(rs))
		}
		for _, r := range rs {
			if !r.Claimed && (r.Record.Holder != winners[0].Lease.Holder || r.Record.State != kvstore.StateClaimed) {
				t.Errorf("key %d: a duplicate saw %+v, want the claim of %s", i, r.Record, winners[0].Lease.Holder)
			}
		}
		leases = append(leases, winners[0].Lease)
	}
	st := s.BatchStats()
	if st.Batches == 0 || st.Writes < 2 {
		t.Fatalf("no group commit happened: %+v", st)
	}
	if st.Retried != 0 {
		t.Fatalf("batches refused: %+v", st)
	}

	// The winners record at once: their writes go in batches as well.
	for _, l := range leases {
		wg.Go(func() {
			if err := s.Record(ctx(t), l, "done"); err != nil {
				t.Errorf("Record: %v", err)
			}
		})
	}
	wg.Wait()
	for i, d := range digests {
		rec, err := s.Get(ctx(t), "t1", d)
		if err != nil || rec.State != kvstore.StateCompleted || rec.Outcome != "done" {
			t.Fatalf("key %d: %+v, %v; want completed with outcome done", i, rec, err)
		}
	}
}

// TestGroupCommitSameKeyTwiceInOneBatch: the second claim of a key in the batch
// that first claims it writes nothing and reads the first one's record, as it
// would alone after the first.
func TestGroupCommitSameKeyTwiceInOneBatch(t *testing.T) {
	s := newTestStore(t, Config{MaxBatch: 64, BatchWriters: 1})
	d := newDigest(t)
	w1, r1 := claimWrite(s, req("t1", d, "first", time.Minute), "tok1")
	w2, r2 := claimWrite(s, req("t1", d, "second", time.Minute), "tok2")
	s.writeBatch([]*write{w1, w2})
	if err := <-w1.done; err != nil {
		t.Fatalf("first claim: %v", err)
	}
	if r1.rec.Holder != "first" || r1.rec.State != kvstore.StateClaimed || !r1.claimed {
		t.Fatalf("first claim's row: %+v, claimed %v", r1.rec, r1.claimed)
	}
	if err := <-w2.done; err != nil || r2.claimed || r2.rec.Holder != "first" || r2.rec.Revision != r1.rec.Revision {
		t.Fatalf("second claim: %v, %+v, claimed %v; want the first claim's record, unclaimed", err, r2.rec, r2.claimed)
	}
	if st := s.BatchStats(); st.Batches != 1 || st.Writes != 2 {
		t.Fatalf("stats %+v, want one batch of two", st)
	}
}

// TestGroupCommitRefusedBatchRunsWritesAlone: a statement the server refuses
// rolls the whole batch back; the other writes then run alone and succeed, and
// only the refused one fails.
func TestGroupCommitRefusedBatchRunsWritesAlone(t *testing.T) {
	s := newTestStore(t, Config{MaxBatch: 64, BatchWriters: 1})
	rawExec(t, s, `CREATE FUNCTION `+s.quotedSchema+`.refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	IF NEW.holder = 'poison' THEN RAISE EXCEPTION 'refused for the test'; END IF;
	RETURN NEW;
END $$`)
	rawExec(t, s, `CREATE TRIGGER refuse BEFORE INSERT ON {t} FOR EACH ROW EXECUTE FUNCTION `+s.quotedSchema+`.refuse()`)

	var batch []*write
	var good []string
	for i := range 5 {
		holder := fmt.Sprintf("h%d", i)
		if i == 2 {
			holder = "poison"
		}
		d := newDigest(t)
		w, _ := claimWrite(s, req("t1", d, holder, time.Minute), "tok-"+holder)
		batch = append(batch, w)
		if holder != "poison" {
			good = append(good, d)
		}
	}
	s.writeBatch(batch)
	var refused int
	for _, w := range batch {
		err := <-w.done
		var pgErr *pgconn.PgError
		switch {
		case err == nil:
		case errors.As(err, &pgErr) && pgErr.Message == "refused for the test":
			refused++
		default:
			t.Fatalf("claim %s: %v", w.digest, err)
		}
	}
	if refused != 1 {
		t.Fatalf("%d claims refused, want the poisoned one", refused)
	}
	for _, d := range good {
		if n := rowCount(t, s, "digest = $1", d); n != 1 {
			t.Fatalf("key %s: %d rows after the batch ran again one by one, want 1", d, n)
		}
	}
	if n := rowCount(t, s, "holder = 'poison'"); n != 0 {
		t.Fatalf("the refused claim left %d rows", n)
	}
	if st := s.BatchStats(); st.Retried != 1 {
		t.Fatalf("stats %+v, want one batch retried", st)
	}
}

// TestGroupCommitTimeoutWritesNothing: a batch that runs out of time (one of its
// statements waits on a lock) fails every write of it — none is run again — and
// leaves no row behind.
func TestGroupCommitTimeoutWritesNothing(t *testing.T) {
	pool := testPool(t, nil)
	s := openStore(t, pool, Config{MaxBatch: 64, BatchWriters: 1, OpTimeout: 300 * time.Millisecond})
	locked := mustClaim(t, s, req("t1", newDigest(t), "locked", time.Minute))
	tx, err := pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx(t), `SELECT 1 FROM `+s.quotedSchema+`.records WHERE digest = $1 FOR UPDATE`, locked.Lease.Key); err != nil {
		t.Fatal(err)
	}
	var batch []*write
	for i := range 3 {
		w, _ := claimWrite(s, req("t1", newDigest(t), fmt.Sprintf("h%d", i), time.Minute), fmt.Sprintf("tok%d", i))
		batch = append(batch, w)
	}
	blocked, _ := claimWrite(s, req("t1", locked.Lease.Key, "late", time.Minute), "tok-late")
	batch = append(batch, blocked)
	s.writeBatch(batch)
	for _, w := range batch {
		if err := <-w.done; err == nil || errors.Is(err, pgx.ErrNoRows) {
			t.Fatalf("claim %s: %v, want the batch's failure", w.digest, err)
		}
	}
	if n := rowCount(t, s, "holder LIKE 'h%'"); n != 0 {
		t.Fatalf("%d rows of the failed batch were written", n)
	}
	if st := s.BatchStats(); st.Batches != 1 || st.Retried != 0 {
		t.Fatalf("stats %+v: want one batch, not run again (its outcome was unknown)", st)
	}
}

// TestBatchWritersFollowThePool: by default a store runs up to four batch
// writers but no more than half its pool's connections, and at least one; a
// number given is kept.
// TestDefaultBatchWriters: one writer per two CPUs, at least one, at most
// DefaultBatchWriters, and no more than half the pool's connections.
func TestDefaultBatchWriters(t *testing.T) {
	for _, tt := range []struct{ conns, procs, want int }{
		{conns: 32, procs: 1, want: 1},
		{conns: 32, procs: 2, want: 1},
		{conns: 32, procs: 4, want: 2},
		{conns: 32, procs: 8, want: 4},
		{conns: 32, procs: 64, want: DefaultBatchWriters},
		{conns: 4, procs: 64, want: 2},
		{conns: 1, procs: 64, want: 1},
	} {
		if got := defaultBatchWriters(tt.conns, tt.procs); got != tt.want {
			t.Errorf("%d connections, %d CPUs: %d writers, want %d", tt.conns, tt.procs, got, tt.want)
		}
	}
}

func TestBatchWritersFollowThePool(t *testing.T) {
	url := testenv.PostgresURL(t)
	for _, tt := range []struct {
		conns   int32
		give    int
		writers int
	}{
		{conns: 1, writers: 1},
		{conns: 4, writers: defaultBatchWriters(4, runtime.GOMAXPROCS(0))},
		{conns: 16, writers: defaultBatchWriters(16, runtime.GOMAXPROCS(0))},
		{conns: 4, give: 3, writers: 3},
	} {
		cfg, err := pgxpool.ParseConfig(url)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = tt.conns
		pool, err := pgxpool.NewWithConfig(ctx(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(ctx(t), pool, Config{SweepInterval: -1, BatchWriters: tt.give})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Config().BatchWriters; got != tt.writers {
			t.Errorf("pool of %d, %d asked: %d writers, want %d", tt.conns, tt.give, got, tt.writers)
		}
		_ = s.Close()
		pool.Close()
	}
}

// TestGroupCommitEndedContextWritesNothing: a claim whose context has already
// ended is refused and never queued, so no claim is written behind a caller
// told that it failed (once, half of such claims were written: a select
// between a free writer and the ended context picked either).
func TestGroupCommitEndedContextWritesNothing(t *testing.T) {
	s := newTestStore(t, Config{MaxBatch: 64})
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 40 {
		r := req("t1", newDigest(t), fmt.Sprintf("w%d", i), time.Minute)
		if _, err := s.Claim(ended, r); !errors.Is(err, context.Canceled) {
			t.Fatalf("claim %d with an ended context: %v, want context.Canceled", i, err)
		}
		if _, err := s.Get(ctx(t), r.Tenant, r.Key); !errors.Is(err, kvstore.ErrNotFound) {
			t.Fatalf("claim %d with an ended context was written: Get says %v", i, err)
		}
	}
}
