package faults_test

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/tests/faults"
)

// TestNATSRestartUnderLoad shuts the NATS server down while three executor
// processes work through a stream of calls, keeps it down for a moment, and
// starts it again on the same port with the same store directory (synced on
// every write). The executors and the load generator reconnect; the publisher
// retries every call it has no acknowledgement for, with the same call id. No
// call is lost and no booking reaches the downstream twice; the only
// indeterminate answers are those the outage explains.
//
// The executors hold their claims for restartLease, longer than any outage
// here, so that the outage costs no false unknown: a holder whose outcome could
// not be recorded keeps trying (and renewing) until the server is back, and a
// claim written by a Claim whose answer was lost is read back and withdrawn.
// When every outage was shorter than the lease, no key may be answered
// holder_lost: neither one whose body never ran nor one whose outcome was known.
func TestNATSRestartUnderLoad(t *testing.T) {
	parallel(t)
	dir := t.TempDir()
	var mu sync.Mutex // protects srv, for the cleanup
	srv, err := natstest.RunServer(dir, natstest.SyncAlways())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		natstest.Shutdown(srv)
	})
	port := srv.Addr().(*net.TCPAddr).Port
	samePort := func(o *server.Options) { o.Port = port }

	s := newScenario(t, "nats-restart", srv.ClientURL(), 1)
	s.serverStops = true
	ctx := ctxFor(t, pick(2*time.Minute, 10*time.Minute))
	restarts, down := pick(1, 3), pick(time.Second, 2*time.Second)
	keys, perKey, rate := pick(150, 1500), 4, pick(200, 300)
	for i := range 3 {
		s.executor(fmt.Sprintf("x%d", i), "--concurrency", "16", "--lease", restartLease.String())
	}
	s.step("3 executors ready")

	calls := plan("n", keys, perKey)
	s.pub.Rate = rate
	done := s.publish(ctx, calls)
	var longest time.Duration // from the shutdown's start until the server is back
	for i := range restarts {
		s.waitPublished(ctx, len(calls)*(i+1)/(restarts+1))
		s.step("shutting NATS down after %d calls", s.pub.Published())
		mu.Lock()
		began := time.Now()
		s.rec.Outage(faults.Fault{Name: fmt.Sprintf("NATS restart %d", i+1), StoreAway: true},
			func() { natstest.Shutdown(srv) }, down,
			func() { srv, err = natstest.RunServer(dir, natstest.SyncAlways(), samePort) })
		outage := time.Since(began)
		mu.Unlock()
		if err != nil {
			t.Fatalf("restarting NATS: %v", err)
		}
		longest = max(longest, outage)
		s.step("NATS back on port %d after %v", port, outage.Round(time.Millisecond))
	}
	rep := s.finishPublished(ctx, done, len(calls))
	if longest >= restartLease {
		t.Logf("the longest outage (%v) outlasted the lease (%v): holder_lost answers may be false unknowns", longest, restartLease)
		return
	}
	if rep.Unrun != 0 || rep.Unrecorded != 0 {
		t.Errorf("outages of at most %v, shorter than the lease (%v), left %d keys holder_lost whose body never ran and %d whose outcome was known; want none",
			longest.Round(time.Millisecond), restartLease, rep.Unrun, rep.Unrecorded)
	}
}

// restartLease is the lease of TestNATSRestartUnderLoad's executors: longer
// than its outages.
const restartLease = 10 * time.Second
