package pgstore

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
)

// Tests of the watched mark: writes notify exactly the records a waiter watches,
// and no interleaving of a waiter's mark with a write loses the wake-up. Stores
// here re-check once an hour, so a Wait that returns within recv's 30 s proves a
// notification (or the listener's wake-up on LISTEN), not the safety net.

// listenConn returns a connection of its own that LISTENs on s's channel, closed
// at cleanup.
func listenConn(t *testing.T, s *Store) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx(t), testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(ctx(t)) })
	if _, err := conn.Exec(ctx(t), "LISTEN "+pgx.Identifier{s.cfg.Channel}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return conn
}

// notifiedSince returns the payloads conn received on s's channel since the last
// call: it sends a sentinel notification and collects what arrives before it.
// Notifications reach a listener in commit order, so every write committed
// before this call is accounted for, and no timer is involved.
func notifiedSince(t *testing.T, s *Store, conn *pgx.Conn) []string {
	t.Helper()
	sentinel := "sentinel-" + randHex(t, 8)
	if _, err := s.pool.Exec(ctx(t), `SELECT pg_notify($1, $2)`, s.cfg.Channel, sentinel); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		n, err := conn.WaitForNotification(ctx(t))
		if err != nil {
			t.Fatalf("waiting for notifications: %v", err)
		}
		if n.Payload == sentinel {
			return got
		}
		got = append(got, n.Payload)
	}
}

// isWatched reports whether the row of digest carries the watched mark.
func isWatched(t *testing.T, s *Store, digest string) bool {
	t.Helper()
	return rowCount(t, s, "digest = $1 AND watched", digest) == 1
}

// goWatch starts a Wait on seen and returns once the waiter has marked the row
// watched: any write from then on must wake it.
func goWatch(t *testing.T, s *Store, seen kvstore.Record) <-chan waitResult {
	t.Helper()
	waiting := goWait(t, s, ctx(t), seen)
	wait.Eventually(t, waitLimit, "the waiter to mark the row watched", func() bool { return isWatched(t, s, seen.Key) })
	return waiting
}

// checkWoken fails unless a background Wait on seen returned a record other than
// seen, or ErrNotFound.
func checkWoken(t *testing.T, seen kvstore.Record, waiting <-chan waitResult) {
	t.Helper()
	r := recv(t, waiting)
	switch {
	case errors.Is(r.err, kvstore.ErrNotFound):
	case r.err != nil:
		t.Fatalf("Wait: %v", r.err)
	case r.rec.Revision == seen.Revision && r.rec.State == seen.State && !r.rec.LeaseExpired:
		t.Fatalf("Wait returned the record it was waiting on: %+v", r.rec)
	}
}

// startListener starts s's listener and waits until it listens, so that its
// wake-up of every waiter on LISTEN cannot rescue a waiter that a test means to
// leave to notifications.
func startListener(t *testing.T, s *Store) {
	t.Helper()
	d := newDigest(t)
	defer s.lis.unregister(d, s.lis.register(d)) // registering starts the listener
	wait.Eventually(t, waitLimit, "the listener to listen", func() bool { return s.lis.listeningPID() != 0 })
}

// expireLease makes the lease of digest run out behind the store's back (no
// notification).
func expireLease(t *testing.T, s *Store, digest string) {
	t.Helper()
	if n := rawExec(t, s, `UPDATE {t} SET lease_until = now() WHERE digest = $1`, digest); n != 1 {
		t.Fatalf("expiring the lease touched %d rows", n)
	}
}

// writeCase is a write a waiter may wait for. prepare makes a record of tenant for
// it and returns the record as a waiter would see it, and the write.
type writeCase struct {
	name    string
	prepare func(t *testing.T, s *Store, tenant string) (seen kvstore.Record, write func(t *testing.T))
}

// parked claims a key of tenant and marks it indeterminate.
func parked(t *testing.T, s *Store, tenant string) kvstore.Record {
	t.Helper()
	res := mustClaim(t, s, req(tenant, newDigest(t), "w1", time.Hour))
	if err := s.MarkIndeterminate(ctx(t), res.Lease, "holder_lost", false); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(ctx(t), tenant, res.Record.Key)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

var writeCases = []writeCase{
	{"record", func(t *testing.T, s *Store, tenant string) (kvstore.Record, func(*testing.T)) {
		res := mustClaim(t, s, req(tenant, newDigest(t), "w1", time.Hour))
		return res.Record, func(t *testing.T) {
			if err := s.Record(ctx(t), res.Lease, "done"); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{"release", func(t *testing.T, s *Store, tenant string) (kvstore.Record, func(*testing.T)) {
		res := mustClaim(t, s, req(tenant, newDigest(t), "w1", time.Hour))
		return res.Record, func(t *testing.T) {
			if err := s.Release(ctx(t), res.Lease); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{"mark indeterminate", func(t *testing.T, s *Store, tenant string) (kvstore.Record, func(*testing.T)) {
		res := mustClaim(t, s, req(tenant, newDigest(t), "w1", time.Hour))
		return res.Record, func(t *testing.T) {
			if err := s.MarkIndeterminate(ctx(t), res.Lease, "body_failed", true); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{"renew", func(t *testing.T, s *Store, tenant string) (kvstore.Record, func(*testing.T)) {
		res := mustClaim(t, s, req(tenant, newDigest(t), "w1", time.Hour))
		return res.Record, func(t *testing.T) {
			if _, err := s.Renew(ctx(t), res.Lease, 2*time.Hour); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{"take over", func(t *testing.T, s *Store, tenant string) (kvstore.Record, func(*testing.T)) {
		res := mustClaim(t, s, req(tenant, newDigest(t), "w1", time.Hour))
		return res.Record, func(t *testing.T) {
			// The lease runs out only now, so that a waiter could block on the claim.
			expireLease(t, s, res.Record.Key)
			stale, err := s.Get(ctx(t), tenant, res.Record.Key)
			if err != nil || !stale.LeaseExpired {
				t.Fatalf("Get after the lease ran out: %+v, %v", stale, err)
			}
			if _, err := s.TakeOver(ctx(t), stale, req(tenant, res.Record.Key, "w2", time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{"resolve to completed", func(t *testing.T, s *Store, tenant string) (kvstore.Record, func(*testing.T)) {
		rec := parked(t, s, tenant)
		return rec, func(t *testing.T) {
			if _, err := s.Resolve(ctx(t), tenant, rec.Key, kvstore.Resolution{Outcome: "by hand"}); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{"resolve by release", func(t *testing.T, s *Store, tenant string) (kvstore.Record, func(*testing.T)) {
		rec := parked(t, s, tenant)
		return rec, func(t *testing.T) {
			if _, err := s.Resolve(ctx(t), tenant, rec.Key, kvstore.Resolution{Release: true}); err != nil {
				t.Fatal(err)
			}
		}
	}},
	{"forget", func(t *testing.T, s *Store, tenant string) (kvstore.Record, func(*testing.T)) {
		res := mustClaim(t, s, req(tenant, newDigest(t), "w1", time.Hour))
		// A second record of the tenant that nobody watches: Forget deletes it
		// without notifying.
		mustClaim(t, s, req(tenant, newDigest(t), "w1", time.Hour))
		return res.Record, func(t *testing.T) {
			if n, err := s.Forget(ctx(t), tenant); err != nil || n != 2 {
				t.Fatalf("Forget = %d, %v; want 2", n, err)
			}
		}
	}},
}

func TestWritesNotifyOnlyWatchedRecords(t *testing.T) {
	s := newTestStore(t, Config{RecheckInterval: time.Hour})
	conn := listenConn(t, s)
	for _, wc := range writeCases {
		t.Run(wc.name, func(t *testing.T) {
			t.Run("unwatched", func(t *testing.T) {
				seen, write := wc.prepare(t, s, "t-"+randHex(t, 4))
				write(t)
				if got := notifiedSince(t, s, conn); len(got) != 0 {
					t.Fatalf("writes nobody watches notified %q", got)
				}
				if isWatched(t, s, seen.Key) {
					t.Fatal("a row nobody waited on is marked watched")
				}
			})
			t.Run("watched", func(t *testing.T) {
				seen, write := wc.prepare(t, s, "t-"+randHex(t, 4))
				waiting := goWatch(t, s, seen)
				write(t)
				if got := notifiedSince(t, s, conn); !slices.Equal(got, []string{seen.Key}) {
					t.Fatalf("notified %q, want exactly the watched digest %s", got, seen.Key)
				}
				checkWoken(t, seen, waiting)
			})
		})
	}
	t.Run("claim over an expired watched row", func(t *testing.T) {
		// A record that a waiter watched, then expired (the waiter left at the
		// expiry it had read).
		res := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
		rawExec(t, s, `UPDATE {t} SET watched = true, expires_at = now() WHERE digest = $1`, res.Record.Key)
		again := mustClaim(t, s, req("acme", res.Record.Key, "w2", time.Hour))
		if isWatched(t, s, res.Record.Key) {
			t.Fatal("the new claim kept the old record's watched mark")
		}
		if err := s.Record(ctx(t), again.Lease, "done"); err != nil {
			t.Fatal(err)
		}
		if got := notifiedSince(t, s, conn); len(got) != 0 {
			t.Fatalf("claim and record of an unwatched record notified %q", got)
		}
	})
}

// TestWaitMarkBehindInFlightWrite makes the waiter's mark meet a write that holds
// the row lock, uncommitted: the write sees no mark and does not notify, so the
// waiter must learn the new state from the mark's own UPDATE, which waits for the
// write's commit and returns the row as the write left it.
func TestWaitMarkBehindInFlightWrite(t *testing.T) {
	s := newTestStore(t, Config{RecheckInterval: time.Hour})
	startListener(t, s)
	for _, tt := range []struct {
		name string
		sql  func(l kvstore.Lease) (string, []any)
		want func(t *testing.T, r waitResult)
	}{
		{"record", func(l kvstore.Lease) (string, []any) {
			return s.sql.record, []any{l.Tenant, l.Key, l.Token, s.retention(), s.cfg.Channel, []byte("done")}
		}, func(t *testing.T, r waitResult) {
			if r.err != nil || r.rec.State != kvstore.StateCompleted || r.rec.Outcome != "done" {
				t.Fatalf("Wait = %+v, want the completed record", r)
			}
		}},
		{"release", func(l kvstore.Lease) (string, []any) {
			return s.sql.release, []any{l.Tenant, l.Key, l.Token, s.cfg.Channel}
		}, func(t *testing.T, r waitResult) {
			if !errors.Is(r.err, kvstore.ErrNotFound) {
				t.Fatalf("Wait = %+v, want ErrNotFound", r)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
			tx, err := s.pool.Begin(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx(t)) }()
			sql, args := tt.sql(res.Lease)
			var applied bool
			if err := tx.QueryRow(ctx(t), sql, args...).Scan(&applied); err != nil {
				t.Fatal(err)
			}
			writer := tx.Conn().PgConn().PID()

			waiting := goWait(t, s, ctx(t), res.Record)
			waitBlockedBy(t, s, writer, "the waiter's mark to wait for the write's row lock")
			if err := tx.Commit(ctx(t)); err != nil {
				t.Fatal(err)
			}
			tt.want(t, recv(t, waiting))
		})
	}
}

// TestWriteBehindInFlightMarkNotifies is the other order: a waiter's mark holds
// the row lock, uncommitted, when the write comes. The write waits for the mark's
// commit, then sees it and notifies.
func TestWriteBehindInFlightMarkNotifies(t *testing.T) {
	s := newTestStore(t, Config{RecheckInterval: time.Hour})
	conn := listenConn(t, s)
	res := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
	tx, err := s.pool.Begin(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx(t)) }()
	if _, err := scanRecord(tx.QueryRow(ctx(t), s.sql.watch, "acme", res.Record.Key)); err != nil {
		t.Fatal(err)
	}
	marker := tx.Conn().PgConn().PID()

	recorded := make(chan error, 1)
	go func() { recorded <- s.Record(ctx(t), res.Lease, "done") }()
	waitBlockedBy(t, s, marker, "the write to wait for the mark's row lock")
	if err := tx.Commit(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := <-recorded; err != nil {
		t.Fatal(err)
	}
	if got := notifiedSince(t, s, conn); !slices.Equal(got, []string{res.Record.Key}) {
		t.Fatalf("notified %q, want the digest the mark watches", got)
	}
}

// TestWaitersRacingWritesNeverMissAWakeUp starts waiters and a write on one key
// at the same moment, many times over, on stores whose listener has not started
// yet (the first round of each races the LISTEN too). Every waiter must return
// promptly: the safety net re-reads only once an hour, so a waiter that missed
// its wake-up would block until recv gives up.
func TestWaitersRacingWritesNeverMissAWakeUp(t *testing.T) {
	const (
		stores  = 4
		rounds  = 12
		waiters = 8
	)
	c := ctx(t)
	writes := []struct {
		name string
		do   func(s *Store, l kvstore.Lease) error
	}{
		{"record", func(s *Store, l kvstore.Lease) error { return s.Record(c, l, "done") }},
		{"release", func(s *Store, l kvstore.Lease) error { return s.Release(c, l) }},
		{"mark indeterminate", func(s *Store, l kvstore.Lease) error {
			return s.MarkIndeterminate(c, l, "body_failed", true)
		}},
		{"renew", func(s *Store, l kvstore.Lease) error {
			_, err := s.Renew(c, l, 2*time.Hour)
			return err
		}},
	}
	pool := testPool(t, nil)
	for i := range stores {
		s := openStore(t, pool, Config{RecheckInterval: time.Hour})
		for round := range rounds {
			w := writes[(i+round)%len(writes)]
			res := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Hour))
			start := make(chan struct{})
			results := make([]chan waitResult, waiters)
			for k := range results {
				ch := make(chan waitResult, 1)
				results[k] = ch
				go func() {
					<-start
					r, err := s.Wait(c, res.Record)
					ch <- waitResult{r, err}
				}()
			}
			wrote := make(chan error, 1)
			go func() {
				<-start
				wrote <- w.do(s, res.Lease)
			}()
			close(start)
			if err := <-wrote; err != nil {
				t.Fatalf("store %d round %d: %s: %v", i, round, w.name, err)
			}
			for _, ch := range results {
				checkWoken(t, res.Record, ch)
			}
		}
	}
}

// TestEnsureSchemaAddsWatchedMark migrates a schema that release 2 created, with
// a record in it, and waits on that record.
func TestEnsureSchemaAddsWatchedMark(t *testing.T) {
	pool := testPool(t, nil)
	schema := freshSchema(t)
	q := pgx.Identifier{schema}.Sanitize()
	steps := []string{
		`CREATE SCHEMA ` + q,
		`CREATE TABLE ` + q + `.schema_version (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		strings.ReplaceAll(migrations[0], "{s}", q),
		strings.ReplaceAll(migrations[1], "{s}", q),
		`INSERT INTO ` + q + `.schema_version (version) VALUES (1), (2)`,
	}
	for _, sql := range steps {
		if _, err := pool.Exec(ctx(t), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	d := newDigest(t)
	if _, err := pool.Exec(ctx(t), `INSERT INTO `+q+`.records (tenant, digest, state, holder, token, lease,
		lease_until, revision, created_at, updated_at, expires_at)
		VALUES ('acme', $1, 'claimed', 'w1', 'tok', '1 hour', now() + '1 hour', nextval('`+q+`.revisions'),
		now(), now(), now() + '1 day')`, d); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, pool, Config{Schema: schema, RecheckInterval: time.Hour}) // runs EnsureSchema
	var v int
	if err := pool.QueryRow(ctx(t), `SELECT max(version) FROM `+q+`.schema_version`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	if v != SchemaVersion {
		t.Fatalf("schema at version %d, want %d", v, SchemaVersion)
	}
	seen, err := s.Get(ctx(t), "acme", d)
	if err != nil {
		t.Fatal(err)
	}
	if isWatched(t, s, d) {
		t.Fatal("a migrated row starts watched")
	}
	waiting := goWatch(t, s, seen)
	if err := s.Record(ctx(t), kvstore.Lease{Tenant: "acme", Key: d, Holder: "w1", Token: "tok"}, "done"); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, waiting); r.err != nil || r.rec.State != kvstore.StateCompleted {
		t.Fatalf("Wait = %+v", r)
	}
}
