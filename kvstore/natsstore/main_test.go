package natsstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore"
)

// The package's tests share one single-node server, started by TestMain, and one
// 3-node cluster, started by the first test that needs it. Every store gets a
// bucket of its own.
var (
	testDir string
	single  *server.Server

	clusterOnce sync.Once
	cluster     []*server.Server
	clusterErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	raiseParallel(8)
	os.Exit(runTests(m))
}

// raiseParallel lets at least n parallel subtests run at once unless -parallel
// was given. The conformance suite's subtests mostly sleep past leases; at the
// default (GOMAXPROCS, 2 on small machines) they would wait for one another.
func raiseParallel(n int) {
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if f := flag.Lookup("test.parallel"); f != nil && !set {
		if cur, err := strconv.Atoi(f.Value.String()); err == nil && cur < n {
			_ = f.Value.Set(strconv.Itoa(n))
		}
	}
}

func runTests(m *testing.M) int {
	var err error
	testDir, err = os.MkdirTemp("", "natsstore-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(testDir)
	single, err = natstest.RunServer(filepath.Join(testDir, "single"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer natstest.Shutdown(single)
	defer func() {
		if cluster != nil {
			natstest.Shutdown(cluster...)
		}
	}()
	return m.Run()
}

// testCluster returns the shared 3-node cluster, starting it on first use.
func testCluster(t testing.TB) []*server.Server {
	t.Helper()
	clusterOnce.Do(func() {
		cluster, clusterErr = natstest.RunCluster(filepath.Join(testDir, "cluster"), 3)
	})
	if clusterErr != nil {
		t.Fatalf("starting the test cluster: %v", clusterErr)
	}
	return cluster
}

var bucketSeq atomic.Int64

// uniqueBucket returns a bucket name no other test uses.
func uniqueBucket() string {
	return fmt.Sprintf("t%d_%s", bucketSeq.Add(1), rand.Text()[:8])
}

// testCtx returns a context that ends with the test or after a minute.
func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// connectTo connects to s (or, for several servers, to the first with the others
// as fail-over) and returns a JetStream context on the connection.
func connectTo(t testing.TB, servers []*server.Server, opts ...nats.Option) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	var nc *nats.Conn
	if len(servers) == 1 {
		nc = natstest.Connect(t, servers[0], opts...)
	} else {
		nc = natstest.ConnectCluster(t, servers, opts...)
	}
	return nc, natstest.JetStream(t, nc)
}

// newTestStore makes a store on a fresh bucket (unless cfg names one) on its own
// connection to servers. The store is closed and its bucket deleted when the test
// ends.
func newTestStore(t testing.TB, servers []*server.Server, cfg Config) (*Store, jetstream.JetStream) {
	t.Helper()
	nc, js := connectTo(t, servers)
	if cfg.Bucket == "" {
		cfg.Bucket = uniqueBucket()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := New(ctx, js, cfg)
	if err != nil {
		t.Fatalf("New(%+v): %v", cfg, err)
	}
	t.Cleanup(func() {
		s.Close()
		if !nc.IsConnected() {
			return // the test stopped the server or closed the connection
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = js.DeleteKeyValue(ctx, cfg.Bucket)
	})
	return s, js
}

// digestOf returns a valid digest derived from s.
func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var tenantSeq atomic.Int64

// newTenant returns a tenant token no other test uses.
func newTenant() string { return fmt.Sprintf("tenant%d", tenantSeq.Add(1)) }

func claimReq(tenant, digest, holder string, lease time.Duration) kvstore.ClaimRequest {
	return kvstore.ClaimRequest{
		Tenant: tenant, Key: digest, Holder: holder, Lease: lease,
		CheckDigest: digestOf("check"), Tool: "book", RunID: "run-1", CallID: "call-" + holder,
	}
}

// mustClaim claims a fresh key and fails the test unless it was granted.
func mustClaim(t testing.TB, s kvstore.Store, req kvstore.ClaimRequest) kvstore.Lease {
	t.Helper()
	res, err := s.Claim(testCtx(t), req)
	if err != nil {
		t.Fatalf("Claim by %s: %v", req.Holder, err)
	}
	if !res.Claimed {
		t.Fatalf("Claim by %s of a free key refused: %+v", req.Holder, res.Record)
	}
	return res.Lease
}
