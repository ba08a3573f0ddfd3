package main

import (
	"fmt"
	"net/url"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	pgplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/postgresql"
	pgschema "go.temporal.io/server/schema/postgresql/v12"
	"go.temporal.io/server/tools/common/schema"
	sqltool "go.temporal.io/server/tools/sql"
)

// PostgreSQL databases of the Temporal row, dropped and created again each run.
const (
	pgExecutionsDB = "temporal_bench"
	pgVisibilityDB = "temporal_bench_visibility"
)

// pgStores creates the executions and visibility databases, with Temporal's
// schemas, on the PostgreSQL server that pgURL names, and returns their data
// stores.
func pgStores(pgURL string, conns int) (executions, visibility *config.SQL, err error) {
	u, err := url.Parse(pgURL)
	if err != nil {
		return nil, nil, fmt.Errorf("PostgreSQL URL: %w", err)
	}
	password, _ := u.User.Password()
	store := func(db string) *config.SQL {
		return &config.SQL{
			PluginName: pgplugin.PluginName, DatabaseName: db, ConnectAddr: u.Host, ConnectProtocol: "tcp",
			User: u.User.Username(), Password: password, MaxConns: conns, MaxIdleConns: conns,
		}
	}
	executions, visibility = store(pgExecutionsDB), store(pgVisibilityDB)
	if err := createPGDatabase(store(pgExecutionsDB), "postgresql/v12/temporal", pgschema.Version); err != nil {
		return nil, nil, err
	}
	if err := createPGDatabase(store(pgVisibilityDB), "postgresql/v12/visibility", pgschema.VisibilityVersion); err != nil {
		return nil, nil, err
	}
	return executions, visibility, nil
}

// createPGDatabase drops and creates cfg's database and sets up the embedded
// schema name at version in it.
func createPGDatabase(cfg *config.SQL, schemaName, version string) error {
	db, quiet := cfg.DatabaseName, log.NewNoopLogger()
	admin := *cfg
	_ = sqltool.DoDropDatabase(&admin, "postgres", quiet) // absent the first time
	admin = *cfg
	if err := sqltool.DoCreateDatabase(&admin, "postgres", quiet); err != nil {
		return fmt.Errorf("creating database %s: %w", db, err)
	}
	conn, err := sqltool.NewConnection(cfg, quiet)
	if err != nil {
		return fmt.Errorf("connecting to database %s: %w", db, err)
	}
	defer conn.Close()
	setup := schema.NewSetupSchemaTask(conn, &schema.SetupConfig{SchemaName: schemaName, InitialVersion: version}, quiet)
	if err := setup.Run(); err != nil {
		return fmt.Errorf("Temporal's schema in database %s: %w", db, err)
	}
	return nil
}
