package faults_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/tests/faults"
)

// TestNATSProcessesKilled runs three executor processes against a three-node
// JetStream cluster of nats-server processes (built from the module's
// version, started from configuration files: sync_interval always, streams
// and KV bucket replicated three times). Under load it SIGKILLs the process
// leading the KV bucket's stream — no shutdown, no leadership handed over:
// the other two elect a leader after their election timeout — and starts it
// again from its store directory; then the JetStream meta leader's. The long
// suite does both twice. No call is lost, no booking runs twice, every
// indeterminate answer falls in a kill's window, and at the end every node
// holds the same messages of every stream, with nothing reported lost.
func TestNATSProcessesKilled(t *testing.T) {
	parallel(t)
	procs := startProcCluster(t, 3)
	urls := make([]string, len(procs))
	for i, p := range procs {
		urls[i] = p.URL()
	}
	s := newScenario(t, "nats-kill9", strings.Join(urls, ","), 3)
	s.serverStops = true
	s.step("3 nats-server processes and the streams ready")
	ctx := ctxFor(t, pick(3*time.Minute, 15*time.Minute))
	kills, down := pick(2, 4), pick(time.Second, 2*time.Second)
	keys, perKey, rate := pick(150, 1500), 4, pick(60, 150)
	for i := range 3 {
		s.executor(fmt.Sprintf("x%d", i), "--concurrency", "16")
	}
	s.step("3 executors ready")

	bin := natsServerBinary(t)
	kvStream := "KV_" + natsstore.DefaultBucket
	calls := plan("k", keys, perKey)
	s.pub.Rate = rate
	done := s.publish(ctx, calls)
	for i := range kills {
		s.waitPublished(ctx, len(calls)*(i+1)/(kills+1))
		stream, what := kvStream, "leader of "+kvStream
		if i%2 == 1 {
			stream, what = "", "JetStream meta leader"
		}
		victim := procLeader(procs, stream, 10*time.Second)
		if victim == nil {
			t.Fatalf("no %s to kill", what)
		}
		ledKV := victim.leads(kvStream)
		f := s.rec.Inject(faults.Fault{Name: fmt.Sprintf("kill -9 nats-server %s, the %s", victim.name, what), StoreAway: true})
		s.step("kill -9 of %s, the %s (KV leader: %v), after %d calls", victim.name, what, ledKV, s.pub.Published())
		killed := time.Now()
		victim.kill()
		s.rec.MarkAway(f)
		if ledKV {
			// The store was certainly away only until the last look that found
			// no leader among the survivors.
			seenAway := time.Now()
			var next *natsProc
			for deadline := seenAway.Add(time.Minute); ; {
				look := time.Now()
				if next = procLeader(procs, kvStream, 0); next != nil {
					break
				}
				seenAway = look
				if look.After(deadline) {
					t.Fatalf("no new leader of %s within a minute", kvStream)
				}
				time.Sleep(10 * time.Millisecond)
			}
			s.rec.MarkBackAt(f, seenAway)
			s.step("new leader of %s: %s, %v after the kill", kvStream, next.name, seenAway.Sub(killed).Round(time.Millisecond))
		} else {
			s.rec.MarkBack(f)
		}
		if stream == "" {
			next := procLeader(procs, "", time.Minute)
			if next == nil {
				t.Fatal("no new meta leader within a minute")
			}
			s.step("new meta leader: %s, %v after the kill", next.name, time.Since(killed).Round(time.Millisecond))
		}
		time.Sleep(down)
		started := time.Now()
		victim.start(t, bin)
		if err := waitProcsHealthy(procs, 2*time.Minute); err != nil {
			t.Fatalf("after restarting %s: %v", victim.name, err)
		}
		s.rec.Repair(f)
		s.step("%s back and current %v after its start", victim.name, time.Since(started).Round(time.Millisecond))
	}
	s.finishPublished(ctx, done, len(calls))
	s.logReplicas(waitReplicasAgree(t, time.Minute, procJsz(procs)))
}
