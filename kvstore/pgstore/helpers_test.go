package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
)

// testPool connects to the test database (skipping, or failing under CI=true, when
// PostgreSQL is missing) and closes the pool at cleanup. tracer may be nil.
func testPool(t *testing.T, tracer pgx.QueryTracer) *pgxpool.Pool {
	t.Helper()
	url := testenv.PostgresURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatalf("parse %q: %v", url, err)
	}
	cfg.MaxConns = 16
	cfg.ConnConfig.Tracer = tracer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("ping %s: %v", url, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// freshSchema returns a new schema name and drops that schema at cleanup, over a
// connection of its own (the test may have closed its pool).
func freshSchema(t testing.TB) string {
	t.Helper()
	url := testenv.PostgresURL(t)
	name := "pgstore_t_" + randHex(t, 8)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+name+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// openStore creates a store over pool in cfg.Schema (a fresh schema if empty),
// runs EnsureSchema and closes the store at cleanup.
func openStore(t *testing.T, pool *pgxpool.Pool, cfg Config) *Store {
	t.Helper()
	if cfg.Schema == "" {
		cfg.Schema = freshSchema(t)
	}
	if cfg.SweepInterval == 0 {
		cfg.SweepInterval = -1 // tests sweep explicitly unless they say otherwise
	}
	s, err := New(ctx(t), pool, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.EnsureSchema(ctx(t)); err != nil {
		t.Fatalf("EnsureSchema: %v", err)
	}
	return s
}

// newTestStore is openStore on a pool of its own.
func newTestStore(t *testing.T, cfg Config) *Store {
	t.Helper()
	return openStore(t, testPool(t, nil), cfg)
}

// ctx returns a context that ends with the test (or after 60 s).
func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func randHex(t testing.TB, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func newDigest(t *testing.T) string { t.Helper(); return randHex(t, 32) }

func req(tenant, digest, holder string, lease time.Duration) kvstore.ClaimRequest {
	return kvstore.ClaimRequest{
		Tenant: tenant, Key: digest, Holder: holder, Lease: lease,
		CheckDigest: "cd-" + holder, Tool: "book", RunID: "run_1", CallID: "call-" + holder,
	}
}

// mustClaim claims a fresh key and fails the test unless it got it.
func mustClaim(t *testing.T, s *Store, r kvstore.ClaimRequest) kvstore.ClaimResult {
	t.Helper()
	res, err := s.Claim(ctx(t), r)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if !res.Claimed {
		t.Fatalf("Claim: not claimed, existing record %+v", res.Record)
	}
	return res
}

// waitLimit is how long these tests wait for what they poll.
const waitLimit = 20 * time.Second

// rawExec runs SQL against the store's schema; {t} stands for the records table
// and {seq} for the revision sequence.
func rawExec(t *testing.T, s *Store, sql string, args ...any) int64 {
	t.Helper()
	sql = strings.NewReplacer("{t}", s.quotedSchema+".records", "{seq}", s.quotedSchema+".revisions").Replace(sql)
	tag, err := s.pool.Exec(ctx(t), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return tag.RowsAffected()
}

// rowCount counts the rows in the store's table, expired ones included.
func rowCount(t *testing.T, s *Store, where string, args ...any) int64 {
	t.Helper()
	var n int64
	q := `SELECT count(*) FROM ` + s.quotedSchema + `.records`
	if where != "" {
		q += " WHERE " + where
	}
	if err := s.pool.QueryRow(ctx(t), q, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// waitRegistered blocks until the listener is listening and a waiter for digest is
// registered, so that a write made afterwards can only reach it by notification or
// by a re-read.
func waitRegistered(t *testing.T, s *Store, digest string) {
	t.Helper()
	wait.Eventually(t, waitLimit, "waiter registered and listener listening", func() bool {
		s.lis.mu.Lock()
		defer s.lis.mu.Unlock()
		return s.lis.pid != 0 && len(s.lis.waiters[digest]) > 0
	})
}

// countingTracer counts the statements that contain a marker.
type countingTracer struct {
	marker string
	n      atomic.Int64
}

func (c *countingTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if strings.Contains(d.SQL, c.marker) {
		c.n.Add(1)
	}
	return ctx
}

func (c *countingTracer) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// waitResult is what a background Wait returned.
type waitResult struct {
	rec kvstore.Record
	err error
}

// goWait runs Wait in the background.
func goWait(t *testing.T, s *Store, c context.Context, seen kvstore.Record) <-chan waitResult {
	t.Helper()
	ch := make(chan waitResult, 1)
	go func() {
		r, err := s.Wait(c, seen)
		ch <- waitResult{r, err}
	}()
	return ch
}

// recv waits up to 30 s for a background Wait to return.
func recv(t *testing.T, ch <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("Wait did not return within 30s")
		return waitResult{}
	}
}

// waitBlockedBy waits until some backend waits for a lock that the backend
// with process id pid holds: what describes.
func waitBlockedBy(t *testing.T, s *Store, pid uint32, what string) {
	t.Helper()
	wait.Eventually(t, waitLimit, what, func() bool {
		var n int
		if err := s.pool.QueryRow(ctx(t), `SELECT count(*) FROM pg_stat_activity
			WHERE $1::int = ANY(pg_blocking_pids(pid))`, int32(pid)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	})
}
