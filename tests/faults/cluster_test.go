package faults_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/tests/faults"
)

// TestClusterLeadersKilledUnderLoad runs three executor processes against a
// three-node JetStream cluster (every node syncing each write), with both
// streams and the KV bucket replicated three times. Under load it kills the
// node leading the KV bucket's stream, waits for a new leader, brings the node
// back; then does the same to the JetStream meta leader. No call is lost, no
// booking reaches the downstream twice, and every indeterminate answer falls in
// a fault's window.
func TestClusterLeadersKilledUnderLoad(t *testing.T) {
	parallel(t)
	servers := natstest.StartCluster(t, 3, natstest.SyncAlways())
	s := newScenario(t, "cluster-leaders", clientURLs(servers), 3)
	s.serverStops = true
	s.step("streams ready")
	ctx := ctxFor(t, pick(3*time.Minute, 10*time.Minute))
	rounds, down := pick(1, 2), pick(time.Second, 2*time.Second)
	keys, perKey, rate := pick(150, 1500), 4, pick(100, 200)
	for i := range 3 {
		s.executor(fmt.Sprintf("x%d", i), "--concurrency", "16")
		s.step("executor x%d ready", i)
	}

	kvStream := "KV_" + natsstore.DefaultBucket
	calls := plan("c", keys, perKey)
	s.pub.Rate = rate
	done := s.publish(ctx, calls)
	kills := 2 * rounds
	for i := range kills {
		s.waitPublished(ctx, len(calls)*(i+1)/(kills+1))
		var victim *server.Server
		var what string
		if i%2 == 0 {
			victim = natstest.StreamLeader(servers, natstest.GlobalAccount, kvStream, 10*time.Second)
			what = "leader of " + kvStream
		} else {
			victim = metaLeader(servers, 10*time.Second)
			what = "JetStream meta leader"
		}
		if victim == nil {
			t.Fatalf("no %s to kill", what)
		}
		name := victim.Name()
		// The store is certainly away only while its stream has no leader: from
		// the kill of the node leading it until another is elected. A node that
		// does not lead it takes only its own connections down with it.
		ledKV := victim.JetStreamIsStreamLeader(natstest.GlobalAccount, kvStream)
		f := s.rec.Inject(faults.Fault{Name: fmt.Sprintf("kill %s (%s)", what, name), StoreAway: true})
		s.step("killing node %s, the %s (KV leader: %v), after %d calls", name, what, ledKV, s.pub.Published())
		victim.Shutdown()
		victim.WaitForShutdown()
		s.rec.MarkAway(f)
		if ledKV {
			// The store was certainly away only until the last look that found
			// no leader: a new one may take writes before a look sees it.
			var kvLeader *server.Server
			seenAway := time.Now()
			for deadline := seenAway.Add(30 * time.Second); ; {
				look := time.Now()
				if kvLeader = natstest.StreamLeader(servers, natstest.GlobalAccount, kvStream, 0); kvLeader != nil {
					break
				}
				seenAway = look
				if look.After(deadline) {
					t.Fatalf("no new leader of %s within 30s", kvStream)
				}
				time.Sleep(10 * time.Millisecond)
			}
			s.rec.MarkBackAt(f, seenAway)
			s.step("new leader of %s: %s", kvStream, kvLeader.Name())
		} else {
			s.rec.MarkBack(f)
		}
		if i%2 == 1 {
			leader := metaLeader(servers, 30*time.Second)
			if leader == nil {
				t.Fatalf("no new meta leader within 30s")
			}
			s.step("new meta leader: %s", leader.Name())
		}
		time.Sleep(down)
		restarted := natstest.Restart(t, victim)
		for j := range servers {
			if servers[j] == victim {
				servers[j] = restarted
			}
		}
		if err := natstest.WaitClusterReady(servers, time.Minute); err != nil {
			t.Fatalf("cluster after restarting %s: %v", name, err)
		}
		s.rec.Repair(f)
		s.step("node %s back and current", name)
	}
	s.finishPublished(ctx, done, len(calls))
}

// metaLeader waits up to timeout for a running server to lead the JetStream
// meta group, and returns it (nil if none does).
func metaLeader(servers []*server.Server, timeout time.Duration) *server.Server {
	deadline := time.Now().Add(timeout)
	for {
		for _, s := range servers {
			if s.Running() && s.JetStreamIsLeader() {
				return s
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}
