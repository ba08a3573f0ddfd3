package redisstore_test

import (
	"testing"

	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

var _ kvstoretest.RawDumper = (*redisstore.Store)(nil)

// TestConformance runs the store contract's suite against Redis, each subtest on
// a prefix of its own. Leases and retention follow Redis's clock, so Advance is
// nil and the suite sleeps.
func TestConformance(t *testing.T) {
	t.Parallel()
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		s, _ := newStore(t, redisstore.Config{Retention: opts.Retention})
		var _ kvstore.Store = s
		return kvstoretest.Harness{Store: s}
	})
}
