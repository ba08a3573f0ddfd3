package pgstore

import (
	"testing"

	"github.com/tesserix/toolexec/kvstore/kvstoretest"
)

var _ kvstoretest.RawDumper = (*Store)(nil)

// TestConformance runs the shared store suite, one fresh schema per subtest on
// one shared pool. Leases and retention are judged by the database clock, so the
// suite sleeps (Advance is nil).
func TestConformance(t *testing.T) {
	pool := testPool(t, nil)
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		return kvstoretest.Harness{Store: openStore(t, pool, Config{Retention: opts.Retention})}
	})
}
