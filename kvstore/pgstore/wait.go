package pgstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tesserix/toolexec/kvstore"
)

// deadlineSlack is added to a deadline the database reported before a waiter
// re-reads, so that the re-read lands after it by the database's clock too.
const deadlineSlack = 5 * time.Millisecond

// Reconnect backoff of the listener.
const (
	listenBackoffMin = 50 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// listener owns one connection hijacked from the pool, LISTENs on the store's
// channel, and wakes the waiters registered for a notified digest. It is started by
// the first Wait and runs until Close.
type listener struct {
	s     *Store
	start sync.Once

	mu      sync.Mutex                      // protects waiters and pid
	waiters map[string]map[*waiter]struct{} // by digest
	pid     uint32                          // backend PID while listening, else 0
}

// waiter is one Wait call's doorbell. The channel holds at most one pending ring.
type waiter struct{ ring chan struct{} }

func newListener(s *Store) *listener {
	return &listener{s: s, waiters: make(map[string]map[*waiter]struct{})}
}

// register adds a waiter for digest, starting the listener if it is not running.
func (l *listener) register(digest string) *waiter {
	l.start.Do(func() { l.s.goBackground(l.run) })
	w := &waiter{ring: make(chan struct{}, 1)}
	l.mu.Lock()
	set := l.waiters[digest]
	if set == nil {
		set = make(map[*waiter]struct{})
		l.waiters[digest] = set
	}
	set[w] = struct{}{}
	l.mu.Unlock()
	return w
}

func (l *listener) unregister(digest string, w *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.waiters[digest], w)
	if len(l.waiters[digest]) == 0 {
		delete(l.waiters, digest)
	}
}

func (w *waiter) notify() {
	select {
	case w.ring <- struct{}{}:
	default: // a ring is already pending
	}
}

func (l *listener) wake(digest string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for w := range l.waiters[digest] {
		w.notify()
	}
}

func (l *listener) wakeAll() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, set := range l.waiters {
		for w := range set {
			w.notify()
		}
	}
}

// listeningPID returns the backend PID of the listening connection, or 0 while
// the listener is not listening.
func (l *listener) listeningPID() uint32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pid
}

func (l *listener) setPID(pid uint32) {
	l.mu.Lock()
	l.pid = pid
	l.mu.Unlock()
}

// run keeps a LISTEN session alive until the store closes, reconnecting with
// backoff when the connection fails.
func (l *listener) run() {
	ctx := l.s.life
	backoff := listenBackoffMin
	for {
		listened, err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		if listened {
			backoff = listenBackoffMin
		}
		l.s.cfg.Logger.Warn("pgstore: notification listener lost; reconnecting",
			"schema", l.s.cfg.Schema, "channel", l.s.cfg.Channel, "retry_in", backoff, "error", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, listenBackoffMax)
	}
}

// session runs one LISTEN session. It reports whether LISTEN succeeded, and the
// error that ended the session.
func (l *listener) session(ctx context.Context) (bool, error) {
	pc, err := l.s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.s.cfg.Channel}.Sanitize()); err != nil {
		return false, err
	}
	l.setPID(conn.PgConn().PID())
	defer l.setPID(0)
	// Notifications sent while no session was listening are lost: everyone re-reads.
	l.wakeAll()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, err
		}
		l.wake(n.Payload)
	}
}

// Wait blocks until the record differs from seen — another revision or state —,
// is gone (kvstore.ErrNotFound), or, for a claimed record, its lease has run out by
// the database clock (the returned record has LeaseExpired set). It returns
// ctx.Err() when ctx ends first.
//
// Writes notify only records marked watched (see [Store.watch]), so Wait
// registers with the listener, then reads the record and, before it blocks,
// marks it watched; it re-reads on every notification. A notification can be
// lost, so it also re-reads at the lease deadline and at the expiry the database
// reported on the last read, every Config.RecheckInterval, and whenever the
// listener reconnects. An error reading the record is returned (wrapping
// kvstore.ErrUnavailable).
func (s *Store) Wait(ctx context.Context, seen kvstore.Record) (kvstore.Record, error) {
	if err := kvstore.CheckKey(seen.Tenant, seen.Key); err != nil {
		return kvstore.Record{}, s.fail("wait", err)
	}
	if err := s.checkOpen(); err != nil {
		return kvstore.Record{}, s.fail("wait", err)
	}
	w := s.lis.register(seen.Key)
	defer s.lis.unregister(seen.Key, w)
	for {
		r, err := s.watch(ctx, seen)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return kvstore.Record{}, ctxErr
		}
		if err != nil {
			return kvstore.Record{}, s.fail("wait", err)
		}
		if differs(r, seen) {
			return r.rec, nil
		}
		next := s.cfg.RecheckInterval
		if r.rec.State == kvstore.StateClaimed {
			next = min(next, max(r.leaseLeft, 0)+deadlineSlack)
		}
		next = min(next, max(r.expireLeft, 0)+deadlineSlack)
		t := time.NewTimer(next)
		select {
		case <-w.ring:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return kvstore.Record{}, ctx.Err()
		case <-s.done:
			t.Stop()
			return kvstore.Record{}, s.fail("wait", errClosed)
		}
		t.Stop()
	}
}

// differs reports whether Wait returns r: another revision or state than seen,
// or a lease run out.
func differs(r row, seen kvstore.Record) bool {
	return r.rec.Revision != seen.Revision || r.rec.State != seen.State || r.rec.LeaseExpired
}

// watch reads the record for a waiter that is already registered with the
// listener and, unless the record already differs from seen, makes sure that the
// row is marked watched, so that every later write to it notifies.
//
// No wake-up is lost. A mark seen by the read stays on the row for the record's
// life: only a delete or a claim overwriting the expired row drops it, and both
// change what Wait sees (the overwrite can only come after the expiry the waiter
// re-reads at). So any write committed after the read notifies. Without a mark,
// the waiter sets it with an UPDATE of the row that returns the row as it then
// is, and the row lock orders that UPDATE against every write: a write that
// commits first is in what the UPDATE returns (the UPDATE waits for it and
// re-reads the row); a write that comes later finds the mark and notifies at its
// commit. That notification reaches this waiter, registered with the listener
// beforehand, or, if it was sent before the listener's LISTEN took effect, the
// listener wakes every waiter once it listens.
//
// Nothing clears the mark while the record lives: once its waiters are gone, the
// record's later writes (a renewal, the outcome) still notify, which costs only
// those notifications. Every read checks the mark, so a row that lost it by any
// other path (a write behind the store's back) is marked again.
func (s *Store) watch(ctx context.Context, seen kvstore.Record) (row, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.checkOpen(); err != nil {
		return row{}, err
	}
	var watched bool
	r, err := scanRecord(s.pool.QueryRow(ctx, s.sql.waitGet, seen.Tenant, seen.Key), &watched)
	if err == nil && !watched && !differs(r, seen) {
		r, err = scanRecord(s.pool.QueryRow(ctx, s.sql.watch, seen.Tenant, seen.Key))
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return row{}, kvstore.ErrNotFound
	}
	return r, err
}
