package faults_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/internal/clock"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/toolsfile"
)

// inProcess is a worker running inside the test, for scenarios that need to
// give a dispatcher something the executor binary does not take: a clock, a
// broken store.
type inProcess struct {
	name string
	w    *bus.Worker
	d    *dispatch.Dispatcher
	done chan error
}

// startInProcess runs a worker named name (its tools at its own witness URLs;
// its holder is its name) over store, with clk as its dispatcher's clock (nil:
// the wall clock) and leaseD as its lease. It is shut down gracefully when the
// test ends, or by stop.
func (s *scenario) startInProcess(name string, js jetstream.JetStream, store kvstore.Store, clk clock.Clock, leaseD time.Duration) *inProcess {
	s.t.Helper()
	path := filepath.Join(s.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(toolsYAML(s.witness, name)), 0o600); err != nil {
		s.t.Fatal(err)
	}
	ts, err := toolsfile.Load(context.Background(), path, toolsfile.Options{})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { ts.Close() })
	reg, err := tool.NewRegistry(ts.Tools()...)
	if err != nil {
		s.t.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: store, Holder: name, Lease: leaseD, Clock: clk, Logger: discardLogger()})
	if err != nil {
		s.t.Fatal(err)
	}
	w, err := bus.NewWorker(js, d, bus.WorkerConfig{AckWait: ackWait, Concurrency: 16, Logger: discardLogger()})
	if err != nil {
		s.t.Fatal(err)
	}
	p := &inProcess{name: name, w: w, d: d, done: make(chan error, 1)}
	go func() { p.done <- w.Run(context.Background()) }()
	s.t.Cleanup(func() { p.stop(s.t) })
	return p
}

// stop shuts the worker down gracefully and waits for Run to return.
func (p *inProcess) stop(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.w.Shutdown(ctx); err != nil {
		t.Errorf("worker %s: Shutdown: %v", p.name, err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("worker %s: Run: %v", p.name, err)
		}
		p.done <- err
	case <-time.After(20 * time.Second):
		t.Errorf("worker %s: Run did not return", p.name)
	}
}
