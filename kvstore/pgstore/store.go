package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/toolexec/kvstore"
)

var (
	_ kvstore.Store  = (*Store)(nil)
	_ kvstore.Lister = (*Store)(nil)
)

// errClosed is what operations on a closed Store return (wrapped in
// kvstore.ErrUnavailable by fail).
var errClosed = errors.New("store is closed")

// claimAttempts bounds Claim's insert-then-read loop. Each extra attempt means the
// row vanished between the two statements (released, resolved or forgotten), which
// is progress by someone else; running out of attempts is reported as unavailable.
const claimAttempts = 32

// Store is a [kvstore.Store] backed by PostgreSQL. Create it with [New]; it is safe
// for concurrent use by many goroutines and many processes sharing a database.
type Store struct {
	pool         *pgxpool.Pool
	cfg          Config
	quotedSchema string
	sql          statements

	closed atomic.Bool
	done   chan struct{}      // closed by Close: stops waiters
	life   context.Context    // cancelled by Close: stops the sweeper and the listener
	stop   context.CancelFunc // cancels life
	bgMu   sync.Mutex         // protects starting background goroutines against Close
	bg     sync.WaitGroup     // the sweeper and the listener

	lis *listener // started by the first Wait

	// Group commit (batch.go): writes hands single-row writes to the batch
	// writers; nil when Config.MaxBatch is 1.
	writes                         chan *write
	batches, batched, batchRetries atomic.Int64
}

// New returns a store over pool, configured by cfg (zero fields take their
// defaults; see [Config]). It does not touch the database — in particular it does
// not create tables: the deployment calls [Store.EnsureSchema] — and it starts the
// background sweeper (unless cfg.SweepInterval is negative). The pool stays the
// caller's: Close does not close it. It returns an error wrapping [ErrBadConfig]
// for an unusable cfg, and ctx.Err() if ctx has already ended.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrBadConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if cfg.BatchWriters == 0 {
		cfg.BatchWriters = defaultBatchWriters(int(pool.Config().MaxConns), runtime.GOMAXPROCS(0))
	}
	s := &Store{
		pool:         pool,
		cfg:          cfg,
		quotedSchema: pgx.Identifier{cfg.Schema}.Sanitize(),
		done:         make(chan struct{}),
	}
	s.life, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	s.sql = buildStatements(s.quotedSchema)
	s.lis = newListener(s)
	if cfg.SweepInterval > 0 {
		s.goBackground(s.sweepLoop)
	}
	if cfg.MaxBatch > 1 {
		s.writes = make(chan *write)
		for range cfg.BatchWriters {
			s.goBackground(s.batchWriter)
		}
	}
	return s, nil
}

// goBackground runs f in a goroutine that Close waits for, unless the store is
// already closed.
func (s *Store) goBackground(f func()) {
	s.bgMu.Lock()
	defer s.bgMu.Unlock()
	if s.closed.Load() {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		f()
	}()
}

// Close stops the background sweeper and the notification listener (closing the
// listener's connection) and makes waiting calls return. Later calls fail with
// kvstore.ErrUnavailable. It does not close the pool. It always returns nil.
func (s *Store) Close() error {
	s.bgMu.Lock()
	if !s.closed.Load() {
		s.closed.Store(true)
		close(s.done)
		s.stop()
	}
	s.bgMu.Unlock()
	s.bg.Wait()
	return nil
}

// Config returns the configuration in use, defaults applied.
func (s *Store) Config() Config { return s.cfg }

// defaultBatchWriters is Config.BatchWriters' default for a pool of maxConns
// connections on procs CPUs.
func defaultBatchWriters(maxConns, procs int) int {
	return max(1, min(DefaultBatchWriters, procs/2, maxConns/2))
}

// statements are the store's SQL, with the schema substituted once by New.
type statements struct {
	claim, get                                string
	record, release, markIndeterminate, renew string
	takeOver, withdraw, forget                string
	resolveDone, resolveDrop                  string
	sweep, dump, list                         string
	waitGet, watch                            string
}

// recordCols is the select list every statement that reads a record returns; see
// scanRecord. The last three columns are judged by the database clock at the time
// of the statement: has the lease run out, and how long until the lease deadline
// and the expiry.
const recordCols = `tenant, digest, state, outcome, reason, body_entered, check_digest,
	tool, run_id, call_id, holder, token, lease, lease_until, revision,
	created_at, updated_at, expires_at,
	lease_until <= now(),
	extract(epoch FROM lease_until - now())::float8,
	extract(epoch FROM expires_at - now())::float8`

// notifyIfWatched is the RETURNING (or WHERE) expression of a write that a
// waiter may be waiting for: it calls pg_notify with the digest on channel, a
// parameter such as "$5", only when the row is marked watched, and is true
// either way. CASE fixes the order of evaluation, so an unwatched row never
// notifies: PostgreSQL serialises the commits of notifying transactions, so a
// write without a waiter must not notify.
func notifyIfWatched(channel string) string {
	return `CASE WHEN watched THEN pg_notify(` + channel + `, digest) IS NOT NULL ELSE true END`
}

// holderWhere fences every holder-only transition: $1 tenant, $2 digest, $3 token.
const holderWhere = `WHERE tenant = $1 AND digest = $2 AND token = $3
	AND state = 'claimed' AND expires_at > now()`

func buildStatements(schema string) statements {
	r := strings.NewReplacer("{t}", schema+".records", "{seq}", schema+".revisions")
	return statements{
		// $1 tenant $2 digest $3 check_digest $4 tool $5 run_id $6 call_id $7 holder
		// $8 token $9 lease $10 retention. It notifies nobody: nobody waits on a
		// row that is absent or expired (a waiter on an expired record wakes at the
		// expiry it read), and the overwritten row's watched mark goes with it.
		//
		// The record comes back with a last column saying whether this statement
		// claimed it: the new row, or else the live row in the way, read in the
		// same statement (saving the loser a second round trip). The read sees
		// the statement's snapshot: a row another transaction committed since
		// (the insert waited for it) is not in it, and then no row comes back at
		// all; Claim reads it with a statement of its own.
		claim: r.Replace(`
WITH claimed AS (
INSERT INTO {t} AS r (tenant, digest, state, check_digest, tool, run_id, call_id, holder,
	token, lease, lease_until, revision, created_at, updated_at, expires_at)
VALUES ($1, $2, 'claimed', $3, $4, $5, $6, $7,
	$8, $9::interval, now() + $9::interval, nextval('{seq}'), now(), now(), now() + $10::interval)
ON CONFLICT (tenant, digest) DO UPDATE SET
	state = 'claimed', outcome = ''::bytea, reason = '', body_entered = false,
	check_digest = excluded.check_digest, tool = excluded.tool, run_id = excluded.run_id,
	call_id = excluded.call_id, holder = excluded.holder, token = excluded.token,
	lease = excluded.lease, lease_until = excluded.lease_until, revision = excluded.revision,
	created_at = excluded.created_at, updated_at = excluded.updated_at,
	expires_at = excluded.expires_at, watched = false
WHERE r.expires_at <= now()
RETURNING ` + recordCols + `
)
SELECT *, true FROM claimed
UNION ALL
SELECT ` + recordCols + `, false FROM {t}
WHERE tenant = $1 AND digest = $2 AND expires_at > now() AND NOT EXISTS (SELECT FROM claimed)`),

		get: r.Replace(`SELECT ` + recordCols + ` FROM {t}
WHERE tenant = $1 AND digest = $2 AND expires_at > now()`),

		// $4 retention $5 channel $6 outcome
		record: r.Replace(`UPDATE {t} SET state = 'completed', outcome = $6,
	revision = nextval('{seq}'), updated_at = now(), expires_at = now() + $4::interval
` + holderWhere + `
RETURNING ` + notifyIfWatched("$5")),

		// $4 channel
		release: r.Replace(`DELETE FROM {t} ` + holderWhere + `
RETURNING ` + notifyIfWatched("$4")),

		// $4 retention $5 channel $6 reason $7 body_entered
		markIndeterminate: r.Replace(`UPDATE {t} SET state = 'indeterminate', reason = $6,
	body_entered = $7, revision = nextval('{seq}'), updated_at = now(),
	expires_at = now() + $4::interval
` + holderWhere + `
RETURNING ` + notifyIfWatched("$5")),

		// $4 retention $5 channel $6 lease
		renew: r.Replace(`UPDATE {t} SET lease = $6::interval, lease_until = now() + $6::interval,
	revision = nextval('{seq}'), updated_at = now(), expires_at = now() + $4::interval
` + holderWhere + `
RETURNING ` + notifyIfWatched("$5")),

		// $1 tenant $2 digest $3 seen revision $4 seen holder $5 retention $6 channel
		// $7 holder $8 token $9 lease $10 check_digest $11 tool $12 run_id $13 call_id
		takeOver: r.Replace(`UPDATE {t} SET holder = $7, token = $8, lease = $9::interval,
	lease_until = now() + $9::interval, check_digest = $10, tool = $11, run_id = $12,
	call_id = $13, revision = nextval('{seq}'), updated_at = now(),
	expires_at = now() + $5::interval
WHERE tenant = $1 AND digest = $2 AND revision = $3 AND holder = $4
	AND state = 'claimed' AND lease_until <= now() AND expires_at > now()
RETURNING ` + notifyIfWatched("$6")),

		// $1 tenant $2 digest $3 seen revision $4 holder $5 channel
		withdraw: r.Replace(`DELETE FROM {t}
WHERE tenant = $1 AND digest = $2 AND revision = $3 AND holder = $4
	AND state = 'claimed' AND expires_at > now()
RETURNING ` + notifyIfWatched("$5")),

		// $1 tenant $2 channel. Counts the live rows it removed; expired ones go too.
		forget: r.Replace(`WITH gone AS (
	DELETE FROM {t} WHERE tenant = $1 RETURNING digest, watched, expires_at > now() AS live
)
SELECT count(*) FILTER (WHERE live) FROM gone WHERE ` + notifyIfWatched("$2")),

		// $1 tenant $2 digest $3 retention $4 channel $5 outcome
		resolveDone: r.Replace(`UPDATE {t} SET state = 'completed', outcome = $5, reason = '',
	body_entered = false, revision = nextval('{seq}'), updated_at = now(),
	expires_at = now() + $3::interval
WHERE tenant = $1 AND digest = $2 AND state = 'indeterminate' AND expires_at > now()
RETURNING ` + recordCols + `, ` + notifyIfWatched("$4")),

		// $1 tenant $2 digest $3 channel
		resolveDrop: r.Replace(`DELETE FROM {t}
WHERE tenant = $1 AND digest = $2 AND state = 'indeterminate' AND expires_at > now()
RETURNING ` + recordCols + `, ` + notifyIfWatched("$3")),

		// $1 tenant $2 digest: a waiter's read, with the row's watched mark.
		waitGet: r.Replace(`SELECT ` + recordCols + `, watched FROM {t}
WHERE tenant = $1 AND digest = $2 AND expires_at > now()`),

		// $1 tenant $2 digest: a waiter marks the row watched before it blocks (see
		// Store.watch). Only the mark changes: not the revision, not the times.
		watch: r.Replace(`UPDATE {t} SET watched = true
WHERE tenant = $1 AND digest = $2 AND expires_at > now()
RETURNING ` + recordCols),

		// $1 batch size
		sweep: r.Replace(`DELETE FROM {t} WHERE ctid IN (
	SELECT ctid FROM {t} WHERE expires_at <= now() LIMIT $1 FOR UPDATE SKIP LOCKED
) AND expires_at <= now()`),

		// $1 tenant $2 state $3 limit (NULL: all)
		list: r.Replace(`SELECT ` + recordCols + ` FROM {t}
WHERE tenant = $1 AND state = $2 AND expires_at > now()
ORDER BY updated_at, digest LIMIT $3`),

		// $1 tenant
		dump: r.Replace(`SELECT (to_jsonb(r) || jsonb_build_object('outcome', encode(r.outcome, 'escape')))::text
FROM {t} r WHERE tenant = $1 AND expires_at > now() ORDER BY digest`),
	}
}

// row is a record as read, with what the database said about time.
type row struct {
	rec        kvstore.Record
	token      string
	leaseLeft  time.Duration // lease_until - now(), by the database clock
	expireLeft time.Duration // expires_at - now(), by the database clock
}

// scanRecord reads recordCols (plus any extra destinations) from one result row.
func scanRecord(sc pgx.Row, extra ...any) (row, error) {
	var (
		r                    row
		outcome              []byte
		state                string
		rev                  int64
		leaseLeft, expireLft float64
	)
	dest := []any{
		&r.rec.Tenant, &r.rec.Key, &state, &outcome, &r.rec.Reason, &r.rec.BodyEntered,
		&r.rec.CheckDigest, &r.rec.Tool, &r.rec.RunID, &r.rec.CallID, &r.rec.Holder, &r.token,
		&r.rec.Lease, &r.rec.LeaseUntil, &rev, &r.rec.CreatedAt, &r.rec.UpdatedAt,
		&r.rec.ExpiresAt, &r.rec.LeaseExpired, &leaseLeft, &expireLft,
	}
	if err := sc.Scan(append(dest, extra...)...); err != nil {
		return row{}, err
	}
	r.rec.State = kvstore.State(state)
	r.rec.Outcome = string(outcome)
	r.rec.Revision = uint64(rev)
	// LeaseExpired only means something for a claim.
	r.rec.LeaseExpired = r.rec.LeaseExpired && r.rec.State == kvstore.StateClaimed
	r.leaseLeft = seconds(leaseLeft)
	r.expireLeft = seconds(expireLft)
	return r, nil
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// newToken returns a random fencing token for a claim.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// bound limits ctx to Config.OpTimeout, for one operation's round trips to the
// database: a database that stops answering (a black-holed network, a hung
// server) then fails the operation with kvstore.ErrUnavailable instead of
// blocking it for as long as the caller's context allows, which may be forever.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.cfg.OpTimeout < 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.cfg.OpTimeout)
}

func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return errClosed
	}
	return nil
}

// Claim creates the record in kvstore.StateClaimed if no live record exists, in one
// INSERT ... ON CONFLICT statement judged by the database clock: a row whose
// retention has run out is overwritten as if absent; any other row is left alone
// — including a claim whose lease has run out (that is TakeOver's) — and returned,
// with LeaseExpired as the database judged it: read by the same statement, or by
// a second one when it was committed while the first ran. It
// returns kvstore.ErrInvalid for a malformed request and an error wrapping
// kvstore.ErrUnavailable if the database cannot be reached; it never reports a
// claim it did not make.
func (s *Store) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	res, err := s.claim(ctx, req)
	return res, s.fail("claim", err)
}

func (s *Store) claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := req.Validate(); err != nil {
		return kvstore.ClaimResult{}, err
	}
	if err := checkClaimText(req); err != nil {
		return kvstore.ClaimResult{}, err
	}
	if err := s.checkOpen(); err != nil {
		return kvstore.ClaimResult{}, err
	}
	token, err := newToken()
	if err != nil {
		return kvstore.ClaimResult{}, err
	}
	lease := micros(req.Lease)
	for range claimAttempts {
		var (
			r       row
			claimed bool
		)
		err := s.queryRow(ctx, req.Tenant, req.Key, s.sql.claim,
			[]any{req.Tenant, req.Key, req.CheckDigest, req.Tool, req.RunID, req.CallID,
				req.Holder, token, lease, s.retention()},
			func(q pgx.Row) (err error) { r, err = scanRecord(q, &claimed); return err })
		switch {
		case err == nil && claimed:
			return kvstore.ClaimResult{
				Claimed: true,
				Lease:   kvstore.Lease{Tenant: req.Tenant, Key: req.Key, Holder: req.Holder, Token: token},
				Record:  r.rec,
			}, nil
		case err == nil:
			return kvstore.ClaimResult{Record: r.rec}, nil // the live row in the way
		case !errors.Is(err, pgx.ErrNoRows):
			return kvstore.ClaimResult{}, err
		}
		// A live row committed after the statement began is in the way. Read
		// it; if it vanished meanwhile, try again.
		r, err = s.get(ctx, req.Tenant, req.Key)
		switch {
		case err == nil:
			return kvstore.ClaimResult{Record: r.rec}, nil
		case !errors.Is(err, kvstore.ErrNotFound):
			return kvstore.ClaimResult{}, err
		}
	}
	return kvstore.ClaimResult{}, fmt.Errorf("record kept changing under %d attempts", claimAttempts)
}

// Get returns the live record for the key, with LeaseExpired as the database
// judges it, or kvstore.ErrNotFound (never claimed, released, expired — swept or
// not — or forgotten).
func (s *Store) Get(ctx context.Context, tenant, digest string) (kvstore.Record, error) {
	if err := kvstore.CheckKey(tenant, digest); err != nil {
		return kvstore.Record{}, s.fail("get", err)
	}
	r, err := s.get(ctx, tenant, digest)
	return r.rec, s.fail("get", err)
}

func (s *Store) get(ctx context.Context, tenant, digest string) (row, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.checkOpen(); err != nil {
		return row{}, err
	}
	r, err := scanRecord(s.pool.QueryRow(ctx, s.sql.get, tenant, digest))
	if errors.Is(err, pgx.ErrNoRows) {
		return row{}, kvstore.ErrNotFound
	}
	return r, err
}

// holderOp runs one fenced holder transition: a statement whose WHERE is
// holderWhere and which returns one row if it applied. Zero rows → ErrNotHolder.
func (s *Store) holderOp(ctx context.Context, lease kvstore.Lease, query string, args ...any) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := lease.Validate(); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	var applied bool
	err := s.queryRow(ctx, lease.Tenant, lease.Key, query,
		append([]any{lease.Tenant, lease.Key, lease.Token}, args...),
		func(q pgx.Row) error { return q.Scan(&applied) })
	if errors.Is(err, pgx.ErrNoRows) {
		return kvstore.ErrNotHolder
	}
	return err
}

// Record stores outcome and moves the claim to kvstore.StateCompleted, in one
// UPDATE fenced by the lease's token. It returns kvstore.ErrNotHolder if the lease
// is no longer current (taken over, released, recorded, marked, or the record
// expired) and kvstore.ErrTooLarge if outcome exceeds Config.MaxOutcomeBytes.
func (s *Store) Record(ctx context.Context, lease kvstore.Lease, outcome string) error {
	if len(outcome) > s.cfg.MaxOutcomeBytes {
		return s.fail("record", fmt.Errorf("%w: outcome of %d bytes exceeds %d",
			kvstore.ErrTooLarge, len(outcome), s.cfg.MaxOutcomeBytes))
	}
	return s.fail("record", s.holderOp(ctx, lease, s.sql.record,
		s.retention(), s.cfg.Channel, []byte(outcome)))
}

// Release deletes the claim so that the key is free again. It returns
// kvstore.ErrNotHolder if the lease is no longer current.
func (s *Store) Release(ctx context.Context, lease kvstore.Lease) error {
	return s.fail("release", s.holderOp(ctx, lease, s.sql.release, s.cfg.Channel))
}

// MarkIndeterminate parks the claim in kvstore.StateIndeterminate with reason. It
// returns kvstore.ErrNotHolder if the lease is no longer current, and
// kvstore.ErrTooLarge for a reason longer than [MaxReasonBytes].
func (s *Store) MarkIndeterminate(ctx context.Context, lease kvstore.Lease, reason string, bodyEntered bool) error {
	if len(reason) > MaxReasonBytes {
		return s.fail("mark indeterminate", fmt.Errorf("%w: reason of %d bytes exceeds %d",
			kvstore.ErrTooLarge, len(reason), MaxReasonBytes))
	}
	if err := checkText("reason", reason); err != nil {
		return s.fail("mark indeterminate", err)
	}
	return s.fail("mark indeterminate", s.holderOp(ctx, lease, s.sql.markIndeterminate,
		s.retention(), s.cfg.Channel, reason, bodyEntered))
}

// Renew sets the lease deadline to the database's now() plus d and returns the lease
// to use from then on (this store keeps the token, so earlier copies stay valid).
// It returns kvstore.ErrNotHolder if the lease is no longer current and
// kvstore.ErrInvalid for a non-positive d.
func (s *Store) Renew(ctx context.Context, lease kvstore.Lease, d time.Duration) (kvstore.Lease, error) {
	if err := kvstore.CheckLeaseDuration(d); err != nil {
		return kvstore.Lease{}, s.fail("renew", err)
	}
	if err := s.holderOp(ctx, lease, s.sql.renew, s.retention(), s.cfg.Channel, micros(d)); err != nil {
		return kvstore.Lease{}, s.fail("renew", err)
	}
	return lease, nil
}

// TakeOver replaces the claim seen in seen with a new claim for req.Holder, in one
// UPDATE that compares seen.Revision and seen.Holder and checks, by the database
// clock, that the lease has run out. It returns kvstore.ErrLeaseHeld if the lease
// has not run out or the record changed since seen was read, kvstore.ErrNotFound if
// the record is gone, and kvstore.ErrInvalid for a malformed seen or req, or a req
// that names another key than seen (see kvstore.ClaimRequest.ValidateTakeOver).
func (s *Store) TakeOver(ctx context.Context, seen kvstore.Record, req kvstore.ClaimRequest) (kvstore.Lease, error) {
	l, err := s.takeOver(ctx, seen, req)
	return l, s.fail("take over", err)
}

func (s *Store) takeOver(ctx context.Context, seen kvstore.Record, req kvstore.ClaimRequest) (kvstore.Lease, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := req.ValidateTakeOver(seen); err != nil {
		return kvstore.Lease{}, err
	}
	if err := checkClaimText(req); err != nil {
		return kvstore.Lease{}, err
	}
	if err := s.checkOpen(); err != nil {
		return kvstore.Lease{}, err
	}
	token, err := newToken()
	if err != nil {
		return kvstore.Lease{}, err
	}
	var applied bool
	err = s.pool.QueryRow(ctx, s.sql.takeOver,
		req.Tenant, req.Key, int64(seen.Revision), seen.Holder, s.retention(), s.cfg.Channel,
		req.Holder, token, micros(req.Lease), req.CheckDigest, req.Tool, req.RunID, req.CallID,
	).Scan(&applied)
	if err == nil {
		return kvstore.Lease{Tenant: req.Tenant, Key: req.Key, Holder: req.Holder, Token: token}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return kvstore.Lease{}, err
	}
	// Not applied: gone, or still held / changed.
	if _, err := s.get(ctx, req.Tenant, req.Key); err != nil {
		return kvstore.Lease{}, err
	}
	return kvstore.Lease{}, kvstore.ErrLeaseHeld
}

// Withdraw deletes the claim seen, in one DELETE that compares its revision,
// holder and state, whatever its lease: see kvstore.Withdrawer. It returns
// kvstore.ErrNotHolder if the record changed since seen, kvstore.ErrNotFound if
// it is gone and kvstore.ErrInvalid for a seen that is not a claim of holder.
func (s *Store) Withdraw(ctx context.Context, seen kvstore.Record, holder string) error {
	return s.fail("withdraw", s.withdraw(ctx, seen, holder))
}

func (s *Store) withdraw(ctx context.Context, seen kvstore.Record, holder string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := kvstore.ValidateWithdraw(seen, holder); err != nil {
		return err
	}
	if err := checkText("holder", holder); err != nil {
		return err
	}
	if err := s.checkOpen(); err != nil {
		return err
	}
	var applied bool
	err := s.pool.QueryRow(ctx, s.sql.withdraw,
		seen.Tenant, seen.Key, int64(seen.Revision), holder, s.cfg.Channel).Scan(&applied)
	if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	// Not applied: gone, or changed.
	if _, err := s.get(ctx, seen.Tenant, seen.Key); err != nil {
		return err
	}
	return kvstore.ErrNotHolder
}

// Forget deletes every record of tenant in one DELETE statement and returns how many
// live records it removed (expired rows of the tenant are deleted too, uncounted).
// Other tenants' records are untouched.
func (s *Store) Forget(ctx context.Context, tenant string) (int64, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := kvstore.CheckTenant(tenant); err != nil {
		return 0, s.fail("forget", err)
	}
	if err := s.checkOpen(); err != nil {
		return 0, s.fail("forget", err)
	}
	var n int64
	err := s.pool.QueryRow(ctx, s.sql.forget, tenant, s.cfg.Channel).Scan(&n)
	return n, s.fail("forget", err)
}

// Resolve applies an operator's decision to an indeterminate record in one
// statement: an UPDATE to kvstore.StateCompleted with res.Outcome (returning the
// record as it now is), or for res.Release a DELETE (returning the record as it
// was). It returns kvstore.ErrNotIndeterminate for a record in another state,
// kvstore.ErrNotFound if there is none, and kvstore.ErrTooLarge for an outcome
// over Config.MaxOutcomeBytes.
func (s *Store) Resolve(ctx context.Context, tenant, digest string, res kvstore.Resolution) (kvstore.Record, error) {
	r, err := s.resolve(ctx, tenant, digest, res)
	return r, s.fail("resolve", err)
}

func (s *Store) resolve(ctx context.Context, tenant, digest string, res kvstore.Resolution) (kvstore.Record, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := kvstore.CheckKey(tenant, digest); err != nil {
		return kvstore.Record{}, err
	}
	if !res.Release && len(res.Outcome) > s.cfg.MaxOutcomeBytes {
		return kvstore.Record{}, fmt.Errorf("%w: outcome of %d bytes exceeds %d",
			kvstore.ErrTooLarge, len(res.Outcome), s.cfg.MaxOutcomeBytes)
	}
	if err := s.checkOpen(); err != nil {
		return kvstore.Record{}, err
	}
	var (
		q       pgx.Row
		applied bool
	)
	if res.Release {
		q = s.pool.QueryRow(ctx, s.sql.resolveDrop, tenant, digest, s.cfg.Channel)
	} else {
		q = s.pool.QueryRow(ctx, s.sql.resolveDone, tenant, digest, s.retention(), s.cfg.Channel, []byte(res.Outcome))
	}
	r, err := scanRecord(q, &applied)
	if err == nil {
		return r.rec, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return kvstore.Record{}, err
	}
	if _, err := s.get(ctx, tenant, digest); err != nil {
		return kvstore.Record{}, err
	}
	return kvstore.Record{}, kvstore.ErrNotIndeterminate
}

// List returns up to limit of the tenant's live records in state, oldest first
// by updated_at (limit ≤ 0: all of them), with LeaseExpired as the database
// judges it, in one statement (indeterminate records through their own partial
// index, from schema version 2). It returns kvstore.ErrInvalid for a malformed
// tenant or an unknown state and an error wrapping kvstore.ErrUnavailable when
// the database cannot be reached. It implements kvstore.Lister.
func (s *Store) List(ctx context.Context, tenant string, state kvstore.State, limit int) ([]kvstore.Record, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := kvstore.CheckTenant(tenant); err != nil {
		return nil, s.fail("list", err)
	}
	if err := state.Validate(); err != nil {
		return nil, s.fail("list", err)
	}
	if err := s.checkOpen(); err != nil {
		return nil, s.fail("list", err)
	}
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, s.sql.list, tenant, string(state), lim)
	if err != nil {
		return nil, s.fail("list", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (kvstore.Record, error) {
		rec, err := scanRecord(r)
		return rec.rec, err
	})
	return out, s.fail("list", err)
}

// DumpRaw returns each of the tenant's live rows exactly as the table holds them,
// rendered as JSON text: one object per row, keyed by column name, with the outcome
// (stored as bytes) shown with PostgreSQL's escape encoding so that any text in it
// is visible as is. It is for operators, and for the conformance suite's check that
// no row holds a call's arguments (kvstoretest.RawDumper).
func (s *Store) DumpRaw(ctx context.Context, tenant string) ([][]byte, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := kvstore.CheckTenant(tenant); err != nil {
		return nil, s.fail("dump", err)
	}
	if err := s.checkOpen(); err != nil {
		return nil, s.fail("dump", err)
	}
	rows, err := s.pool.Query(ctx, s.sql.dump, tenant)
	if err != nil {
		return nil, s.fail("dump", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) ([]byte, error) {
		var b []byte
		err := r.Scan(&b)
		return b, err
	})
	return out, s.fail("dump", err)
}

func (s *Store) retention() time.Duration { return micros(s.cfg.Retention) }
