package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/internal/testkit/clienttest"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/tool"
)

// BenchmarkWorkerCalls measures the bus and dispatcher around a store: calls
// published (synchronously, as emitter bench does) with 64 in flight, one in
// five repeating another call's key, taken by one worker over an embedded
// server, claimed in the memory store, run by a no-op Effectful tool, and
// answered; each op is one call answered. Everything runs in this process, so
// allocs/op counts the client's, the server's and the worker's allocations.
func BenchmarkWorkerCalls(b *testing.B) {
	srv := natstest.Start(b)
	nc := natstest.Connect(b, srv)
	js := natstest.JetStream(b, nc)
	ctx := context.Background()
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		b.Fatal(err)
	}
	tl, err := tool.New(tool.Spec{Name: "book", Parameters: json.RawMessage(bookSchema),
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}}},
		func(context.Context, tool.Context, json.RawMessage) (string, error) { return "booked", nil })
	if err != nil {
		b.Fatal(err)
	}
	reg, err := tool.NewRegistry(tl)
	if err != nil {
		b.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: memstore.New(memstore.Config{}), Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	wnc := natstest.Connect(b, srv)
	w, err := bus.NewWorker(natstest.JetStream(b, wnc), d, bus.WorkerConfig{Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := w.Shutdown(sctx); err != nil {
			b.Error(err)
		}
		<-done
	}()

	client := clienttest.New(b, js.Conn())
	var (
		mu      sync.Mutex
		waiting = map[string]chan struct{}{}
	)
	sub, err := nc.Subscribe(wire.EventPrefix+"acme.>", func(m *nats.Msg) {
		a, err := wire.DecodeAnswer(m.Header, m.Data)
		if err != nil {
			b.Errorf("answer: %v", err)
			return
		}
		mu.Lock()
		ch := waiting[a.CallID]
		delete(waiting, a.CallID)
		mu.Unlock()
		if ch != nil {
			close(ch)
		}
	})
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Unsubscribe()

	run := fmt.Sprintf("r%d", time.Now().UnixNano())
	var n atomic.Int64
	b.SetParallelism(32) // 64 callers on 2 CPUs
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			key := i
			if i%5 == 0 {
				key = i - 3 // a duplicate of a recent call's key
			}
			c := call("book", run, fmt.Sprintf("c%d", i), fmt.Sprintf(`{"flight":"F%d"}`, key))
			ch := make(chan struct{})
			mu.Lock()
			waiting[c.CallID] = ch
			mu.Unlock()
			if _, err := client.Publish(ctx, c); err != nil {
				b.Error(err)
				return
			}
			select {
			case <-ch:
			case <-time.After(30 * time.Second):
				b.Errorf("call %s not answered", c.CallID)
				return
			}
		}
	})
}
