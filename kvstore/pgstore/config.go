package pgstore

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"
)

// Defaults applied by [New] to zero fields of [Config].
const (
	DefaultSchema          = "toolexec"
	DefaultRetention       = 24 * time.Hour
	DefaultSweepInterval   = time.Minute
	DefaultSweepBatch      = 1000
	DefaultRecheckInterval = 5 * time.Second
	DefaultMaxOutcomeBytes = 1 << 20
	DefaultOpTimeout       = 5 * time.Second
	DefaultMaxBatch        = 64
	// DefaultBatchWriters is the most batch writers a store has by default;
	// see Config.BatchWriters.
	DefaultBatchWriters = 4
	// MaxReasonBytes bounds an indeterminate record's reason; longer reasons are
	// refused with kvstore.ErrTooLarge.
	MaxReasonBytes = 1024
)

// Config configures a [Store]. The zero value is usable: every zero field takes the
// default named on it.
type Config struct {
	// Schema is the PostgreSQL schema that holds the store's tables. Default
	// "toolexec". It must be a plain lower-case identifier (a-z, 0-9, _, not starting
	// with a digit, at most 63 bytes). Stores with different schemas share nothing,
	// which is how tests run side by side in one database.
	Schema string

	// Retention is how long a record stays after its last write (claim, renewal,
	// record, mark, resolve); after that it reads as absent and its key is free
	// again. Default 24h. Must not be negative.
	Retention time.Duration

	// Channel is the LISTEN/NOTIFY channel on which a write to a record that a
	// waiter watches notifies, with the record's digest as the payload. Default
	// Schema + "_records". Same rules as Schema, but
	// upper-case letters are allowed (the name is always quoted). Every store that
	// shares a schema must use the same channel, or waiters miss notifications
	// (they still wake at the lease deadline and every RecheckInterval).
	Channel string

	// SweepInterval is how often the background sweeper started by New deletes
	// expired rows. Default 1m; a negative value disables the sweeper (expired rows
	// still read as absent; call Sweep yourself).
	SweepInterval time.Duration

	// SweepBatch is how many expired rows one sweeping statement deletes at most.
	// Default 1000. Must not be negative.
	SweepBatch int

	// RecheckInterval is the safety net under notifications: a waiter re-reads its
	// record at least this often even if no notification arrives. Default 5s. Must
	// not be negative.
	RecheckInterval time.Duration

	// MaxOutcomeBytes is the largest outcome Record and Resolve accept; larger ones
	// get kvstore.ErrTooLarge. Default 1 MiB (what a NATS message carries by default,
	// so stores agree). Must not be negative.
	MaxOutcomeBytes int

	// OpTimeout bounds how long one operation waits for the database (for Wait:
	// each of its reads), whatever the caller's context allows: a database that
	// stops answering fails the operation with kvstore.ErrUnavailable instead of
	// hanging it. EnsureSchema and Sweep are not bounded by it. Default 5s; a
	// negative value turns the bound off.
	OpTimeout time.Duration

	// MaxBatch is how many writes one transaction may carry. Claims and the
	// holder's writes (record, renew, release, mark indeterminate) that arrive
	// while earlier ones are being written go together, in one round trip and
	// one commit — one WAL flush for all of them. Nothing waits on purpose: at
	// low load every write goes alone, at once. Default 64; 1 turns group
	// commit off (every write its own statement and its own transaction). Must
	// not be negative.
	MaxBatch int

	// BatchWriters is how many group commits may be in flight at once, each on
	// a connection of the pool. Default: one per two CPUs (GOMAXPROCS), at least
	// one and at most DefaultBatchWriters, and no more than half the pool's
	// connections, so that reads and waiters always find a connection. Fewer
	// writers make larger batches, so fewer commits, each costing the database
	// CPU and a WAL flush; more let batches overlap where there are CPUs to
	// run them (docs/BENCHMARKS.md, row (c), compares one writer with four).
	// New returns an error matching ErrBadConfig when it is negative.
	BatchWriters int

	// Logger receives errors from the background sweeper and the notification
	// listener, which have no caller to return them to. Default: discarded.
	Logger *slog.Logger
}

var (
	schemaRE  = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
	channelRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
)

// withDefaults returns c with defaults applied, or an error wrapping ErrBadConfig.
func (c Config) withDefaults() (Config, error) {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	if !schemaRE.MatchString(c.Schema) {
		return c, fmt.Errorf("%w: schema %q must match %s", ErrBadConfig, c.Schema, schemaRE)
	}
	if c.Channel == "" {
		c.Channel = c.Schema + "_records"
	}
	if !channelRE.MatchString(c.Channel) {
		return c, fmt.Errorf("%w: channel %q must match %s", ErrBadConfig, c.Channel, channelRE)
	}
	switch {
	case c.Retention < 0:
		return c, fmt.Errorf("%w: negative retention %v", ErrBadConfig, c.Retention)
	case c.Retention == 0:
		c.Retention = DefaultRetention
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	switch {
	case c.SweepBatch < 0:
		return c, fmt.Errorf("%w: negative sweep batch %d", ErrBadConfig, c.SweepBatch)
	case c.SweepBatch == 0:
		c.SweepBatch = DefaultSweepBatch
	}
	switch {
	case c.RecheckInterval < 0:
		return c, fmt.Errorf("%w: negative recheck interval %v", ErrBadConfig, c.RecheckInterval)
	case c.RecheckInterval == 0:
		c.RecheckInterval = DefaultRecheckInterval
	}
	switch {
	case c.MaxOutcomeBytes < 0:
		return c, fmt.Errorf("%w: negative max outcome size %d", ErrBadConfig, c.MaxOutcomeBytes)
	case c.MaxOutcomeBytes == 0:
		c.MaxOutcomeBytes = DefaultMaxOutcomeBytes
	}
	switch {
	case c.MaxBatch < 0:
		return c, fmt.Errorf("%w: negative max batch %d", ErrBadConfig, c.MaxBatch)
	case c.MaxBatch == 0:
		c.MaxBatch = DefaultMaxBatch
	}
	if c.BatchWriters < 0 {
		return c, fmt.Errorf("%w: negative batch writers %d", ErrBadConfig, c.BatchWriters)
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = DefaultOpTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
