package pgstore

import (
	"cmp"
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Group commit. Claims and the holder's fenced writes (record, renew, release,
// mark indeterminate) are single-row statements that each cost a round trip and
// a commit — a WAL flush with synchronous_commit on — and most of the
// database's CPU per call goes to that overhead, not to the statement. When
// Config.MaxBatch allows it, such a write is queued instead, and one of
// Config.BatchWriters goroutines sends whatever is queued as one pgx batch: the
// statements travel together and PostgreSQL runs them in one implicit
// transaction, committed once at the end. Nothing waits on purpose: a write
// that arrives while the writers are idle goes at once, alone; batches form
// only from writes that arrive while others are being written.
//
// Each statement of a batch is the one the write would run alone, so its
// result means what it means alone. What changes is failure: the statements
// commit or roll back together.
//   - A statement the server refuses with an ERROR (a deadlock it broke, say)
//     aborts the transaction, so nothing of the batch was written: each write
//     is then run again on its own, and gets the answer it would have had
//     alone.
//   - Any other failure (the connection lost, the deadline passed) leaves the
//     commit unknown, exactly as it would for a single statement, and every
//     write of the batch gets the error: none is run twice.
//
// Writes are sorted by key before they are sent, so concurrent batches, here
// or in other processes, lock rows in one order and cannot deadlock each other.

// write is one statement waiting for group commit.
type write struct {
	tenant, digest string // the row it writes, for the lock order
	query          string
	args           []any
	// scan reads the statement's row into the caller's variables; it returns
	// pgx.ErrNoRows when the statement wrote nothing.
	scan func(pgx.Row) error
	done chan error // receives scan's result, once
}

// queryRow runs one single-row write for (tenant, digest) and reads its row with
// scan: handed to a batch writer when batching is on, otherwise run at once.
// The hand-over is unbuffered, so a write is either in a writer's batch, and
// will run, or still with its caller, who may give up on it.
func (s *Store) queryRow(ctx context.Context, tenant, digest, query string, args []any, scan func(pgx.Row) error) error {
	if s.writes == nil {
		return scan(s.pool.QueryRow(ctx, query, args...))
	}
	// A select between a free writer and an ended context picks either at
	// random: a caller whose context has ended must not queue a write it will
	// be told failed.
	if err := ctx.Err(); err != nil {
		return err
	}
	w := &write{tenant: tenant, digest: digest, query: query, args: args, scan: scan, done: make(chan error, 1)}
	select {
	case s.writes <- w:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return errClosed
	}
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		// The write is in a batch: its outcome is as unknown as that of a
		// single statement whose caller gave up on it.
		return ctx.Err()
	}
}

// batchWriter takes queued writes, as many as are waiting up to
// Config.MaxBatch, and writes them together, until the store closes.
func (s *Store) batchWriter() {
	batch := make([]*write, 0, s.cfg.MaxBatch)
	for {
		batch = batch[:0]
		select {
		case w := <-s.writes:
			batch = append(batch, w)
		case <-s.life.Done():
			return
		}
	more:
		for len(batch) < s.cfg.MaxBatch {
			select {
			case w := <-s.writes:
				batch = append(batch, w)
			default:
				break more
			}
		}
		s.writeBatch(batch)
		clear(batch)
	}
}

// writeBatch writes batch in one implicit transaction and hands each write its
// result (see the comment at the top of this file for failures).
func (s *Store) writeBatch(batch []*write) {
	ctx, cancel := s.bound(s.life)
	defer cancel()
	if len(batch) == 1 {
		w := batch[0]
		w.done <- w.scan(s.pool.QueryRow(ctx, w.query, w.args...))
		return
	}
	slices.SortStableFunc(batch, func(a, b *write) int {
		return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.digest, b.digest))
	})
	s.batches.Add(1)
	s.batched.Add(int64(len(batch)))
	b := &pgx.Batch{QueuedQueries: make([]*pgx.QueuedQuery, 0, len(batch))}
	for _, w := range batch {
		b.Queue(w.query, w.args...)
	}
	br := s.pool.SendBatch(ctx, b)
	errs := make([]error, len(batch))
	var failed error
	for i, w := range batch {
		errs[i] = w.scan(br.QueryRow())
		if errs[i] != nil && !errors.Is(errs[i], pgx.ErrNoRows) {
			failed = errs[i]
			break
		}
	}
	if err := br.Close(); failed == nil {
		failed = err
	}
	var refused *pgconn.PgError
	switch {
	case failed == nil:
		for i, w := range batch {
			w.done <- errs[i]
		}
	case errors.As(failed, &refused) && refused.Severity == "ERROR":
		// The server refused a statement or the commit and kept the session
		// (FATAL and PANIC end it), so the transaction rolled back: nothing of
		// the batch was written.
		s.batchRetries.Add(1)
		for _, w := range batch {
			w.done <- w.scan(s.pool.QueryRow(ctx, w.query, w.args...))
		}
	default:
		for _, w := range batch {
			w.done <- failed
		}
	}
}

// BatchStats is what group commit has done since the store was created.
type BatchStats struct {
	Batches int64 // transactions of two writes or more
	Writes  int64 // writes those transactions carried
	Retried int64 // batches the server refused, whose writes then ran one by one
}

// BatchStats returns counts of the store's group commits.
func (s *Store) BatchStats() BatchStats {
	return BatchStats{Batches: s.batches.Load(), Writes: s.batched.Load(), Retried: s.batchRetries.Load()}
}
