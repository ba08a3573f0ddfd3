package faults_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/tests/faults"
)

// TestClusterNodeLosesStore runs three executor processes against a three-node
// JetStream cluster (every write synced; streams and KV bucket replicated
// three times). Under load it stops a node that does not lead the KV bucket's
// stream, deletes its whole store directory, and starts it again with the
// same name and ports: a node whose disk was replaced. It must catch up from
// its peers. Then the same is done to the node leading the KV bucket's stream.
// (The long suite repeats both rounds.) At the end every node must hold the
// same messages of every stream and the same state of the shared consumer,
// with nothing reported lost, and the checker must pass.
func TestClusterNodeLosesStore(t *testing.T) {
	parallel(t)
	servers := natstest.StartCluster(t, 3, natstest.SyncAlways())
	s := newScenario(t, "store-loss", clientURLs(servers), 3)
	s.serverStops = true
	ctx := ctxFor(t, pick(3*time.Minute, 15*time.Minute))
	rounds, down := pick(1, 2), pick(time.Second, 3*time.Second)
	keys, perKey, rate := pick(150, 1500), 4, pick(100, 150)
	for i := range 3 {
		s.executor(fmt.Sprintf("x%d", i), "--concurrency", "16")
	}
	s.step("3 executors ready")

	kvStream := "KV_" + natsstore.DefaultBucket
	calls := plan("l", keys, perKey)
	s.pub.Rate = rate
	done := s.publish(ctx, calls)
	losses := 2 * rounds
	for i := range losses {
		s.waitPublished(ctx, len(calls)*(i+1)/(losses+1))
		leader := i%2 == 1
		victim := lossVictim(t, servers, kvStream, leader)
		name, dir := victim.Name(), victim.StoreDir()
		ledKV := victim.JetStreamIsStreamLeader(natstest.GlobalAccount, kvStream)
		what := fmt.Sprintf("%s (KV leader %v, meta leader %v) stopped, its store deleted, restarted empty", name, ledKV, victim.JetStreamIsLeader())
		f := s.rec.Inject(faults.Fault{Name: what, StoreAway: true})
		s.step("loss %d: %s, after %d calls", i, what, s.pub.Published())
		victim.Shutdown()
		victim.WaitForShutdown()
		s.rec.MarkAway(f)
		if ledKV {
			// Certainly away only until the last look that found no leader.
			seenAway := time.Now()
			for deadline := seenAway.Add(30 * time.Second); ; {
				look := time.Now()
				if l := natstest.StreamLeader(servers, natstest.GlobalAccount, kvStream, 0); l != nil {
					s.step("loss %d: new leader of %s: %s", i, kvStream, l.Name())
					break
				}
				seenAway = look
				if look.After(deadline) {
					t.Fatalf("no new leader of %s within 30s", kvStream)
				}
				time.Sleep(10 * time.Millisecond)
			}
			s.rec.MarkBackAt(f, seenAway)
		} else {
			s.rec.MarkBack(f)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		time.Sleep(down)
		started := time.Now()
		restarted := natstest.Restart(t, victim)
		for j := range servers {
			if servers[j] == victim {
				servers[j] = restarted
			}
		}
		if err := natstest.WaitClusterReady(servers, time.Minute); err != nil {
			t.Fatalf("cluster after restarting %s: %v", name, err)
		}
		if err := natstest.WaitHealthy(servers, 2*time.Minute); err != nil {
			t.Fatalf("after restarting %s empty: %v", name, err)
		}
		s.rec.Repair(f)
		info, err := restarted.Jsz(jszOptions)
		if err != nil {
			t.Fatal(err)
		}
		held := replicasOf(info)
		s.step("loss %d: %s current %v after starting empty; it holds %d streams (%s: %d messages)",
			i, name, time.Since(started).Round(time.Millisecond), len(held), kvStream, held[kvStream].Msgs)
		if len(held) != 3 {
			t.Errorf("loss %d: %s holds %d streams once current, want 3", i, name, len(held))
		}
	}
	s.finishPublished(ctx, done, len(calls))
	s.logReplicas(waitReplicasAgree(t, time.Minute, inProcessJsz(func() []*server.Server { return servers })))
}

// lossVictim returns the node leading stream when leader is set, else a node
// that does not lead it (one that does not lead the meta group either, when
// there is one).
func lossVictim(t *testing.T, servers []*server.Server, stream string, leader bool) *server.Server {
	t.Helper()
	l := natstest.StreamLeader(servers, natstest.GlobalAccount, stream, 10*time.Second)
	if l == nil {
		t.Fatalf("no leader of %s", stream)
	}
	if leader {
		return l
	}
	var pick *server.Server
	for _, srv := range servers {
		if srv == l {
			continue
		}
		if pick == nil || !srv.JetStreamIsLeader() {
			pick = srv
		}
	}
	return pick
}
