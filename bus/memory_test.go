package bus_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/tool"
)

// boundedArguments returns `book` arguments of about size bytes, shaped as
// the worst an attacker can send within idemkey's default limits: as many
// values as allowed, spread over objects of the most members allowed, their
// strings filling the size.
func boundedArguments(size int, tiny bool) []byte {
	values := idemkey.DefaultMaxValues - 2 // the object itself and the extras' container
	perObject := idemkey.DefaultMaxMembers
	strLen := 1
	if !tiny {
		strLen = max(1, size/values-12)
	}
	s := strings.Repeat("x", strLen)
	var b strings.Builder
	b.WriteString(`{"flight":"BA117","seats":2,"request_id":"r1","extra":[`)
	n := 0
	for n < values-3-values/perObject && b.Len() < size {
		if n > 0 {
			b.WriteString(",")
		}
		b.WriteString("{")
		for i := 0; i < perObject-1 && n < values-3-values/perObject; i++ {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"m%d":"%s"`, i, s)
			n++
		}
		b.WriteString("}")
		n++
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// denseArguments returns `book` arguments holding as many one-digit numbers as
// the default limits allow, two bytes of text each.
func denseArguments() []byte {
	per := idemkey.DefaultMaxElements
	arrays := (idemkey.DefaultMaxValues - 6) / (per + 1)
	var b strings.Builder
	b.WriteString(`{"flight":"BA117","seats":2,"request_id":"r1","extra":[`)
	for i := range arrays {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString("[" + strings.TrimSuffix(strings.Repeat("1,", per), ",") + "]")
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// TestCallMemory holds bus.CallMemory above what handling a call takes: the
// message decoded into an event and a call, its arguments parsed (canonical
// form and decoded value) and checked against the tool's schema, all held at
// once — for the shapes that cost the most within idemkey's default limits.
//
// What is measured is every byte allocated (the collector is off), more than
// the heap holds at its fullest. The race detector's instrumentation allocates
// more: the figures are logged but not held to the estimate under it.
func TestCallMemory(t *testing.T) {
	book, ok := findTool("book")
	if !ok {
		t.Fatal("the demo airline has no book tool")
	}
	for _, tt := range []struct {
		name string
		args []byte
	}{
		{"many tiny values", boundedArguments(1<<20, true)},
		{"values filling a megabyte", boundedArguments(900<<10, false)},
		{"dense arrays", denseArguments()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			data, err := wire.CallJSON(events.Call{Tenant: "acme", Tool: "book", RunID: "r1", CallID: "c1", Source: "/agent", Arguments: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			msgBytes := len(data)
			defer debug.SetGCPercent(debug.SetGCPercent(-1)) // nothing collected while measuring
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			e, err := wire.Decode(nil, data)
			if err != nil {
				t.Fatal(err)
			}
			c, err := wire.CallFromEvent(e, "acme", "book")
			if err != nil {
				t.Fatal(err)
			}
			args, value, err := idemkey.ParseValue(c.Arguments)
			if err != nil {
				t.Fatalf("the arguments are not within the default limits: %v", err)
			}
			verr := book.ValidateValue(value)
			runtime.ReadMemStats(&after) // garbage included: what the heap held at its fullest
			runtime.KeepAlive(e)
			runtime.KeepAlive(args)
			runtime.KeepAlive(verr)
			took := int64(after.HeapAlloc - before.HeapAlloc)
			est := bus.CallMemory(msgBytes, idemkey.DefaultMaxValues)
			t.Logf("%d-byte message: %d bytes of heap (%.1f a byte), estimated %d", msgBytes, took, float64(took)/float64(msgBytes), est)
			if took > est && !testenv.Race {
				t.Errorf("handling the call took %d bytes of heap, above bus.CallMemory's %d", took, est)
			}
		})
	}
}

func findTool(name string) (interface{ ValidateValue(any) error }, bool) {
	for _, tl := range demo.New().Tools() {
		if tl.Name() == name {
			return tl, true
		}
	}
	return nil, false
}

// TestMemoryBudget: calls whose weights together exceed MaxInFlightMemory do not
// run at once, whatever the worker's concurrency — each waits, kept in
// progress, and is answered once the one before it leaves room — while small
// calls under the default budget run side by side without waiting.
func TestMemoryBudget(t *testing.T) {
	pad := strings.Repeat("x", 200<<10)
	big := func(i int) string { return fmt.Sprintf(`{"flight":"%d%s"}`, i, pad) }
	for _, tt := range []struct {
		name      string
		args      func(i int) string
		budget    int64
		wantMax   int64 // most calls in the dispatcher at once
		wantWaits bool
	}{
		{"large calls one at a time", big, bus.CallMemory(len(pad)+1000, idemkey.DefaultMaxValues) * 3 / 2, 1, true},
		{"small calls side by side", func(i int) string { return fmt.Sprintf(`{"flight":"F%d"}`, i) }, 0, 6, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			var now, most atomic.Int64
			release := make(chan struct{})
			var once sync.Once
			reg := registry(t, bookTool(t, "book", tool.Idempotent, func(context.Context, tool.Context, json.RawMessage) (string, error) {
				return "booked", nil
			}))
			wk := h.startWorkerWith(t, reg, bus.WorkerConfig{Concurrency: 6, MaxInFlightMemory: tt.budget}, 0, func(d dispatch.Runner) dispatch.Runner {
				return callRunnerFunc(func(ctx context.Context, c events.Call) (dispatch.Result, error) {
					n := now.Add(1)
					for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
					}
					if n == tt.wantMax { // as many as may run: let them all go
						once.Do(func() { close(release) })
					}
					select {
					case <-release:
					case <-time.After(300 * time.Millisecond): // the budget holds the rest back
					}
					defer now.Add(-1)
					return d.Run(ctx, c)
				})
			})
			var wg sync.WaitGroup
			for i := range 6 {
				wg.Go(func() {
					a, err := h.client.Call(ctxT(t), call("book", "r1", fmt.Sprintf("m%d", i), tt.args(i)))
					if err != nil || a.Kind != events.KindCompleted {
						t.Errorf("call %d answered %+v, %v", i, a.Kind, err)
					}
				})
			}
			wg.Wait()
			if got := most.Load(); got != tt.wantMax {
				t.Errorf("at most %d calls ran at once, want %d", got, tt.wantMax)
			}
			if waits := wk.w.Stats().MemoryWaits.Load(); (waits > 0) != tt.wantWaits {
				t.Errorf("%d calls waited for memory; want waits %v", waits, tt.wantWaits)
			}
		})
	}
}
