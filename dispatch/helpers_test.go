package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/clock"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/tool"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// body is a scripted tool body: it counts entries, records the contexts it saw and
// answers from fn.
type body struct {
	entered atomic.Int64
	mu      sync.Mutex // protects seen
	seen    []tool.Context
	fn      func(ctx context.Context, tc tool.Context, args json.RawMessage) (string, error)
}

func (b *body) call(ctx context.Context, tc tool.Context, args json.RawMessage) (string, error) {
	b.entered.Add(1)
	b.mu.Lock()
	b.seen = append(b.seen, tc)
	b.mu.Unlock()
	if b.fn == nil {
		return "ok", nil
	}
	return b.fn(ctx, tc, args)
}

func (b *body) contexts() []tool.Context {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]tool.Context(nil), b.seen...)
}

const bookSchema = `{"type":"object","properties":{"flight":{"type":"string"},"seats":{"type":"integer"},"request_id":{"type":"string"}},"additionalProperties":false}`

// newTool declares a tool named name over the flight schema.
func newTool(t *testing.T, name string, pol *tool.Policy, retry tool.Retry, b *body) *tool.Tool {
	t.Helper()
	tl, err := tool.New(tool.Spec{Name: name, Idempotency: pol, Retry: retry, Parameters: json.RawMessage(bookSchema)}, b.call)
	if err != nil {
		t.Fatalf("tool.New(%s): %v", name, err)
	}
	return tl
}

type env struct {
	store *memstore.Store
	clock *clock.Fake
	reg   *tool.Registry
}

func newEnv(t *testing.T, tools ...*tool.Tool) *env {
	t.Helper()
	reg, err := tool.NewRegistry(tools...)
	if err != nil {
		t.Fatal(err)
	}
	fc := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	return &env{store: memstore.New(memstore.Config{Clock: fc}), clock: fc, reg: reg}
}

// dispatcher returns a dispatcher over the env's store with the given holder name.
// Its own clock (renewals, backoff) is the wall clock: with a 30s lease nothing is
// renewed during a test unless the test uses fakeDispatcher.
func (e *env) dispatcher(t *testing.T, holder string) *dispatch.Dispatcher {
	t.Helper()
	return e.dispatcherOver(t, holder, e.store, clock.Real{})
}

// fakeDispatcher is like dispatcher but renews leases on the env's fake clock.
func (e *env) fakeDispatcher(t *testing.T, holder string) *dispatch.Dispatcher {
	t.Helper()
	return e.dispatcherOver(t, holder, e.store, e.clock)
}

const lease = 30 * time.Second

func (e *env) dispatcherOver(t *testing.T, holder string, s kvstore.Store, c clock.Clock) *dispatch.Dispatcher {
	t.Helper()
	d, err := dispatch.New(dispatch.Config{
		Tools: e.reg, Store: s, Holder: holder, Lease: lease,
		Clock: c, Jitter: func() float64 { return 0 }, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func call(tool, callID, args string) events.Call {
	return events.Call{Tenant: "acme", RunID: "run_1", CallID: callID, Tool: tool, Arguments: json.RawMessage(args)}
}

// countingStore wraps a store and counts the operations that write or claim.
type countingStore struct {
	kvstore.Store
	claims atomic.Int64
}

func (c *countingStore) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	c.claims.Add(1)
	return c.Store.Claim(ctx, req)
}

// downStore is a store that cannot be reached.
type downStore struct{ kvstore.Store }

var errDown = errors.Join(kvstore.ErrUnavailable, errors.New("connection refused"))

func (downStore) Claim(context.Context, kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	return kvstore.ClaimResult{}, errDown
}
func (downStore) Get(context.Context, string, string) (kvstore.Record, error) {
	return kvstore.Record{}, errDown
}

// waitLimit is how long these tests wait for what they poll.
const waitLimit = 10 * time.Second
