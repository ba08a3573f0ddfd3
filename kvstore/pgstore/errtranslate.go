package pgstore

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tesserix/toolexec/kvstore"
)

// undefinedTable is PostgreSQL's SQLSTATE for a relation that does not exist.
const undefinedTable = "42P01"

// fail translates an error at the package boundary. The store's own answers
// (kvstore sentinels, ErrSchemaVersion) pass through with the operation named;
// anything else came from pgx or the network — a refused or dropped connection, a
// closed pool, a timeout, a cancelled context, a server error — and is wrapped in
// kvstore.ErrUnavailable, keeping the cause for errors.Is/As (context.Canceled,
// *pgconn.PgError, ...). An unreachable store never reads as an answer. A table
// that does not exist also matches ErrNoSchema, so that callers can say how to
// fix it.
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
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == undefinedTable {
		return fmt.Errorf("pgstore: %s: %w: %w: %w", op, kvstore.ErrUnavailable, ErrNoSchema, err)
	}
	return fmt.Errorf("pgstore: %s: %w: %w", op, kvstore.ErrUnavailable, err)
}
