package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// DefaultRetention is how long a record lives after its last write when
// [Config.Retention] is zero.
const DefaultRetention = 24 * time.Hour

// sweepBatch bounds how many expired records one write removes. A write adds
// at most one record to the expiry list and removes up to this many, so a
// backlog (the clock moved a long way at once) drains within a few writes
// without any one write paying for all of it.
const sweepBatch = 16

// timerSlack bounds how late a Wait's timer may fire because the clock moved while
// the timer was being armed (a fake clock advanced by another goroutine). A timer
// armed while the clock moved further than this is armed again.
const timerSlack = time.Millisecond

// Clock tells a [Store] the time and makes its timers. The module's test clock
// (a fake that moves only when told to) satisfies it, and so does the wall
// clock the store uses by default.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a timer of a [Clock]: C delivers the time once it fires, and Stop
// prevents it from firing, reporting whether it did.
type Timer = interface {
	C() <-chan time.Time
	Stop() bool
}

// wallClock is the default [Clock].
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

// wallTimer is a *time.Timer as a [Timer].
type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time { return w.t.C }
func (w wallTimer) Stop() bool          { return w.t.Stop() }

// Config configures a [Store]. The zero value is usable.
type Config struct {
	// Clock judges leases and retention and drives the timers of blocked Waits.
	// Default: the wall clock. Tests pass a fake clock.
	Clock Clock

	// Retention is how long a record lives after its last write; after that it is
	// gone and the key is free again. Default: DefaultRetention (24h). Negative
	// values are treated as zero.
	Retention time.Duration

	// MaxValueSize caps, in bytes, the outcome given to Record and Resolve and the
	// reason given to MarkIndeterminate; a longer one is refused with
	// kvstore.ErrTooLarge. Default: 0, no limit.
	MaxValueSize int
}

// Store is an in-memory [kvstore.Store]. It is safe for concurrent use. Create one
// with [New]; release it with [Store.Close].
type Store struct {
	clock     Clock
	retention time.Duration
	maxValue  int
	done      chan struct{} // closed by Close; wakes blocked Waits

	mu      sync.Mutex                   // protects the fields below
	tenants map[string]map[string]*entry // tenant → digest → live or expired record
	signals map[key]*signal              // keys someone is waiting on
	rev     uint64                       // the last revision handed out
	oldest  *entry                       // the expiry list: every entry, by last write
	newest  *entry
	closed  bool
}

var (
	_ kvstore.Store  = (*Store)(nil)
	_ kvstore.Lister = (*Store)(nil)
	_ interface {
		DumpRaw(ctx context.Context, tenant string) ([][]byte, error)
	} = (*Store)(nil)
)

type key struct{ tenant, digest string }

// entry is one stored record. rec.LeaseExpired is never set here; it is computed
// when the record is read.
type entry struct {
	rec   kvstore.Record
	token uint64 // revision of the write that granted the current claim

	// The entry's neighbours in the expiry list, which holds every entry of the
	// store ordered by last write, oldest first. Every record has the same
	// retention, so that is also the order of their ExpiresAt (the clock
	// never goes back; if a custom one did, an entry would be removed late,
	// never early: liveness is judged on every read).
	older, newer *entry
}

// signal is closed on the next change of a key. waiters counts the Waits holding
// it, so the last one to leave removes it.
type signal struct {
	ch      chan struct{}
	waiters int
}

// New returns a store configured by cfg, with defaults applied to its zero fields.
func New(cfg Config) *Store {
	s := &Store{
		clock:     cfg.Clock,
		retention: cfg.Retention,
		maxValue:  cfg.MaxValueSize,
		done:      make(chan struct{}),
		tenants:   make(map[string]map[string]*entry),
		signals:   make(map[key]*signal),
	}
	if s.clock == nil {
		s.clock = wallClock{}
	}
	if s.retention <= 0 {
		s.retention = DefaultRetention
	}
	return s
}

// Claim creates a claimed record for req's key unless a live one exists, in which
// case it returns that record (with LeaseExpired set if its lease has run out). It
// returns kvstore.ErrInvalid for a malformed request (see
// kvstore.ClaimRequest.Validate), and kvstore.ErrUnavailable once the store is closed.
func (s *Store) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	if err := req.Validate(); err != nil {
		return kvstore.ClaimResult{}, fmt.Errorf("memstore: claim: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(ctx); err != nil {
		return kvstore.ClaimResult{}, fmt.Errorf("memstore: claim: %w", err)
	}
	now := s.clock.Now()
	k := key{req.Tenant, req.Key}
	if e := s.lookup(k, now); e != nil {
		return kvstore.ClaimResult{Record: s.view(e, now)}, nil
	}
	rev := s.nextRev()
	e := &entry{
		rec: kvstore.Record{
			Tenant:      req.Tenant,
			Key:         req.Key,
			State:       kvstore.StateClaimed,
			CheckDigest: req.CheckDigest,
			Tool:        req.Tool,
			RunID:       req.RunID,
			CallID:      req.CallID,
			Holder:      req.Holder,
			Lease:       req.Lease,
			LeaseUntil:  now.Add(req.Lease),
			Revision:    rev,
			CreatedAt:   now,
			UpdatedAt:   now,
			ExpiresAt:   now.Add(s.retention),
		},
		token: rev,
	}
	s.put(k, e)
	return kvstore.ClaimResult{Claimed: true, Lease: leaseOf(e), Record: s.view(e, now)}, nil
}

// Get returns the live record for the key, or kvstore.ErrNotFound.
func (s *Store) Get(ctx context.Context, tenant, digest string) (kvstore.Record, error) {
	if err := kvstore.CheckKey(tenant, digest); err != nil {
		return kvstore.Record{}, fmt.Errorf("memstore: get: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(ctx); err != nil {
		return kvstore.Record{}, fmt.Errorf("memstore: get: %w", err)
	}
	now := s.clock.Now()
	e := s.lookup(key{tenant, digest}, now)
	if e == nil {
		return kvstore.Record{}, fmt.Errorf("memstore: get: %w", kvstore.ErrNotFound)
	}
	return s.view(e, now), nil
}

// Record completes the claim with outcome. It returns kvstore.ErrNotHolder if lease
// is not the current claim, kvstore.ErrTooLarge if outcome exceeds
// Config.MaxValueSize.
func (s *Store) Record(ctx context.Context, lease kvstore.Lease, outcome string) error {
	if err := s.fits(outcome); err != nil {
		return fmt.Errorf("memstore: record: %w", err)
	}
	return s.holderWrite(ctx, "record", lease, func(e *entry, _ time.Time) {
		e.rec.State = kvstore.StateCompleted
		e.rec.Outcome = outcome
	})
}

// Release drops the claim so that the key is free again. It returns
// kvstore.ErrNotHolder if lease is not the current claim.
func (s *Store) Release(ctx context.Context, lease kvstore.Lease) error {
	if err := lease.Validate(); err != nil {
		return fmt.Errorf("memstore: release: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(ctx); err != nil {
		return fmt.Errorf("memstore: release: %w", err)
	}
	k := key{lease.Tenant, lease.Key}
	if _, err := s.holderEntry(k, lease, s.clock.Now()); err != nil {
		return fmt.Errorf("memstore: release: %w", err)
	}
	s.remove(k)
	return nil
}

// Withdraw deletes the claim seen if the record is still that claim (its
// revision, state and holder), whatever its lease. It returns
// kvstore.ErrNotHolder if the record changed, kvstore.ErrNotFound if it is gone
// and kvstore.ErrInvalid for a seen that is not a claim of holder.
func (s *Store) Withdraw(ctx context.Context, seen kvstore.Record, holder string) error {
	if err := kvstore.ValidateWithdraw(seen, holder); err != nil {
		return fmt.Errorf("memstore: withdraw: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(ctx); err != nil {
		return fmt.Errorf("memstore: withdraw: %w", err)
	}
	k := key{seen.Tenant, seen.Key}
	e := s.lookup(k, s.clock.Now())
	switch {
	case e == nil:
		return fmt.Errorf("memstore: withdraw: %w", kvstore.ErrNotFound)
	case e.rec.Revision != seen.Revision || e.rec.Holder != holder || e.rec.State != kvstore.StateClaimed:
		return fmt.Errorf("memstore: withdraw: record changed since it was read: %w", kvstore.ErrNotHolder)
	}
	s.remove(k)
	return nil
}

// MarkIndeterminate parks the claim in kvstore.StateIndeterminate with reason and
// bodyEntered. It returns kvstore.ErrNotHolder if lease is not the current claim,
// kvstore.ErrTooLarge if reason exceeds Config.MaxValueSize.
func (s *Store) MarkIndeterminate(ctx context.Context, lease kvstore.Lease, reason string, bodyEntered bool) error {
	if err := s.fits(reason); err != nil {
		return fmt.Errorf("memstore: mark indeterminate: %w", err)
	}
	return s.holderWrite(ctx, "mark indeterminate", lease, func(e *entry, _ time.Time) {
		e.rec.State = kvstore.StateIndeterminate
		e.rec.Reason = reason
		e.rec.BodyEntered = bodyEntered
	})
}

// Renew extends the claim to d from now by the store's clock and returns the lease
// to use from then on (its token is unchanged). It returns kvstore.ErrInvalid for a
// non-positive d and kvstore.ErrNotHolder if lease is not the current claim.
func (s *Store) Renew(ctx context.Context, lease kvstore.Lease, d time.Duration) (kvstore.Lease, error) {
	if err := kvstore.CheckLeaseDuration(d); err != nil {
		return kvstore.Lease{}, fmt.Errorf("memstore: renew: %w", err)
	}
	err := s.holderWrite(ctx, "renew", lease, func(e *entry, now time.Time) {
		e.rec.Lease = d
		e.rec.LeaseUntil = now.Add(d)
	})
	if err != nil {
		return kvstore.Lease{}, err
	}
	return lease, nil
}

// TakeOver replaces the claim seen, whose lease has run out, with a claim for
// req.Holder. It returns kvstore.ErrLeaseHeld if the lease is still running or the
// record's revision, holder or state differ from seen, kvstore.ErrNotFound if the
// record is gone, and kvstore.ErrInvalid for a malformed seen or req, or a req
// that names another key than seen (see kvstore.ClaimRequest.ValidateTakeOver).
func (s *Store) TakeOver(ctx context.Context, seen kvstore.Record, req kvstore.ClaimRequest) (kvstore.Lease, error) {
	if err := req.ValidateTakeOver(seen); err != nil {
		return kvstore.Lease{}, fmt.Errorf("memstore: take over: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(ctx); err != nil {
		return kvstore.Lease{}, fmt.Errorf("memstore: take over: %w", err)
	}
	now := s.clock.Now()
	k := key{seen.Tenant, seen.Key}
	e := s.lookup(k, now)
	switch {
	case e == nil:
		return kvstore.Lease{}, fmt.Errorf("memstore: take over: %w", kvstore.ErrNotFound)
	case e.rec.Revision != seen.Revision || e.rec.Holder != seen.Holder || e.rec.State != kvstore.StateClaimed:
		return kvstore.Lease{}, fmt.Errorf("memstore: take over: record changed since it was read: %w", kvstore.ErrLeaseHeld)
	case now.Before(e.rec.LeaseUntil):
		return kvstore.Lease{}, fmt.Errorf("memstore: take over: lease runs until %v: %w", e.rec.LeaseUntil, kvstore.ErrLeaseHeld)
	}
	rev := s.nextRev()
	e.rec = kvstore.Record{
		Tenant:      seen.Tenant,
		Key:         seen.Key,
		State:       kvstore.StateClaimed,
		CheckDigest: req.CheckDigest,
		Tool:        req.Tool,
		RunID:       req.RunID,
		CallID:      req.CallID,
		Holder:      req.Holder,
		Lease:       req.Lease,
		LeaseUntil:  now.Add(req.Lease),
		Revision:    rev,
		CreatedAt:   e.rec.CreatedAt,
		UpdatedAt:   now,
		ExpiresAt:   now.Add(s.retention),
	}
	e.token = rev
	s.stamped(e, now)
	s.notify(k)
	return leaseOf(e), nil
}

// Wait blocks until the record differs from seen and returns it: another revision
// or state, gone (kvstore.ErrNotFound, also when its retention runs out), or, for a
// claimed record seen with LeaseExpired unset, its lease run out (the returned
// record has LeaseExpired set). It returns ctx.Err() when ctx ends first and
// kvstore.ErrUnavailable when the store is closed.
func (s *Store) Wait(ctx context.Context, seen kvstore.Record) (kvstore.Record, error) {
	if err := kvstore.CheckKey(seen.Tenant, seen.Key); err != nil {
		return kvstore.Record{}, fmt.Errorf("memstore: wait: %w", err)
	}
	k := key{seen.Tenant, seen.Key}
	for {
		s.mu.Lock()
		if err := s.usable(ctx); err != nil {
			s.mu.Unlock()
			if ctx.Err() != nil {
				return kvstore.Record{}, ctx.Err()
			}
			return kvstore.Record{}, fmt.Errorf("memstore: wait: %w", err)
		}
		now := s.clock.Now()
		e := s.lookup(k, now)
		if e == nil {
			s.mu.Unlock()
			return kvstore.Record{}, fmt.Errorf("memstore: wait: %w", kvstore.ErrNotFound)
		}
		rec := s.view(e, now)
		if rec.Revision != seen.Revision || rec.State != seen.State || (rec.LeaseExpired && !seen.LeaseExpired) {
			s.mu.Unlock()
			return rec, nil
		}
		// Nothing changed yet: sleep until the next change, the end of the lease
		// (if it is still running) or the end of retention, whichever comes first.
		wake := rec.ExpiresAt
		if rec.State == kvstore.StateClaimed && !rec.LeaseExpired && rec.LeaseUntil.Before(wake) {
			wake = rec.LeaseUntil
		}
		sig := s.subscribe(k)
		s.mu.Unlock()

		timer := s.timerUntil(wake)
		var err error
		select {
		case <-sig.ch:
		case <-timer.C():
		case <-s.done:
		case <-ctx.Done():
			err = ctx.Err()
		}
		timer.Stop()
		s.mu.Lock()
		s.unsubscribe(k, sig)
		s.mu.Unlock()
		if err != nil {
			return kvstore.Record{}, err
		}
	}
}

// Forget erases every record of tenant and wakes their waiters. It returns how many
// live records it removed.
func (s *Store) Forget(ctx context.Context, tenant string) (int64, error) {
	if err := kvstore.CheckTenant(tenant); err != nil {
		return 0, fmt.Errorf("memstore: forget: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(ctx); err != nil {
		return 0, fmt.Errorf("memstore: forget: %w", err)
	}
	now := s.clock.Now()
	var n int64
	for digest, e := range s.tenants[tenant] {
		if s.live(e, now) {
			n++
		}
		s.unlink(e)
		s.notify(key{tenant, digest})
	}
	delete(s.tenants, tenant)
	return n, nil
}

// Resolve applies an operator's decision to an indeterminate record: it completes
// it with res.Outcome, or (res.Release) drops it. It returns the record as it now
// is, or for a release as it was. It returns kvstore.ErrNotIndeterminate for a
// record in another state, kvstore.ErrNotFound if there is none, and
// kvstore.ErrTooLarge if res.Outcome exceeds Config.MaxValueSize.
func (s *Store) Resolve(ctx context.Context, tenant, digest string, res kvstore.Resolution) (kvstore.Record, error) {
	if err := kvstore.CheckKey(tenant, digest); err != nil {
		return kvstore.Record{}, fmt.Errorf("memstore: resolve: %w", err)
	}
	if !res.Release {
		if err := s.fits(res.Outcome); err != nil {
			return kvstore.Record{}, fmt.Errorf("memstore: resolve: %w", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(ctx); err != nil {
		return kvstore.Record{}, fmt.Errorf("memstore: resolve: %w", err)
	}
	now := s.clock.Now()
	k := key{tenant, digest}
	e := s.lookup(k, now)
	switch {
	case e == nil:
		return kvstore.Record{}, fmt.Errorf("memstore: resolve: %w", kvstore.ErrNotFound)
	case e.rec.State != kvstore.StateIndeterminate:
		return kvstore.Record{}, fmt.Errorf("memstore: resolve: record is %s: %w", e.rec.State, kvstore.ErrNotIndeterminate)
	}
	if res.Release {
		old := s.view(e, now)
		s.remove(k)
		return old, nil
	}
	e.rec.State = kvstore.StateCompleted
	e.rec.Outcome = res.Outcome
	s.touch(e, now)
	s.notify(k)
	return s.view(e, now), nil
}

// List returns up to limit of tenant's live records in state, oldest first by
// UpdatedAt (limit ≤ 0: all of them), with LeaseExpired judged as Get judges it.
// It returns kvstore.ErrInvalid for a malformed tenant or an unknown state, and
// kvstore.ErrUnavailable once the store is closed. It implements kvstore.Lister.
func (s *Store) List(ctx context.Context, tenant string, state kvstore.State, limit int) ([]kvstore.Record, error) {
	if err := kvstore.CheckTenant(tenant); err != nil {
		return nil, fmt.Errorf("memstore: list: %w", err)
	}
	if err := state.Validate(); err != nil {
		return nil, fmt.Errorf("memstore: list: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(ctx); err != nil {
		return nil, fmt.Errorf("memstore: list: %w", err)
	}
	now := s.clock.Now()
	var out []kvstore.Record
	for _, e := range s.tenants[tenant] {
		if s.live(e, now) && e.rec.State == state {
			out = append(out, s.view(e, now))
		}
	}
	slices.SortFunc(out, kvstore.CompareAge)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DumpRaw returns the tenant's live records as the store keeps them, one JSON
// document each, ordered by digest. It implements kvstoretest.RawDumper.
func (s *Store) DumpRaw(ctx context.Context, tenant string) ([][]byte, error) {
	if err := kvstore.CheckTenant(tenant); err != nil {
		return nil, fmt.Errorf("memstore: dump: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(ctx); err != nil {
		return nil, fmt.Errorf("memstore: dump: %w", err)
	}
	now := s.clock.Now()
	digests := make([]string, 0, len(s.tenants[tenant]))
	for d, e := range s.tenants[tenant] {
		if s.live(e, now) {
			digests = append(digests, d)
		}
	}
	sort.Strings(digests)
	out := make([][]byte, 0, len(digests))
	for _, d := range digests {
		e := s.tenants[tenant][d]
		b, err := json.Marshal(struct {
			kvstore.Record
			Token uint64
		}{e.rec, e.token})
		if err != nil {
			return nil, fmt.Errorf("memstore: dump: %w", err)
		}
		out = append(out, b)
	}
	return out, nil
}

// Close makes every later call fail with kvstore.ErrUnavailable and wakes blocked
// Waits, which return that error too. Closing twice is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	return nil
}

// holderWrite applies change to the record that lease holds and stamps the write.
func (s *Store) holderWrite(ctx context.Context, op string, lease kvstore.Lease, change func(e *entry, now time.Time)) error {
	if err := lease.Validate(); err != nil {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(ctx); err != nil {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	now := s.clock.Now()
	k := key{lease.Tenant, lease.Key}
	e, err := s.holderEntry(k, lease, now)
	if err != nil {
		return fmt.Errorf("memstore: %s: %w", op, err)
	}
	change(e, now)
	s.touch(e, now)
	s.notify(k)
	return nil
}

// holderEntry returns the live claimed entry that lease is the current claim of, or
// kvstore.ErrNotHolder.
func (s *Store) holderEntry(k key, lease kvstore.Lease, now time.Time) (*entry, error) {
	token, err := strconv.ParseUint(lease.Token, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("token %q is not one of this store's: %w", lease.Token, kvstore.ErrNotHolder)
	}
	e := s.lookup(k, now)
	switch {
	case e == nil:
		return nil, fmt.Errorf("no record: %w", kvstore.ErrNotHolder)
	case e.rec.State != kvstore.StateClaimed:
		return nil, fmt.Errorf("record is %s: %w", e.rec.State, kvstore.ErrNotHolder)
	case e.token != token || e.rec.Holder != lease.Holder:
		return nil, fmt.Errorf("claim is held by %q: %w", e.rec.Holder, kvstore.ErrNotHolder)
	}
	return e, nil
}

// usable reports why the store cannot serve a call: closed, or ctx already done.
// Callers hold s.mu.
func (s *Store) usable(ctx context.Context) error {
	if s.closed {
		return fmt.Errorf("store closed: %w", kvstore.ErrUnavailable)
	}
	return ctx.Err()
}

// fits checks a value against Config.MaxValueSize.
func (s *Store) fits(v string) error {
	if s.maxValue > 0 && len(v) > s.maxValue {
		return fmt.Errorf("%d bytes, limit %d: %w", len(v), s.maxValue, kvstore.ErrTooLarge)
	}
	return nil
}

// live reports whether e is still within retention at now.
func (s *Store) live(e *entry, now time.Time) bool { return now.Before(e.rec.ExpiresAt) }

// lookup returns the live entry for k, removing it if it has expired. Callers hold
// s.mu.
func (s *Store) lookup(k key, now time.Time) *entry {
	e := s.tenants[k.tenant][k.digest]
	if e == nil {
		return nil
	}
	if !s.live(e, now) {
		s.remove(k)
		return nil
	}
	return e
}

// view returns the record as callers see it at now.
func (s *Store) view(e *entry, now time.Time) kvstore.Record {
	r := e.rec
	r.LeaseExpired = r.State == kvstore.StateClaimed && !now.Before(r.LeaseUntil)
	return r
}

// nextRev hands out a new revision. Callers hold s.mu.
func (s *Store) nextRev() uint64 {
	s.rev++
	return s.rev
}

// touch stamps a write on e. Callers hold s.mu.
func (s *Store) touch(e *entry, now time.Time) {
	e.rec.Revision = s.nextRev()
	e.rec.UpdatedAt = now
	e.rec.ExpiresAt = now.Add(s.retention)
	s.stamped(e, now)
}

// put stores a new entry and wakes the key's waiters. Callers hold s.mu.
func (s *Store) put(k key, e *entry) {
	m := s.tenants[k.tenant]
	if m == nil {
		m = make(map[string]*entry)
		s.tenants[k.tenant] = m
	}
	m[k.digest] = e
	s.notify(k)
	s.stamped(e, e.rec.UpdatedAt)
}

// remove deletes k's entry and wakes its waiters. Callers hold s.mu.
func (s *Store) remove(k key) {
	m := s.tenants[k.tenant]
	if e := m[k.digest]; e != nil {
		s.unlink(e)
	}
	delete(m, k.digest)
	if len(m) == 0 {
		delete(s.tenants, k.tenant)
	}
	s.notify(k)
}

// stamped moves e, just written at now, to the newest end of the expiry list,
// and removes up to sweepBatch expired records from its oldest end, so that
// keys nobody reads again do not pile up. The work is bounded whatever the
// number of records. Callers hold s.mu.
func (s *Store) stamped(e *entry, now time.Time) {
	s.unlink(e)
	e.older = s.newest
	if s.newest != nil {
		s.newest.newer = e
	} else {
		s.oldest = e
	}
	s.newest = e
	for range sweepBatch {
		old := s.oldest
		if old == nil || s.live(old, now) {
			return
		}
		s.remove(key{old.rec.Tenant, old.rec.Key})
	}
}

// unlink takes e out of the expiry list, if it is in it. Callers hold s.mu.
func (s *Store) unlink(e *entry) {
	if e.older != nil {
		e.older.newer = e.newer
	} else if s.oldest == e {
		s.oldest = e.newer
	}
	if e.newer != nil {
		e.newer.older = e.older
	} else if s.newest == e {
		s.newest = e.older
	}
	e.older, e.newer = nil, nil
}

// subscribe returns the signal that the next change of k closes. Callers hold s.mu.
func (s *Store) subscribe(k key) *signal {
	sig := s.signals[k]
	if sig == nil {
		sig = &signal{ch: make(chan struct{})}
		s.signals[k] = sig
	}
	sig.waiters++
	return sig
}

// unsubscribe drops a waiter from sig, removing sig once nobody holds it. Callers
// hold s.mu.
func (s *Store) unsubscribe(k key, sig *signal) {
	sig.waiters--
	if sig.waiters == 0 && s.signals[k] == sig {
		delete(s.signals, k)
	}
}

// notify wakes everyone waiting on k. Callers hold s.mu.
func (s *Store) notify(k key) {
	if sig := s.signals[k]; sig != nil {
		close(sig.ch)
		delete(s.signals, k)
	}
}

// timerUntil returns a timer on the store's clock that fires at t, or at most
// timerSlack later. The clock is read on both sides of arming the timer: if another
// goroutine moved it in between, the timer (armed for a duration from a time
// already past) might fire too late or, on a fake clock, never; it is armed again.
func (s *Store) timerUntil(t time.Time) Timer {
	for {
		before := s.clock.Now()
		timer := s.clock.NewTimer(t.Sub(before))
		if s.clock.Now().Sub(before) <= timerSlack {
			return timer
		}
		timer.Stop()
	}
}

func leaseOf(e *entry) kvstore.Lease {
	return kvstore.Lease{
		Tenant: e.rec.Tenant,
		Key:    e.rec.Key,
		Holder: e.rec.Holder,
		Token:  strconv.FormatUint(e.token, 10),
	}
}
