package pgstore

import "errors"

// Errors specific to this package. Everything else a [Store] returns is one of the
// kvstore sentinels (kvstore.ErrUnavailable, kvstore.ErrInvalid, ...), wrapped.
var (
	// ErrSchemaVersion is returned by [Store.EnsureSchema] when the database holds a
	// schema version newer than this package knows: a newer release migrated it, and
	// this one must not run against it.
	ErrSchemaVersion = errors.New("pgstore: database schema is newer than this release")

	// ErrNoSchema is matched, beside kvstore.ErrUnavailable, by the error of an
	// operation that found none of the store's tables in its schema: the schema
	// does not exist, or EnsureSchema was never run on it (PostgreSQL's
	// undefined_table, SQLSTATE 42P01).
	ErrNoSchema = errors.New("pgstore: no toolexec tables in the schema")

	// ErrBadConfig is returned by [New] for a [Config] it cannot use (a malformed
	// schema or channel name, a negative duration).
	ErrBadConfig = errors.New("pgstore: invalid config")
)
