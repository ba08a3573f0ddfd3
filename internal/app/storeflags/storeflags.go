package storeflags

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/tesserix/toolexec/internal/retry"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/kvstore/pgstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// Store names, the values of --store.
const (
	JetStream = "jetstream"
	Postgres  = "postgres"
	Redis     = "redis"
	Memory    = "memory"
)

// Flag names.
const (
	FlagStore            = "store"
	FlagPostgresURL      = "postgres-url"
	FlagPostgresSchema   = "postgres-schema"
	FlagPostgresMaxBatch = "postgres-max-batch"
	FlagEnsureSchema     = "ensure-schema"
	FlagRedisURL         = "redis-url"
	FlagRedisPrefix      = "redis-prefix"
	FlagRetention        = "retention"
)

// EnvPrefix is the prefix of the variables that stand in for flags:
// --postgres-url is TOOLEXEC_POSTGRES_URL.
const EnvPrefix = "TOOLEXEC_"

// EnvName returns the variable that stands in for flag.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// DefaultRetention is the default of --retention for both programs.
const DefaultRetention = 24 * time.Hour

// Use says which program the flags are for.
type Use int

const (
	// Serve is the executor's: --store names the store it runs on (default
	// jetstream; memory allowed), which it creates or sets up as the flags say.
	Serve Use = iota
	// Administer is the emitter's: --store (no default) names the store an
	// executor left behind, to work on directly; it is opened as it is, and an
	// empty --store means asking an executor over NATS instead.
	Administer
)

// Flags are the store flags' values. Register them on a flag set, Check them,
// then Open the store.
type Flags struct {
	// Kind is --store: JetStream, Postgres, Redis or Memory (Serve only), or
	// empty (Administer only: no store of one's own).
	Kind string
	// PostgresURL is --postgres-url, the database of a Postgres store.
	PostgresURL string
	// PostgresSchema is --postgres-schema, the schema holding its records.
	PostgresSchema string
	// PostgresMaxBatch is --postgres-max-batch, its group commit (Serve only).
	PostgresMaxBatch int
	// EnsureSchema is --ensure-schema: set up its schema when opened (Serve
	// only).
	EnsureSchema bool
	// RedisURL is --redis-url, the server of a Redis store.
	RedisURL string
	// RedisPrefix is --redis-prefix, the prefix of the keys holding its records.
	RedisPrefix string
	// Retention is --retention: how long a record is kept after its last write.
	Retention time.Duration

	use Use
	fs  *pflag.FlagSet // where they were registered
}

// administered are the flags that choose direct administration besides
// --store, each taking its TOOLEXEC_* variable when not given.
var administered = []string{FlagPostgresURL, FlagPostgresSchema, FlagRedisURL, FlagRedisPrefix, FlagRetention}

// Register defines the store flags of use on fs, with that program's defaults
// and help texts.
func (f *Flags) Register(fs *pflag.FlagSet, use Use) {
	f.use, f.fs = use, fs
	if use == Administer {
		// The URLs, schema, prefix and retention take the executor's TOOLEXEC_*
		// variables when --store is given (see Check); they are read then, not
		// shown as flag defaults: --help must not print a URL's password.
		fs.StringVar(&f.Kind, FlagStore, "",
			"work on this idempotency store directly instead of asking an executor: jetstream (the NATS server of --server), postgres or redis")
		fs.StringVar(&f.PostgresURL, FlagPostgresURL, "", "PostgreSQL URL, with --store postgres (default $TOOLEXEC_POSTGRES_URL)")
		fs.StringVar(&f.PostgresSchema, FlagPostgresSchema, pgstore.DefaultSchema,
			"PostgreSQL schema holding the records, with --store postgres ($TOOLEXEC_POSTGRES_SCHEMA if set)")
		fs.StringVar(&f.RedisURL, FlagRedisURL, "", "Redis URL, with --store redis (default $TOOLEXEC_REDIS_URL)")
		fs.StringVar(&f.RedisPrefix, FlagRedisPrefix, redisstore.DefaultPrefix,
			"prefix of the Redis keys holding the records, with --store redis ($TOOLEXEC_REDIS_PREFIX if set)")
		fs.DurationVar(&f.Retention, FlagRetention, DefaultRetention,
			"with --store postgres or redis: how long a resolved record is kept; give the executors' --retention ($TOOLEXEC_RETENTION if set)")
		return
	}
	fs.StringVar(&f.Kind, FlagStore, JetStream, "idempotency store: jetstream, postgres, redis or memory")
	fs.StringVar(&f.PostgresURL, FlagPostgresURL, "", "PostgreSQL URL for --store postgres")
	fs.StringVar(&f.PostgresSchema, FlagPostgresSchema, pgstore.DefaultSchema, "PostgreSQL schema holding the records")
	fs.IntVar(&f.PostgresMaxBatch, FlagPostgresMaxBatch, pgstore.DefaultMaxBatch,
		"most claims and record writes one PostgreSQL transaction carries when they arrive together (group commit); 1: each its own")
	fs.StringVar(&f.RedisURL, FlagRedisURL, "", "Redis URL for --store redis (run Redis with AOF: without it a restart forgets every record)")
	fs.StringVar(&f.RedisPrefix, FlagRedisPrefix, redisstore.DefaultPrefix, "prefix of the Redis keys holding the records")
	fs.BoolVar(&f.EnsureSchema, FlagEnsureSchema, false, "create or migrate the PostgreSQL schema at start-up")
	fs.DurationVar(&f.Retention, FlagRetention, DefaultRetention, "how long idempotency records are kept after their last write")
}

// Check refuses store flags that cannot work, before anything is contacted,
// naming the fix; every refusal is a *UsageError (joined, for Serve, when there
// are several). For Administer, when --store is given, it first gives the
// flags not set on the command line the value of their TOOLEXEC_* variable, if
// set; for Serve the executor applies the variables of all its flags itself,
// and checks --retention beside its lease.
func (f *Flags) Check() error {
	if f.use == Administer {
		return f.checkAdminister()
	}
	var errs []error
	switch f.Kind {
	case JetStream, Memory:
	case Postgres, Redis:
		errs = append(errs, f.needURL())
	default:
		errs = append(errs, usage(fmt.Errorf("--store %q: want jetstream, postgres, redis or memory", f.Kind)))
	}
	if f.PostgresMaxBatch < 1 {
		errs = append(errs, usage(fmt.Errorf("--postgres-max-batch %d: must be at least 1", f.PostgresMaxBatch)))
	}
	return errors.Join(errs...)
}

// needURL refuses a PostgreSQL or Redis store without its URL.
func (f *Flags) needURL() error {
	switch {
	case f.Kind == Postgres && f.PostgresURL == "":
		return usage(errors.New("--store postgres needs --postgres-url (or TOOLEXEC_POSTGRES_URL)"))
	case f.Kind == Redis && f.RedisURL == "":
		return usage(errors.New("--store redis needs --redis-url (or TOOLEXEC_REDIS_URL)"))
	}
	return nil
}

func (f *Flags) checkAdminister() error {
	fs := f.fs
	for _, name := range administered {
		if fs.Changed(name) && f.Kind == "" {
			return usage(fmt.Errorf("--%s needs --store", name))
		}
	}
	if f.Kind == "" {
		return nil
	}
	for _, name := range administered {
		if v := os.Getenv(EnvName(name)); v != "" && !fs.Changed(name) {
			if err := fs.Set(name, v); err != nil {
				return usage(fmt.Errorf("%s=%q: %w", EnvName(name), v, err))
			}
		}
	}
	switch f.Kind {
	case JetStream:
		if fs.Changed(FlagRetention) && os.Getenv(EnvName(FlagRetention)) == "" {
			return usage(errors.New("--retention is the KV bucket's own with --store jetstream"))
		}
	case Postgres, Redis:
		if err := f.needURL(); err != nil {
			return err
		}
	default:
		return usage(fmt.Errorf("--store %q: want jetstream, postgres or redis", f.Kind))
	}
	if f.Retention <= 0 {
		return usage(fmt.Errorf("--retention %v: must be positive", f.Retention))
	}
	return nil
}

// Describe names the store for messages, with a URL's password hidden: "the
// PostgreSQL store at postgres://ops:xxxxx@db/toolexec (schema toolexec)".
func (f *Flags) Describe() string {
	switch f.Kind {
	case JetStream:
		return "the JetStream KV store"
	case Postgres:
		return "the PostgreSQL store at " + redactURL(f.PostgresURL) + " (schema " + f.PostgresSchema + ")"
	case Redis:
		return "the Redis store at " + redactURL(f.RedisURL) + " (prefix " + f.RedisPrefix + ")"
	case Memory:
		return "the memory store"
	}
	return fmt.Sprintf("the store %q", f.Kind)
}

// redactURL hides a password in a URL that is printed.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Open opens the store the flags name and returns it with the function that
// closes it and what it holds (a pool, a client). js is the JetStream context
// of a jetstream store (unused otherwise); log receives the store's warnings.
//
// For Serve, a jetstream store's bucket is created or updated with replicas
// (the executor's --replicas) and the retention, a PostgreSQL schema is set up with EnsureSchema when asked, and
// errors name the store ("postgres store: ..."). For Administer, a jetstream
// bucket is opened as its executors made it and never created (an error says
// so when there is none; replicas is unused), a PostgreSQL store does not sweep, and the flags'
// errors are *UsageError. An unknown store is a *UsageError.
func (f *Flags) Open(ctx context.Context, js jetstream.JetStream, replicas int, log *slog.Logger) (kvstore.Store, func(), error) {
	switch f.Kind {
	case JetStream:
		if f.use == Administer {
			s, err := openBucket(ctx, js)
			if err != nil {
				return nil, nil, err
			}
			return s, func() { _ = s.Close() }, nil
		}
		s, err := newNATSStore(ctx, js, natsstore.Config{Replicas: replicas, Retention: f.Retention})
		if err != nil {
			return nil, nil, fmt.Errorf("jetstream store: %w", err)
		}
		return s, func() { _ = s.Close() }, nil
	case Memory:
		log.Warn("memory store: records live in this process only; other executors cannot see them")
		s := memstore.New(memstore.Config{Retention: f.Retention})
		return s, func() { _ = s.Close() }, nil
	case Postgres:
		return f.openPostgres(ctx, log)
	case Redis:
		return f.openRedis()
	}
	return nil, nil, usage(fmt.Errorf("unknown store %q", f.Kind))
}

func (f *Flags) openPostgres(ctx context.Context, log *slog.Logger) (kvstore.Store, func(), error) {
	pool, err := pgxpool.New(ctx, f.PostgresURL)
	if err != nil {
		if f.use == Administer {
			return nil, nil, usage(fmt.Errorf("--postgres-url: %w", err))
		}
		return nil, nil, fmt.Errorf("postgres store: %w", err)
	}
	cfg := pgstore.Config{Schema: f.PostgresSchema, Retention: f.Retention, MaxBatch: f.PostgresMaxBatch, Logger: log}
	if f.use == Administer {
		cfg = pgstore.Config{Schema: f.PostgresSchema, Retention: f.Retention, SweepInterval: -1}
	}
	s, err := pgstore.New(ctx, pool, cfg)
	if err != nil {
		pool.Close()
		if f.use == Administer {
			if errors.Is(err, pgstore.ErrBadConfig) {
				return nil, nil, usage(err)
			}
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("postgres store: %w", err)
	}
	if f.EnsureSchema && f.use == Serve {
		if err := s.EnsureSchema(ctx); err != nil {
			_ = s.Close()
			pool.Close()
			return nil, nil, fmt.Errorf("postgres store: ensuring the schema: %w", err)
		}
	}
	return s, func() { _ = s.Close(); pool.Close() }, nil
}

func (f *Flags) openRedis() (kvstore.Store, func(), error) {
	opts, err := redis.ParseURL(f.RedisURL)
	if err != nil {
		return nil, nil, usage(fmt.Errorf("--redis-url: %w", err))
	}
	client := redis.NewClient(opts)
	s, err := redisstore.New(client, redisstore.Config{Prefix: f.RedisPrefix, Retention: f.Retention})
	if err != nil {
		_ = client.Close()
		if f.use == Administer {
			return nil, nil, usage(err)
		}
		return nil, nil, fmt.Errorf("redis store: %w", err)
	}
	return s, func() { _ = s.Close(); _ = client.Close() }, nil
}

// openBucket opens the executors' KV bucket as it is: with its own retention
// and replicas, so that opening it changes nothing. A server without the bucket
// has had no executor: nothing to administer.
func openBucket(ctx context.Context, js jetstream.JetStream) (kvstore.Store, error) {
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
	s, err := newNATSStore(ctx, js, natsstore.Config{
		Bucket: c.Bucket, Replicas: c.Replicas, Retention: c.TTL, Storage: c.Storage,
		MaxValueSize: max(c.MaxValueSize, 0), // the bucket says -1 for no limit; the store, 0
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// newNATSStore opens the JetStream store, trying its setup requests again
// while a reply is lost or JetStream is not ready yet (see retry.Setup).
func newNATSStore(ctx context.Context, js jetstream.JetStream, cfg natsstore.Config) (*natsstore.Store, error) {
	var s *natsstore.Store
	err := retry.Setup(ctx, retry.SetupAttempt, func(ctx context.Context) (err error) {
		s, err = natsstore.New(ctx, js, cfg)
		return err
	})
	return s, err
}
