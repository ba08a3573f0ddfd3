package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/internal/testkit/dbproc"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/pgstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
	"github.com/tesserix/toolexec/tool"
)

// TestThreeWorkersShareTheConsumerOverEachStore runs the scenario of
// TestThreeWorkersShareTheConsumer (which covers the JetStream KV store) over
// PostgreSQL and Redis: three workers, each with its own NATS connection and its
// own store client, as three executor processes would have, over one schema (one
// key prefix) of the test's own on the shared server. 2,000 Effectful calls over
// 200 keys: each key reaches the downstream exactly once and 1,800 calls are
// answered deduplicated.
func TestThreeWorkersShareTheConsumerOverEachStore(t *testing.T) {
	for _, tt := range []struct {
		name string
		// open returns a function that opens one worker's store.
		open func(t *testing.T) func(t *testing.T) kvstore.Store
	}{
		{"postgres", func(t *testing.T) func(t *testing.T) kvstore.Store {
			url := testenv.PostgresURL(t)
			schema := dbproc.FreshSchema(t, url)
			return func(t *testing.T) kvstore.Store {
				s, _ := dbproc.PostgresStore(t, url, pgstore.Config{Schema: schema})
				return s
			}
		}},
		{"redis", func(t *testing.T) func(t *testing.T) kvstore.Store {
			url := testenv.RedisURL(t)
			prefix := dbproc.FreshPrefix(t, url)
			return func(t *testing.T) kvstore.Store {
				s, _ := dbproc.RedisStore(t, url, redisstore.Config{Prefix: prefix})
				return s
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			open := tt.open(t)
			threeWorkersShareTheConsumer(t, func(t *testing.T, h *harness, reg *tool.Registry) *worker {
				return h.startWorkerOnStore(t, reg, open(t))
			})
		})
	}
}

// startWorkerOnStore is startWorker over st instead of a JetStream KV store:
// one worker with its own connection and dispatcher (the dispatcher's default
// lease), shut down gracefully when the test ends. The returned worker's store
// field, which names a JetStream store, is nil.
func (h *harness) startWorkerOnStore(t *testing.T, reg *tool.Registry, st kvstore.Store) *worker {
	t.Helper()
	nc := natstest.Connect(t, h.srv)
	js := natstest.JetStream(t, nc)
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: st, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.NewWorker(js, d, bus.WorkerConfig{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	wk := &worker{w: w, d: d, nc: nc, done: make(chan error, 1)}
	go func() { wk.done <- w.Run(context.Background()) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := w.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		select {
		case <-wk.done:
		case <-time.After(20 * time.Second):
			t.Error("Run did not return after Shutdown")
		}
	})
	return wk
}
