package redisstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// Defaults applied by [New] to zero fields of [Config].
const (
	DefaultPrefix       = "toolexec"
	DefaultRetention    = 24 * time.Hour
	DefaultMaxValueSize = 1 << 20
	DefaultWaitRecheck  = time.Second
	DefaultForgetBatch  = 500
	DefaultMaxBatch     = 128
	DefaultPipelines    = 1
)

// Config configures a [Store]. The zero value is ready to use: every zero field
// takes its default.
type Config struct {
	// Prefix starts every key and channel name the store uses, so that several
	// deployments (or tests running in parallel) can share one Redis. It must not
	// contain braces, spaces or control characters. Default "toolexec".
	Prefix string

	// Retention is how long a record lives after its last write (the key's PX,
	// reset on every write). Stores sharing a prefix should agree on it. Must be at
	// least a millisecond. Default 24h.
	Retention time.Duration

	// MaxValueSize caps the length in bytes of an outcome or a reason; longer ones
	// are refused with kvstore.ErrTooLarge and nothing is written. Redis itself
	// accepts up to 512 MiB; the default, 1 MiB, keeps records the size the
	// JetStream store allows. Default 1 MiB.
	MaxValueSize int

	// WaitRecheck is how often a blocked Wait re-reads the record even without a
	// notification, the safety net for a message lost while its subscription was
	// reconnecting. Default 1s.
	WaitRecheck time.Duration

	// ForgetBatch is how many records Forget removes per script call. Default 500.
	ForgetBatch int

	// MaxBatch is how many script runs one pipeline may carry. On a
	// *redis.Client, runs that arrive while earlier ones are on the wire go
	// together, as one pipeline: one write and one read for all of them, on
	// either side (see pipe.go). Nothing waits on purpose: at low load every
	// run goes alone, at once. Other clients (cluster, ring) always run each
	// script alone. Default 128; 1 turns pipelining off. Must not be negative.
	MaxBatch int

	// Pipelines is how many callers may send scripts at once, each on a
	// connection of the client's pool. Fewer make larger pipelines; more let
	// them overlap where there are CPUs to run them (docs/BENCHMARKS.md
	// compares one with two). Default 1. New returns an error matching
	// kvstore.ErrInvalid when it is negative.
	Pipelines int
}

// withDefaults returns c with defaults applied, or an error wrapping
// kvstore.ErrInvalid for a field out of range.
func (c Config) withDefaults() (Config, error) {
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(c.Prefix, "{} \t\r\n") || strings.IndexFunc(c.Prefix, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
		return c, fmt.Errorf("redisstore: prefix %q: %w: braces, spaces and control characters are not allowed", c.Prefix, kvstore.ErrInvalid)
	}
	switch {
	case c.Retention == 0:
		c.Retention = DefaultRetention
	case c.Retention < time.Millisecond:
		return c, fmt.Errorf("redisstore: retention %v: %w: must be at least 1ms", c.Retention, kvstore.ErrInvalid)
	}
	for _, err := range []error{
		orDefault(&c.MaxValueSize, DefaultMaxValueSize, "max value size"),
		orDefault(&c.WaitRecheck, DefaultWaitRecheck, "wait recheck"),
		orDefault(&c.ForgetBatch, DefaultForgetBatch, "forget batch"),
		orDefault(&c.MaxBatch, DefaultMaxBatch, "max batch"),
		orDefault(&c.Pipelines, DefaultPipelines, "pipelines"),
	} {
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// orDefault sets *v to def when it is zero, and refuses a negative one.
func orDefault[T int | time.Duration](v *T, def T, what string) error {
	switch {
	case *v == 0:
		*v = def
	case *v < 0:
		return fmt.Errorf("redisstore: %s %v: %w", what, *v, kvstore.ErrInvalid)
	}
	return nil
}
