package natsstore

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/kvstore/kvstoretest"
)

// TestConformance runs the store suite against the single-node server, a bucket
// per subtest.
func TestConformance(t *testing.T) {
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		s, _ := newTestStore(t, []*server.Server{single}, Config{Retention: opts.Retention})
		return kvstoretest.Harness{Store: s}
	})
}

// TestConformanceR3 runs the store suite against the 3-node cluster with
// replicated (R3) buckets: conflicts come back in other shapes there, and reads
// may be answered by followers.
func TestConformanceR3(t *testing.T) {
	servers := testCluster(t)
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		s, _ := newTestStore(t, servers, Config{Replicas: 3, Retention: opts.Retention})
		return kvstoretest.Harness{Store: s}
	})
}
