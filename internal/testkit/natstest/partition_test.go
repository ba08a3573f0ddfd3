package natstest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

// TestProxiedClusterPartition isolates the leader of an R3 bucket: it keeps no
// route (so none bypasses the proxies), a client connected to it cannot write,
// the other two elect a leader and take writes; once healed, the node routes
// to its peers again and holds what was written without it.
func TestProxiedClusterPartition(t *testing.T) {
	c := natstest.StartProxiedCluster(t, 3)
	nc := natstest.ConnectCluster(t, c.Servers)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "p", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k", []byte("before")); err != nil {
		t.Fatal(err)
	}
	leader := natstest.StreamLeader(c.Servers, natstest.GlobalAccount, "KV_p", 10*time.Second)
	if leader == nil {
		t.Fatal("no leader of KV_p")
	}
	victim := -1
	var majority []*server.Server
	for i, s := range c.Servers {
		if s == leader {
			victim = i
		} else {
			majority = append(majority, s)
		}
	}
	// A client of the victim's own, which the partition leaves connected.
	minority := natstest.Connect(t, leader, nats.DontRandomize())
	minorityKV, err := natstest.JetStream(t, minority).KeyValue(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}

	c.Isolate(victim)
	// The node notices its routes reset within moments. Then, for longer than a node's pause between two attempts to dial a route (1s):
	// a route that bypassed the proxies would be back by then.
	time.Sleep(500 * time.Millisecond)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if n := leader.NumRoutes(); n != 0 {
			if rz, err := leader.Routez(nil); err == nil && len(rz.Routes) > 0 {
				t.Fatalf("isolated %s still routes to %s at %s:%d", leader.Name(), rz.Routes[0].RemoteName, rz.Routes[0].IP, rz.Routes[0].Port)
			}
		}
	}
	if !minority.IsConnected() {
		t.Fatal("the isolated node's client was disconnected")
	}
	next := natstest.StreamLeader(majority, natstest.GlobalAccount, "KV_p", 30*time.Second)
	if next == nil {
		t.Fatal("the majority elected no leader of KV_p")
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	_, err = minorityKV.Put(wctx, "k", []byte("minority"))
	wcancel()
	if err == nil {
		t.Fatal("a write through the isolated node succeeded")
	}
	majorityKV, err := natstest.JetStream(t, natstest.Connect(t, majority[0])).KeyValue(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	var werr error
	for i := 0; i < 100; i++ {
		if _, werr = majorityKV.Put(ctx, "k", []byte("majority")); werr == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if werr != nil {
		t.Fatalf("write on the majority side: %v", werr)
	}

	c.Heal()
	if err := c.WaitRoutes(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := natstest.WaitHealthy(c.Servers, time.Minute); err != nil {
		t.Fatal(err)
	}
	// kv.Get is a direct get, which any replica answers: the healed node's
	// own copy may still be a moment behind.
	wait.EventuallyNoError(t, 10*time.Second, "the healed node to read the majority's value", func() error {
		e, err := minorityKV.Get(ctx, "k")
		if err == nil && string(e.Value()) == "majority" {
			return nil
		}
		return fmt.Errorf("Get through the healed node = %v, %v; want majority", e, err)
	})
}
