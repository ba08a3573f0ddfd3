package pgstore

import (
	"errors"
	"fmt"

	"github.com/tesserix/toolexec/kvstore"
)

// fail translates an error at the package boundary. The store's own answers
// (kvstore sentinels, ErrSchemaVersion) pass through with the operation named;
// anything else came from pgx or the network — a refused or dropped connection, a
// closed pool, a timeout, a cancelled context, a server error — and is wrapped in
// kvstore.ErrUnavailable, keeping the cause for errors.Is/As (context.Canceled,
// *pgconn.PgError, ...). An unreachable store never reads as an answer.
func (s *Store) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, known := range []error{
		kvstore.ErrNotFound, kvstore.ErrNotHolder, kvstore.ErrLeaseHeld,
		kvstore.ErrNotIndeterminate, kvstore.ErrTooLarge, kvstore.ErrInvalid,
		kvstore.ErrUnavailable, ErrSchemaVersion,
	} {
		if errors.Is(err, known) {
			return fmt.Errorf("pgstore: %s: %w", op, err)
		}
	}
	return fmt.Errorf("pgstore: %s: %w: %w", op, kvstore.ErrUnavailable, err)
}
