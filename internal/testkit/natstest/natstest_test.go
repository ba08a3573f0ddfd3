package natstest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

func TestStartServesJetStream(t *testing.T) {
	s := natstest.Start(t)
	if !s.JetStreamEnabled() {
		t.Fatal("JetStream is not enabled")
	}
	if s.JetStreamConfig().SyncAlways {
		t.Error("SyncAlways is on without the option")
	}
	nc := natstest.Connect(t, s)
	if got := nc.ConnectedUrl(); got == "nats://127.0.0.1:4222" {
		t.Fatalf("connected to the default port %s: must be a random one", got)
	}
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "v" {
		t.Fatalf("Get = %v, %v; want v", e, err)
	}
}

func TestSyncAlways(t *testing.T) {
	s := natstest.Start(t, natstest.SyncAlways())
	if !s.JetStreamConfig().SyncAlways {
		t.Fatal("SyncAlways option did not reach the server")
	}
}

func TestServersAreIsolated(t *testing.T) {
	a, b := natstest.Start(t), natstest.Start(t)
	if a.ClientURL() == b.ClientURL() {
		t.Fatalf("two servers share %s", a.ClientURL())
	}
	if a.StoreDir() == b.StoreDir() {
		t.Fatalf("two servers share store dir %s", a.StoreDir())
	}
}

// TestClusterFailover starts a 3-node cluster, writes to an R3 bucket, kills the
// stream's leader, checks that the survivors elect another and keep the data,
// then restarts the dead node and checks that it catches up.
func TestClusterFailover(t *testing.T) {
	servers := natstest.StartCluster(t, 3)
	for _, s := range servers {
		if !s.JetStreamIsClustered() {
			t.Fatalf("%s is not clustered", s.Name())
		}
		if got := len(s.JetStreamClusterPeers()); got != 0 && got != 3 {
			t.Fatalf("%s sees %d peers, want 3", s.Name(), got)
		}
	}
	nc := natstest.ConnectCluster(t, servers)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "r3", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("before")); err != nil {
		t.Fatal(err)
	}

	dead := natstest.KillStreamLeader(t, servers, natstest.GlobalAccount, "KV_r3")
	if dead.Running() {
		t.Fatal("the killed leader is still running")
	}
	next := natstest.StreamLeader(servers, natstest.GlobalAccount, "KV_r3", 20*time.Second)
	if next == nil {
		t.Fatal("no new stream leader after killing the old one")
	}
	if next == dead {
		t.Fatal("the dead server is reported as leader")
	}
	// The client may still be reconnecting: retry the write until it lands.
	var werr error
	for i := 0; i < 100; i++ {
		if _, werr = kv.Put(ctx, "k", []byte("after")); werr == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if werr != nil {
		t.Fatalf("write after failover: %v", werr)
	}

	back := natstest.Restart(t, dead)
	if back == dead || !back.Running() {
		t.Fatal("Restart did not start a new server")
	}
	for i, s := range servers {
		if s == dead {
			servers[i] = back
		}
	}
	if err := natstest.WaitClusterReady(servers, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 30*time.Second, "the restarted node to catch up with the stream", func() bool {
		return back.JetStreamIsStreamCurrent(natstest.GlobalAccount, "KV_r3")
	})
	e, err := kv.Get(ctx, "k")
	if err != nil || string(e.Value()) != "after" {
		t.Fatalf("Get after restart = %v, %v; want after", e, err)
	}
}

func TestRestartRefusesForeignServer(t *testing.T) {
	// A server shut down with Shutdown is forgotten: Restart must say so rather
	// than start something unrelated. Checked through a fake TB.
	s := natstest.Start(t)
	natstest.Shutdown(s)
	ft := &fatalTB{TB: t}
	func() {
		defer func() { _ = recover() }()
		natstest.Restart(ft, s)
	}()
	if !ft.failed {
		t.Fatal("Restart of a forgotten server did not fail the test")
	}
}

// fatalTB records Fatalf instead of stopping the real test.
type fatalTB struct {
	testing.TB
	failed bool
}

func (f *fatalTB) Helper() {}
func (f *fatalTB) Fatalf(format string, args ...any) {
	f.failed = true
	panic(errors.New("fatal"))
}
