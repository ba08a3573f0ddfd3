package faults_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/tests/faults"
)

// partition is one round of TestClusterPartitioned: whom to cut off, and how.
type partition struct {
	meta      bool // the JetStream meta leader; else the leader of the KV bucket's stream
	blackhole bool // routes drop every byte; else they are reset
}

func (p partition) String() string {
	how := "cut off"
	if p.blackhole {
		how = "black-holed"
	}
	if p.meta {
		return "JetStream meta leader " + how
	}
	return "KV leader " + how
}

// TestClusterPartitioned runs three executor processes against a three-node
// JetStream cluster (every write synced; streams and KV bucket replicated
// three times) whose nodes reach one another only through TCP proxies. Each
// executor is given one node's URL, so whichever node is cut off, one
// executor is on its side, still connected to it. Under load, the node
// leading the KV bucket's stream is cut off from its two peers: it can no
// longer commit a write, the other two elect a leader after their election
// timeout and carry on, and once the cut is healed the node catches up. The
// long suite does the same to the meta leader, then both again with routes
// that drop every byte instead of resetting.
//
// Two faults are recorded per round. The cut-off executor's store is away
// from the cut until the heal: any booking it runs past the settle time is a
// violation. The others' store is away from the cut until their side has a KV
// leader (when the isolated node led it): any booking they run in that time,
// past the settle time, is a violation too.
func TestClusterPartitioned(t *testing.T) {
	parallel(t)
	c := natstest.StartProxiedCluster(t, 3, natstest.SyncAlways())
	urls := make([]string, len(c.Servers))
	for i, srv := range c.Servers {
		urls[i] = srv.ClientURL()
	}
	s := newScenario(t, "cluster-partition", strings.Join(urls, ","), 3)
	s.step("streams ready; the scenario's own connection is on %s", s.nc.ConnectedServerName())
	ctx := ctxFor(t, pick(3*time.Minute, 15*time.Minute))
	rounds := pick([]partition{{}}, []partition{{}, {meta: true}, {blackhole: true}, {meta: true, blackhole: true}})
	hold := pick(time.Second, 3*time.Second) // cut off that long once the majority has its leaders
	keys, perKey, rate := pick(200, 1500), 4, pick(50, 100)
	names := make([]string, len(urls))
	for i := range urls {
		names[i] = fmt.Sprintf("x%d", i)
		s.executor(names[i], "--concurrency", "16", "--nats-url", urls[i])
	}
	s.step("3 executors ready, x<i> connected to node n<i+1> only")

	kvStream := "KV_" + natsstore.DefaultBucket
	calls := plan("p", keys, perKey)
	s.pub.Rate = rate
	done := s.publish(ctx, calls)
	for r, p := range rounds {
		s.waitPublished(ctx, len(calls)*(r+1)/(len(rounds)+1))
		var victim *server.Server
		if p.meta {
			victim = metaLeader(c.Servers, 10*time.Second)
		} else {
			victim = natstest.StreamLeader(c.Servers, natstest.GlobalAccount, kvStream, 10*time.Second)
		}
		if victim == nil {
			t.Fatalf("round %d: nobody to cut off (%s)", r, p)
		}
		v := slices.Index(c.Servers, victim)
		var majority []*server.Server
		var others []string
		for i, srv := range c.Servers {
			if i != v {
				majority = append(majority, srv)
				others = append(others, names[i])
			}
		}
		cutOff := []string{names[v]}
		if n := executorConns(t, victim); n != 1 {
			t.Fatalf("round %d: %d executors connected to %s, want 1 (%s)", r, n, victim.Name(), names[v])
		}
		ledKV := victim.JetStreamIsStreamLeader(natstest.GlobalAccount, kvStream)
		ledMeta := victim.JetStreamIsLeader()
		what := fmt.Sprintf("%s: %s (KV leader %v, meta leader %v) with %s", p, victim.Name(), ledKV, ledMeta, names[v])

		cut := s.rec.Inject(faults.Fault{Name: what, StoreAway: true, Executors: cutOff, Holders: cutOff})
		election := -1
		if ledKV {
			election = s.rec.Inject(faults.Fault{Name: "no KV leader on the side of " + strings.Join(others, ", "),
				StoreAway: true, Executors: others})
		}
		s.step("round %d: %s, after %d calls, at %s", r, what, s.pub.Published(), time.Now().Format("15:04:05.000"))
		start := time.Now()
		if p.blackhole {
			c.Blackhole(v)
		} else {
			c.Isolate(v)
		}
		s.rec.MarkAway(cut)
		if election >= 0 {
			s.rec.MarkAway(election)
		}

		// The majority's own KV leader: the store is certainly away for its
		// executors until the last look that found none.
		seenAway := time.Now()
		var kvLeader *server.Server
		for deadline := seenAway.Add(time.Minute); ; {
			look := time.Now()
			if kvLeader = natstest.StreamLeader(majority, natstest.GlobalAccount, kvStream, 0); kvLeader != nil {
				break
			}
			seenAway = look
			if look.After(deadline) {
				t.Fatalf("round %d: the majority elected no leader of %s within a minute", r, kvStream)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if election >= 0 {
			s.rec.MarkBackAt(election, seenAway)
			s.rec.Repair(election)
			s.step("round %d: %s leads %s on the majority side, %v after the cut", r, kvLeader.Name(), kvStream,
				seenAway.Sub(start).Round(time.Millisecond))
		}
		if meta := metaLeader(majority, time.Minute); meta == nil {
			t.Fatalf("round %d: the majority elected no meta leader within a minute", r)
		} else if ledMeta {
			s.step("round %d: %s leads the meta group on the majority side, %v after the cut", r, meta.Name(),
				time.Since(start).Round(time.Millisecond))
		}
		time.Sleep(hold)
		stale := victim.JetStreamIsStreamLeader(natstest.GlobalAccount, kvStream)
		s.rec.MarkBack(cut)
		healAt := time.Now()
		c.Heal()
		if err := c.WaitRoutes(time.Minute); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		if err := natstest.WaitClusterReady(c.Servers, time.Minute); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		if err := natstest.WaitHealthy(c.Servers, 2*time.Minute); err != nil {
			t.Fatalf("round %d: %v", r, err)
		}
		s.rec.Repair(cut)
		s.step("round %d: healed at %s after %v cut off (the isolated node still called itself KV leader at the heal: %v); every node current %v later",
			r, healAt.Format("15:04:05.000"), healAt.Sub(start).Round(time.Millisecond), stale, time.Since(healAt).Round(time.Millisecond))
	}
	s.finishPublished(ctx, done, len(calls))
	s.logReplicas(waitReplicasAgree(t, time.Minute, inProcessJsz(func() []*server.Server { return c.Servers })))

	// What ran downstream while the store was certainly away, from the
	// executors it was away for (bookings past the settle time are
	// violations, counted by the checker).
	for _, f := range s.rec.Faults() {
		bookings, seats := 0, 0
		for _, e := range s.witness.Effects() {
			if !slices.Contains(f.Executors, e.Executor) || e.At.Before(f.AwayFrom) || e.At.After(f.AwayUntil) {
				continue
			}
			if e.Tool == toolBook {
				bookings++
			} else {
				seats++
			}
		}
		s.step("%q: away for %s during %v: bookings run %d, seat changes run %d", f.Name, strings.Join(f.Executors, ", "),
			f.AwayUntil.Sub(f.AwayFrom).Round(time.Millisecond), bookings, seats)
	}
}

// executorConns counts the executors' client connections to srv.
func executorConns(t *testing.T, srv *server.Server) int {
	t.Helper()
	cz, err := srv.Connz(&server.ConnzOptions{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ci := range cz.Conns {
		if ci.Name == "toolexec-executor" {
			n++
		}
	}
	return n
}
