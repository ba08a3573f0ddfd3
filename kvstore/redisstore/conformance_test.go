package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

var _ kvstoretest.RawDumper = (*redisstore.Store)(nil)

// Every store in this module withdraws claims read back (kvstore.Withdrawer).
var _ kvstore.Withdrawer = (*redisstore.Store)(nil)

// TestConformance runs the store contract's suite against Redis, each subtest on
// a prefix of its own. Leases and retention follow Redis's clock, so Advance is
// nil and the suite sleeps. The suite's outage check runs on stores with that
// prefix whose Redis is out of reach: a dead port, a closed client, and a store
// closed itself.
func TestConformance(t *testing.T) {
	t.Parallel()
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		c := newClient(t)
		cfg := redisstore.Config{Prefix: uniquePrefix(t, c), Retention: opts.Retention}
		s := openStore(t, c, cfg)
		var _ kvstore.Store = s
		return kvstoretest.Harness{Store: s, Outages: []kvstoretest.Outage{
			{Name: "dead port", Store: func() kvstore.Store {
				dead := redis.NewClient(&redis.Options{Addr: testenv.FreeAddr(t), DialTimeout: time.Second, MaxRetries: -1, DialerRetries: 1})
				t.Cleanup(func() { _ = dead.Close() })
				return openStore(t, dead, cfg)
			}},
			{Name: "closed client", Store: func() kvstore.Store {
				closed := newClient(t)
				s := openStore(t, closed, cfg)
				_ = closed.Close()
				return s
			}},
			{Name: "closed store", Store: func() kvstore.Store {
				s := openStore(t, newClient(t), cfg)
				_ = s.Close()
				return s
			}},
		}}
	})
}

// openStore returns a store over c with cfg, closed when the test ends.
func openStore(t *testing.T, c *redis.Client, cfg redisstore.Config) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
