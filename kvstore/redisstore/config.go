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
	switch {
	case c.MaxValueSize == 0:
		c.MaxValueSize = DefaultMaxValueSize
	case c.MaxValueSize < 0:
		return c, fmt.Errorf("redisstore: max value size %d: %w", c.MaxValueSize, kvstore.ErrInvalid)
	}
	switch {
	case c.WaitRecheck == 0:
		c.WaitRecheck = DefaultWaitRecheck
	case c.WaitRecheck < 0:
		return c, fmt.Errorf("redisstore: wait recheck %v: %w", c.WaitRecheck, kvstore.ErrInvalid)
	}
	switch {
	case c.ForgetBatch == 0:
		c.ForgetBatch = DefaultForgetBatch
	case c.ForgetBatch < 0:
		return c, fmt.Errorf("redisstore: forget batch %d: %w", c.ForgetBatch, kvstore.ErrInvalid)
	}
	return c, nil
}
