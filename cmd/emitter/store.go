package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/kvstore/pgstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// The admin commands (inspect, resolve, forget) ask an executor over the admin
// subjects, or, with --store, work on the idempotency store directly: for an
// operator with no executor running. What is here opens either, behind one
// interface, so that each command's code is the same both ways.

// adminConn is where an admin command's requests go.
type adminConn interface {
	Inspect(ctx context.Context, tenant, key string) (*admin.RecordInfo, error)
	Resolve(ctx context.Context, req admin.ResolveRequest) (*admin.RecordInfo, error)
	Forget(ctx context.Context, tenant string) (int64, error)
	// explain turns an error from the methods above into what the command
	// reports, with its exit status (tenant and key as the request had them;
	// key is empty for forget).
	explain(ctx context.Context, tenant, key string, err error) error
	Close()
}

// storeOptions are the flags that choose direct administration, named as the
// executor names them. Unset, the URLs, schema, prefix and retention take the
// executor's TOOLEXEC_* variables, so that an operator with the executor's
// environment needs only --store. (They are read when the command runs, not
// shown as flag defaults: --help must not print a URL's password.)
type storeOptions struct {
	kind                  string
	postgresURL, pgSchema string
	redisURL, redisPrefix string
	retention             time.Duration
}

// register defines the store flags on cmd.
func (o *storeOptions) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.kind, "store", "", "work on this idempotency store directly instead of asking an executor: jetstream (the NATS server of --server), postgres or redis")
	f.StringVar(&o.postgresURL, "postgres-url", "", "PostgreSQL URL, with --store postgres (default $TOOLEXEC_POSTGRES_URL)")
	f.StringVar(&o.pgSchema, "postgres-schema", pgstore.DefaultSchema, "PostgreSQL schema holding the records, with --store postgres ($TOOLEXEC_POSTGRES_SCHEMA if set)")
	f.StringVar(&o.redisURL, "redis-url", "", "Redis URL, with --store redis (default $TOOLEXEC_REDIS_URL)")
	f.StringVar(&o.redisPrefix, "redis-prefix", redisstore.DefaultPrefix, "prefix of the Redis keys holding the records, with --store redis ($TOOLEXEC_REDIS_PREFIX if set)")
	f.DurationVar(&o.retention, "retention", pgstore.DefaultRetention, "with --store postgres or redis: how long a resolved record is kept; give the executors' --retention ($TOOLEXEC_RETENTION if set)")
}

// storeEnv maps each store flag to the executor's variable that stands in for
// it when the flag is not given.
var storeEnv = map[string]string{
	"postgres-url": "TOOLEXEC_POSTGRES_URL", "postgres-schema": "TOOLEXEC_POSTGRES_SCHEMA",
	"redis-url": "TOOLEXEC_REDIS_URL", "redis-prefix": "TOOLEXEC_REDIS_PREFIX", "retention": "TOOLEXEC_RETENTION",
}

// check applies the TOOLEXEC_* variables to the store flags not given, and
// refuses store flags that cannot work, before anything is contacted.
func (o *storeOptions) check(cmd *cobra.Command) error {
	for name := range storeEnv {
		if cmd.Flags().Changed(name) && o.kind == "" {
			return badInput(fmt.Errorf("--%s needs --store", name))
		}
	}
	if o.kind == "" {
		return nil
	}
	for name, env := range storeEnv {
		if v := os.Getenv(env); v != "" && !cmd.Flags().Changed(name) {
			if err := cmd.Flags().Set(name, v); err != nil {
				return badInput(fmt.Errorf("%s=%q: %w", env, v, err))
			}
		}
	}
	switch o.kind {
	case "jetstream":
		if cmd.Flags().Changed("retention") && os.Getenv(storeEnv["retention"]) == "" {
			return badInput(errors.New("--retention is the KV bucket's own with --store jetstream"))
		}
	case "postgres":
		if o.postgresURL == "" {
			return badInput(errors.New("--store postgres needs --postgres-url (or TOOLEXEC_POSTGRES_URL)"))
		}
	case "redis":
		if o.redisURL == "" {
			return badInput(errors.New("--store redis needs --redis-url (or TOOLEXEC_REDIS_URL)"))
		}
	default:
		return badInput(fmt.Errorf("--store %q: want jetstream, postgres or redis", o.kind))
	}
	if o.retention <= 0 {
		return badInput(fmt.Errorf("--retention %v: must be positive", o.retention))
	}
	return nil
}

// open returns where the command's requests go: an executor over NATS
// without --store, else the store itself. needNATS says that the command has
// something to do on NATS besides the store (resolve publishes its audit event,
// forget purges the streams): with a PostgreSQL or Redis store it then tries to
// connect, and carries on without NATS if it cannot, saying so when it
// explains what did not happen.
func (o *storeOptions) open(ctx context.Context, cmd *cobra.Command, g *globalOptions, needNATS bool) (adminConn, error) {
	if o.kind == "" {
		s, err := g.connect(cmd, bus.ClientConfig{})
		if err != nil {
			return nil, err
		}
		return &busConn{s: s, g: g}, nil
	}
	d := &directConn{g: g, kind: o.kind}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	var js jetstream.JetStream
	if o.kind == "jetstream" || needNATS {
		s, err := g.connect(cmd, bus.ClientConfig{})
		switch {
		case err == nil:
			d.nats = s
			if js, err = jetstream.New(s.nc); err != nil {
				return nil, fmt.Errorf("jetstream: %w", err)
			}
		case o.kind == "jetstream":
			return nil, err
		default:
			d.natsErr = err
		}
	}
	var err error
	switch o.kind {
	case "jetstream":
		d.where = "the JetStream KV store on " + d.nats.url
		d.store, err = openJetStreamStore(ctx, js)
	case "postgres":
		d.where = "the PostgreSQL store at " + redactURL(o.postgresURL) + " (schema " + o.pgSchema + ")"
		d.store, d.closeStore, err = openPostgresStore(ctx, o)
	case "redis":
		d.where = "the Redis store at " + redactURL(o.redisURL) + " (prefix " + o.redisPrefix + ")"
		d.store, d.closeStore, err = openRedisStore(o)
	}
	if err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if d.admin, err = admin.New(js, d.store, admin.Config{Logger: log}); err != nil {
		return nil, err
	}
	ok = true
	return d, nil
}

// openJetStreamStore opens the executors' KV bucket as it is: with its own
// retention and replicas, so that opening it changes nothing. A server without
// the bucket has had no executor: nothing to administer.
func openJetStreamStore(ctx context.Context, js jetstream.JetStream) (kvstore.Store, error) {
	kv, err := js.KeyValue(ctx, natsstore.DefaultBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("no KV bucket %s on this server: no executor has used it as its store (check --server)", natsstore.DefaultBucket)
	}
	if err != nil {
		return nil, fmt.Errorf("opening the KV bucket %s: %w", natsstore.DefaultBucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the KV bucket %s: %w", natsstore.DefaultBucket, err)
	}
	c := st.Config()
	s, err := natsstore.New(ctx, js, natsstore.Config{
		Bucket: c.Bucket, Replicas: c.Replicas, Retention: c.TTL, Storage: c.Storage,
		MaxValueSize: max(c.MaxValueSize, 0), // the bucket says -1 for no limit; the store, 0
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

func openPostgresStore(ctx context.Context, o *storeOptions) (kvstore.Store, func(), error) {
	pool, err := pgxpool.New(ctx, o.postgresURL)
	if err != nil {
		return nil, nil, badInput(fmt.Errorf("--postgres-url: %w", err))
	}
	s, err := pgstore.New(ctx, pool, pgstore.Config{Schema: o.pgSchema, Retention: o.retention, SweepInterval: -1})
	if errors.Is(err, pgstore.ErrBadConfig) {
		pool.Close()
		return nil, nil, badInput(err)
	}
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	return s, func() { _ = s.Close(); pool.Close() }, nil
}

func openRedisStore(o *storeOptions) (kvstore.Store, func(), error) {
	opts, err := redis.ParseURL(o.redisURL)
	if err != nil {
		return nil, nil, badInput(fmt.Errorf("--redis-url: %w", err))
	}
	c := redis.NewClient(opts)
	s, err := redisstore.New(c, redisstore.Config{Prefix: o.redisPrefix, Retention: o.retention})
	if err != nil {
		_ = c.Close()
		return nil, nil, badInput(err)
	}
	return s, func() { _ = s.Close(); _ = c.Close() }, nil
}

// redactURL hides a password in a URL that is printed.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// busConn asks an executor over the admin subjects.
type busConn struct {
	s *session
	g *globalOptions
}

func (b *busConn) Inspect(ctx context.Context, tenant, key string) (*admin.RecordInfo, error) {
	return b.s.admin.Inspect(ctx, tenant, key)
}

func (b *busConn) Resolve(ctx context.Context, req admin.ResolveRequest) (*admin.RecordInfo, error) {
	return b.s.admin.Resolve(ctx, req)
}

func (b *busConn) Forget(ctx context.Context, tenant string) (int64, error) {
	return b.s.admin.Forget(ctx, tenant)
}

func (b *busConn) explain(ctx context.Context, tenant, key string, err error) error {
	return adminError(ctx, b.g, tenant, key, err)
}

func (b *busConn) Close() { b.s.Close() }

// directConn works on a store itself, through an in-process admin.Service, so
// that a resolution publishes the same audit event an executor's would.
type directConn struct {
	g          *globalOptions
	kind       string
	where      string // the store, for messages
	store      kvstore.Store
	closeStore func()
	admin      *admin.Service
	nats       *session // nil when NATS could not be reached
	natsErr    error    // why, when nats is nil and was needed
}

func (d *directConn) Inspect(ctx context.Context, tenant, key string) (*admin.RecordInfo, error) {
	rec, err := d.store.Get(ctx, tenant, key)
	if err != nil {
		return nil, err
	}
	return admin.NewRecordInfo(rec), nil
}

func (d *directConn) Resolve(ctx context.Context, req admin.ResolveRequest) (*admin.RecordInfo, error) {
	return d.admin.Resolve(ctx, req)
}

func (d *directConn) Forget(ctx context.Context, tenant string) (int64, error) {
	return d.admin.Forget(ctx, tenant)
}

func (d *directConn) explain(ctx context.Context, tenant, key string, err error) error {
	noNATS := ""
	if d.natsErr != nil {
		noNATS = fmt.Sprintf("\n(NATS could not be reached: %v)", d.natsErr)
	}
	switch {
	case errors.Is(err, admin.ErrAuditNotPublished):
		return fmt.Errorf("the resolution was applied to %s, but its resolved event was NOT stored in TOOLEXEC_EVENTS: %w%s",
			d.where, err, noNATS)
	case errors.Is(err, kvstore.ErrInvalid), errors.Is(err, kvstore.ErrTooLarge):
		return badInput(fmt.Errorf("%s refused the request: %w", d.where, err))
	case errors.Is(err, kvstore.ErrNotFound), errors.Is(err, kvstore.ErrNotIndeterminate):
		return adminError(ctx, d.g, tenant, key, err)
	case errors.Is(err, kvstore.ErrUnavailable):
		hint := ""
		if errors.Is(err, pgstore.ErrNoSchema) {
			hint = "\n(no toolexec tables in that schema: check --postgres-schema, or start an executor once with --ensure-schema)"
		}
		return fmt.Errorf("working on %s: %w%s%s", d.where, err, hint, noNATS)
	case ended(ctx):
		return fmt.Errorf("%s did not answer within --timeout %v: %w", d.where, d.g.timeout, err)
	}
	return fmt.Errorf("working on %s: %w", d.where, err)
}

func (d *directConn) Close() {
	if d.closeStore != nil {
		d.closeStore()
	} else if d.store != nil {
		_ = d.store.Close()
	}
	if d.nats != nil {
		d.nats.Close()
	}
}
