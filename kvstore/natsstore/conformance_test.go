package natsstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
)

// Every store in this module withdraws claims read back (kvstore.Withdrawer).
var _ kvstore.Withdrawer = (*Store)(nil)

// TestConformance runs the store suite against the single-node server, a bucket
// per subtest.
func TestConformance(t *testing.T) {
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		return harness(t, []*server.Server{single}, Config{Retention: opts.Retention})
	})
}

// TestConformanceR3 runs the store suite against the 3-node cluster with
// replicated (R3) buckets: conflicts come back in other shapes there, and reads
// may be answered by followers.
func TestConformanceR3(t *testing.T) {
	servers := testCluster(t)
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		return harness(t, servers, Config{Replicas: 3, Retention: opts.Retention})
	})
}

// harness returns a store on a fresh bucket on servers, with two outages for the
// suite's outage check: a store on that bucket whose connection is closed, and
// one on a server of its own (a bucket of the same name) that is shut down, its
// client told not to reconnect. (A client that keeps reconnecting fails only at
// its context's deadline: TestServerDown.)
func harness(t *testing.T, servers []*server.Server, cfg Config) kvstoretest.Harness {
	s, _ := newTestStore(t, servers, cfg)
	cfg.Bucket = s.Bucket()
	return kvstoretest.Harness{Store: s, Outages: []kvstoretest.Outage{
		{Name: "closed connection", Store: func() kvstore.Store {
			nc, js := connectTo(t, servers)
			st, err := New(testCtx(t), js, cfg)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			nc.Close()
			return st
		}},
		{Name: "server shut down", Store: func() kvstore.Store {
			srv := natstest.Start(t)
			nc, js := connectTo(t, []*server.Server{srv}, nats.NoReconnect())
			own := cfg
			own.Replicas = 1
			st, err := New(testCtx(t), js, own)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			t.Cleanup(func() { st.Close() })
			natstest.Shutdown(srv)
			waitClosed(t, nc)
			return st
		}},
	}}
}

// waitClosed waits until nc has noticed that its server is gone.
func waitClosed(t *testing.T, nc *nats.Conn) {
	t.Helper()
	wait.EventuallyNoError(t, 10*time.Second, "the connection to notice its server's shutdown", func() error {
		if !nc.IsClosed() {
			return fmt.Errorf("status %v", nc.Status())
		}
		return nil
	})
}
