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
		s.executor(fmt.Sprintf("x%d", i), "--concurrency", "16")
	}
	s.step("3 executors ready")

	calls := plan("n", keys, perKey)
	s.pub.Rate = rate
	done := s.publish(ctx, calls)
	for i := range restarts {
		s.waitPublished(ctx, len(calls)*(i+1)/(restarts+1))
		s.step("shutting NATS down after %d calls", s.pub.Published())
		mu.Lock()
		s.rec.Outage(faults.Fault{Name: fmt.Sprintf("NATS restart %d", i+1), StoreAway: true},
			func() { natstest.Shutdown(srv) }, down,
			func() { srv, err = natstest.RunServer(dir, natstest.SyncAlways(), samePort) })
		mu.Unlock()
		if err != nil {
			t.Fatalf("restarting NATS: %v", err)
		}
		s.step("NATS back on port %d", port)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	s.step("all %d calls published (%d retries)", len(calls), s.pub.Retries())
	rep := s.finish(ctx)
	if rep.Calls != len(calls) {
		t.Errorf("recorded %d calls, want %d", rep.Calls, len(calls))
	}
}
