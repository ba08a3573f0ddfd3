package pgstore

import (
	"context"
	"time"
)

// Sweep deletes expired rows (expires_at <= now() by the database clock) in batches
// of Config.SweepBatch, one statement per batch, skipping rows other transactions
// have locked, until a batch comes back short. It returns how many rows it deleted.
// Live rows are never touched. Reads treat expired rows as absent whether or not
// they have been swept; sweeping only reclaims space. The background sweeper calls
// it every Config.SweepInterval.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	if err := s.checkOpen(); err != nil {
		return 0, s.fail("sweep", err)
	}
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, s.sql.sweep, s.cfg.SweepBatch)
		if err != nil {
			return total, s.fail("sweep", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < int64(s.cfg.SweepBatch) {
			return total, nil
		}
	}
}

// sweepLoop runs Sweep every Config.SweepInterval until Close.
func (s *Store) sweepLoop() {
	t := time.NewTicker(s.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		sctx, scancel := context.WithTimeout(s.life, max(s.cfg.SweepInterval, time.Minute))
		n, err := s.Sweep(sctx)
		scancel()
		if err != nil && !s.closed.Load() {
			s.cfg.Logger.Warn("pgstore: sweeping expired records failed",
				"schema", s.cfg.Schema, "deleted", n, "error", err)
		}
	}
}
