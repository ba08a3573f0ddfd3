package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// SchemaVersion is the schema version this release creates and expects: the
// number of migrations.
const SchemaVersion = 3

// migrations[i] takes the schema from version i to version i+1. {s} stands for the
// quoted schema name. Appending is the only allowed change.
var migrations = []string{
	`
CREATE SEQUENCE {s}.revisions AS bigint;

CREATE TABLE {s}.records (
	tenant       text        NOT NULL,
	digest       text        NOT NULL,
	state        text        NOT NULL CHECK (state IN ('claimed', 'completed', 'indeterminate')),
	outcome      bytea       NOT NULL DEFAULT ''::bytea,
	reason       text        NOT NULL DEFAULT '',
	body_entered boolean     NOT NULL DEFAULT false,
	check_digest text        NOT NULL DEFAULT '',
	tool         text        NOT NULL DEFAULT '',
	run_id       text        NOT NULL DEFAULT '',
	call_id      text        NOT NULL DEFAULT '',
	holder       text        NOT NULL DEFAULT '',
	token        text        NOT NULL,
	lease        interval    NOT NULL,
	lease_until  timestamptz NOT NULL,
	revision     bigint      NOT NULL,
	created_at   timestamptz NOT NULL,
	updated_at   timestamptz NOT NULL,
	expires_at   timestamptz NOT NULL,
	PRIMARY KEY (tenant, digest)
);

CREATE INDEX records_expires_at ON {s}.records (expires_at);

COMMENT ON TABLE {s}.records IS
	'toolexec idempotency records (pgstore). Holds digests and outcomes, never call arguments.';
`,
	// 2: List of the indeterminate records of a tenant, oldest first, without
	// reading the tenant's other records.
	`
CREATE INDEX records_indeterminate ON {s}.records (tenant, updated_at, digest)
	WHERE state = 'indeterminate';
`,
	// 3: writes notify only records a waiter has marked as watched. Adding a
	// column with a constant default rewrites no rows.
	`
ALTER TABLE {s}.records ADD COLUMN watched boolean NOT NULL DEFAULT false;

COMMENT ON COLUMN {s}.records.watched IS
	'set by a waiting pgstore before it blocks; writes call pg_notify only when it is true';
`,
}

// EnsureSchema creates the store's schema and tables, or migrates them to
// [SchemaVersion]. It is the deployment's to call (New never does). Running it
// again is a no-op; several processes may run it at once: each migration runs in a
// transaction under a transaction-scoped advisory lock, and a small schema_version
// table records what has been applied. It returns an error wrapping
// [ErrSchemaVersion] if the database is at a newer version than this release
// knows, and one wrapping kvstore.ErrUnavailable if the database cannot be
// reached.
func (s *Store) EnsureSchema(ctx context.Context) error {
	if err := s.ensureSchema(ctx); err != nil {
		return s.fail("ensure schema", err)
	}
	return nil
}

func (s *Store) ensureSchema(ctx context.Context) error {
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{})
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	// One lock per schema name, held until commit: concurrent callers queue here,
	// so CREATE SCHEMA IF NOT EXISTS and the migrations never race.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`,
		"toolexec.pgstore.schema:"+s.cfg.Schema); err != nil {
		return err
	}
	q := s.quotedSchema
	if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+q); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+q+`.schema_version (
		version    integer     PRIMARY KEY,
		applied_at timestamptz NOT NULL DEFAULT now()
	)`); err != nil {
		return err
	}
	var current int
	if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+q+`.schema_version`).Scan(&current); err != nil {
		return err
	}
	if current > SchemaVersion {
		return fmt.Errorf("%w: schema %s is at version %d, this release knows %d",
			ErrSchemaVersion, s.cfg.Schema, current, SchemaVersion)
	}
	for v := current; v < SchemaVersion; v++ {
		if _, err := tx.Exec(ctx, strings.ReplaceAll(migrations[v], "{s}", q)); err != nil {
			return fmt.Errorf("migration to version %d: %w", v+1, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+q+`.schema_version (version) VALUES ($1)`, v+1); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
