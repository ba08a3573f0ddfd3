package dispatch_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/tool"
)

var fastRetry = tool.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond}

func policy(k tool.Kind, keyArgs ...string) *tool.Policy {
	if k == "" {
		return nil
	}
	return &tool.Policy{Kind: k, KeyArguments: keyArgs}
}

func mustDispatch(t *testing.T, d *dispatch.Dispatcher, c events.Call) events.Answer {
	t.Helper()
	a, err := d.Dispatch(context.Background(), c)
	if err != nil {
		t.Fatalf("Dispatch(%s): %v", c.CallID, err)
	}
	checkWire(t, a)
	return a
}

// checkWire makes sure an answer can go on the wire: its event validates against
// the embedded schema for its kind.
func checkWire(t *testing.T, a events.Answer) {
	t.Helper()
	if _, err := wire.AnswerEvent(a, "toolexec/test"); err != nil {
		t.Errorf("answer %+v does not make a valid event: %v", a, err)
	}
}

// TestKinds checks every row of the policy table (docs/PROTOCOL.md §1): which kinds are
// retried on failure, which are deduplicated, and that tools without a policy
// touch no record at all.
func TestKinds(t *testing.T) {
	tests := []struct {
		kind         tool.Kind
		retried      bool
		deduplicated bool
	}{
		{kind: "", retried: true, deduplicated: false},
		{kind: tool.ReadOnly, retried: true, deduplicated: false},
		{kind: tool.Idempotent, retried: true, deduplicated: true},
		{kind: tool.Effectful, retried: false, deduplicated: true},
	}
	for _, tt := range tests {
		name := string(tt.kind)
		if name == "" {
			name = "no_policy"
		}
		t.Run(name+"/retry", func(t *testing.T) {
			b := &body{}
			b.fn = func(context.Context, tool.Context, json.RawMessage) (string, error) {
				if b.entered.Load() == 1 {
					return "", errors.New("downstream hiccup")
				}
				return "booked", nil
			}
			e := newEnv(t, newTool(t, "book", policy(tt.kind, "flight"), fastRetry, b))
			a := mustDispatch(t, e.dispatcher(t, "w1"), call("book", "c1", `{"flight":"BA117"}`))
			if tt.retried {
				if a.Kind != events.KindCompleted || a.Outcome != "booked" || b.entered.Load() != 2 {
					t.Fatalf("got %s %q after %d entries; want completed \"booked\" after 2", a.Kind, a.Outcome, b.entered.Load())
				}
				if got := b.contexts()[1].Attempt; got != 2 {
					t.Errorf("second entry saw Attempt %d, want 2", got)
				}
				return
			}
			if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonBodyFailed || !a.BodyEntered || b.entered.Load() != 1 {
				t.Fatalf("got %+v after %d entries; want indeterminate body_failed after exactly 1", a, b.entered.Load())
			}
		})
		t.Run(name+"/duplicate", func(t *testing.T) {
			b := &body{}
			b.fn = func(context.Context, tool.Context, json.RawMessage) (string, error) {
				return fmt.Sprintf("seat %d", b.entered.Load()), nil
			}
			e := newEnv(t, newTool(t, "book", policy(tt.kind, "flight"), fastRetry, b))
			cs := &countingStore{Store: e.store}
			d := e.dispatcherOver(t, "w1", cs, nil)
			first := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117","request_id":"a"}`))
			second := mustDispatch(t, d, call("book", "c2", `{"flight":"BA117","request_id":"b"}`))
			if first.Kind != events.KindCompleted || first.Outcome != "seat 1" {
				t.Fatalf("first call: %+v", first)
			}
			if !tt.deduplicated {
				if second.Kind != events.KindCompleted || second.Outcome != "seat 2" || b.entered.Load() != 2 {
					t.Fatalf("second call: %+v, entries %d; want a second completed run", second, b.entered.Load())
				}
				if cs.claims.Load() != 0 {
					t.Fatalf("%d claims for a tool that is not deduplicated", cs.claims.Load())
				}
				if second.Key != "" || b.contexts()[0].IdempotencyKey != "" {
					t.Fatalf("a tool that is not deduplicated got a key: answer %q, context %q", second.Key, b.contexts()[0].IdempotencyKey)
				}
				return
			}
			if second.Kind != events.KindDeduplicated || second.Outcome != "seat 1" || b.entered.Load() != 1 {
				t.Fatalf("second call: %+v, entries %d; want deduplicated \"seat 1\", one entry", second, b.entered.Load())
			}
			if second.Key == "" || second.Key != first.Key || b.contexts()[0].IdempotencyKey != first.Key {
				t.Fatalf("keys: first %q second %q context %q", first.Key, second.Key, b.contexts()[0].IdempotencyKey)
			}
		})
	}
}

func TestToolContext(t *testing.T) {
	b := &body{}
	e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
	c := call("book", "c7", `{"flight":"BA117","request_id":"x"}`)
	c.TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	a := mustDispatch(t, e.dispatcher(t, "w1"), c)
	want, err := idemkey.Derive("acme", "run_1", "book", []byte(`{"flight":"BA117"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	got := b.contexts()[0]
	if got.IdempotencyKey != want.Hex || a.Key != want.Hex {
		t.Errorf("key: context %q, answer %q, want %q", got.IdempotencyKey, a.Key, want.Hex)
	}
	if got.Tenant != "acme" || got.RunID != "run_1" || got.CallID != "c7" || got.Tool != "book" || got.Attempt != 1 || got.TraceParent != c.TraceParent {
		t.Errorf("context = %+v", got)
	}
}

// TestRejected checks that every invalid call is answered rejected with a code,
// before anything is claimed or entered.
func TestRejected(t *testing.T) {
	tests := []struct {
		name string
		give events.Call
		code events.Code
	}{
		{"unknown tool", call("nope", "c1", `{"flight":"A"}`), events.CodeUnknownTool},
		{"bad tenant", events.Call{Tenant: "ac.me", RunID: "r", CallID: "c", Tool: "book", Arguments: json.RawMessage(`{}`)}, events.CodeBadToken},
		{"empty run id", events.Call{Tenant: "acme", RunID: "", CallID: "c", Tool: "book", Arguments: json.RawMessage(`{}`)}, events.CodeBadToken},
		{"long call id", events.Call{Tenant: "acme", RunID: "r", CallID: strings.Repeat("c", 129), Tool: "book", Arguments: json.RawMessage(`{}`)}, events.CodeBadToken},
		{"wildcard tool", call("bo*k", "c1", `{}`), events.CodeBadToken},
		{"not an object", call("book", "c1", `["BA117"]`), "arguments_not_object"},
		{"invalid json", call("book", "c1", `{"flight":`), "invalid_json"},
		{"duplicate member", call("book", "c1", `{"flight":"A","flight":"B"}`), "duplicate_member"},
		{"huge number", call("book", "c1", `{"seats":1e999999999}`), "number_out_of_range"},
		{"lone surrogate", call("book", "c1", `{"flight":"\ud800"}`), "invalid_unicode"},
		{"schema: wrong type", call("book", "c1", `{"flight":117}`), events.CodeSchemaViolation},
		{"schema: unknown member", call("book", "c1", `{"flight":"A","gate":"B"}`), events.CodeSchemaViolation},
		{"too many members", call("book", "c1", manyMembers(idemkey.DefaultMaxMembers+1)), events.CodeTooManyValues},
		{"too many elements", call("book", "c1", `{"flight":"A","x":[`+strings.Repeat("1,", idemkey.DefaultMaxElements)+`1]}`), events.CodeTooManyValues},
		{"too many values", call("book", "c1", `{"flight":"A","x":[`+strings.Repeat("[1,1,1,1],", idemkey.DefaultMaxValues/5)+`1]}`), events.CodeTooManyValues},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &body{}
			e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
			cs := &countingStore{Store: e.store}
			d := e.dispatcherOver(t, "w1", cs, nil)
			a, err := d.Dispatch(context.Background(), tt.give)
			if err != nil {
				t.Fatal(err)
			}
			if a.Kind != events.KindRejected || a.Code != tt.code || a.Error == "" {
				t.Fatalf("got kind %s code %q error %q; want rejected %q with a message", a.Kind, a.Code, a.Error, tt.code)
			}
			if b.entered.Load() != 0 || cs.claims.Load() != 0 {
				t.Fatalf("rejected call entered the body %d times and claimed %d times", b.entered.Load(), cs.claims.Load())
			}
			var re *events.RejectedError
			if _, err := d.Call(context.Background(), tt.give); !errors.As(err, &re) || re.Code != tt.code {
				t.Fatalf("Call error = %v, want *RejectedError with code %s", err, tt.code)
			}
		})
	}
}

// TestToolsLookedUpPerCall: the dispatcher serves the registry as it is at
// each call: a tool put after the dispatcher was made is run, a tool in
// conflict is rejected tool_conflict before anything is claimed or entered
// and runs again once the conflict ends, and a removed tool is unknown.
func TestToolsLookedUpPerCall(t *testing.T) {
	b := &body{}
	e := newEnv(t)
	cs := &countingStore{Store: e.store}
	d := e.dispatcherOver(t, "w1", cs, nil)
	answer := func(callID string) events.Answer {
		t.Helper()
		a, err := d.Dispatch(context.Background(), call("book", callID, `{"flight":"BA117"}`))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}

	if a := answer("c1"); a.Kind != events.KindRejected || a.Code != events.CodeUnknownTool {
		t.Fatalf("before book was put: %s %s, want rejected unknown_tool", a.Kind, a.Code)
	}
	if _, err := e.reg.Put(newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b)); err != nil {
		t.Fatal(err)
	}
	if a := answer("c2"); a.Kind != events.KindCompleted || b.entered.Load() != 1 {
		t.Fatalf("after book was put: %s, body entered %d times; want completed, once", a.Kind, b.entered.Load())
	}

	e.reg.SetConflict("book", "worker w1 and worker w2 differ in parameters")
	claims := cs.claims.Load()
	a := answer("c3")
	if a.Kind != events.KindRejected || a.Code != events.CodeToolConflict || !strings.Contains(a.Error, "differ in parameters") {
		t.Fatalf("in conflict: %s %s %q, want rejected tool_conflict saying what differs", a.Kind, a.Code, a.Error)
	}
	if b.entered.Load() != 1 || cs.claims.Load() != claims {
		t.Fatalf("a call of a tool in conflict entered the body or claimed its key")
	}
	var re *events.RejectedError
	if _, err := d.Call(context.Background(), call("book", "c4", `{"flight":"LH400"}`)); !errors.As(err, &re) || re.Code != events.CodeToolConflict {
		t.Fatalf("Call in conflict: %v, want *RejectedError tool_conflict", err)
	}

	e.reg.ClearConflict("book")
	if a := answer("c5"); a.Kind != events.KindDeduplicated {
		t.Fatalf("after the conflict ended: %s, want deduplicated from c2's record", a.Kind)
	}
	e.reg.Remove("book")
	if a := answer("c6"); a.Kind != events.KindRejected || a.Code != events.CodeUnknownTool {
		t.Fatalf("after book was removed: %s %s, want rejected unknown_tool", a.Kind, a.Code)
	}
}

// TestUnavailable: a tool marked unavailable is rejected
// upstream_unavailable before anything is claimed or entered; a body that
// finds its server unreachable (without effect) is answered the same way,
// its claim released, never failed or indeterminate, and not retried.
func TestUnavailable(t *testing.T) {
	down := tool.NoEffect(fmt.Errorf("request not sent: %w", tool.ErrUnavailable))
	for _, tt := range []struct {
		name  string
		kind  tool.Kind
		retry tool.Retry
	}{
		{"effectful", tool.Effectful, tool.Retry{}},
		{"idempotent with retries", tool.Idempotent, tool.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond}},
		{"read-only with retries", tool.ReadOnly, tool.Retry{MaxAttempts: 3, InitialBackoff: time.Millisecond}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &body{fn: func(context.Context, tool.Context, json.RawMessage) (string, error) { return "", down }}
			e := newEnv(t)
			cs := &countingStore{Store: e.store}
			d := e.dispatcherOver(t, "w1", cs, nil)
			if _, err := e.reg.Put(newTool(t, "book", policy(tt.kind, "flight"), tt.retry, b)); err != nil {
				t.Fatal(err)
			}
			e.reg.SetUnavailable("book", "mcp server x is down")
			a, err := d.Dispatch(context.Background(), call("book", "c1", `{"flight":"BA117"}`))
			if err != nil || a.Kind != events.KindRejected || a.Code != events.CodeUpstreamUnavailable || !strings.Contains(a.Error, "x is down") {
				t.Fatalf("while marked: %+v, %v; want rejected upstream_unavailable", a, err)
			}
			if b.entered.Load() != 0 || cs.claims.Load() != 0 {
				t.Fatal("a call of an unavailable tool entered the body or claimed its key")
			}
			e.reg.ClearUnavailable("book")
			a, err = d.Dispatch(context.Background(), call("book", "c2", `{"flight":"BA117"}`))
			if err != nil || a.Kind != events.KindRejected || a.Code != events.CodeUpstreamUnavailable {
				t.Fatalf("body found it down: %+v, %v; want rejected upstream_unavailable", a, err)
			}
			if n := b.entered.Load(); n != 1 {
				t.Errorf("body entered %d times, want once (not retried)", n)
			}
			// The claim was released: the same call runs once the server is back.
			b.fn = nil
			if a, err := d.Dispatch(context.Background(), call("book", "c3", `{"flight":"BA117"}`)); err != nil || a.Kind != events.KindCompleted {
				t.Fatalf("once back: %+v, %v; want completed", a, err)
			}
		})
	}
}

// manyMembers returns an arguments object of n members, flight among them.
func manyMembers(n int) string {
	var b strings.Builder
	b.WriteString(`{"flight":"A"`)
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, `,"m%d":%d`, i, i)
	}
	b.WriteString("}")
	return b.String()
}

// TestLimits: the bounds a dispatcher is configured with are the ones it
// applies, each at its value and one past it; past one, the call is rejected
// too_many_values before any claim or body.
func TestLimits(t *testing.T) {
	lim := idemkey.Limits{Members: 4, Elements: 3, Values: 12}
	tests := []struct {
		name string
		args string
		ok   bool
	}{
		{"members at the bound", `{"flight":"A","a":1,"b":2,"c":3}`, true},
		{"members past it", `{"flight":"A","a":1,"b":2,"c":3,"d":4}`, false},
		{"elements at the bound", `{"flight":"A","a":[1,2,3]}`, true},
		{"elements past them", `{"flight":"A","a":[1,2,3,4]}`, false},
		{"values at the bound", `{"flight":"A","a":[1,2,3],"b":[1,2,3],"c":[1]}`, true},
		{"values past it", `{"flight":"A","a":[1,2,3],"b":[1,2,3],"c":[1,2]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &body{}
			e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
			d, err := dispatch.New(dispatch.Config{Tools: e.reg, Store: e.store, Limits: lim, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			// The test tool's schema refuses unknown members: within the
			// bounds, that is the verdict, given after the bounds were passed.
			a := mustDispatch(t, d, call("book", "c1", tt.args))
			if tt.ok != (a.Code != events.CodeTooManyValues) {
				t.Fatalf("got %s %s (%s), want within the bounds %v", a.Kind, a.Code, a.Error, tt.ok)
			}
			if !tt.ok && (a.Kind != events.KindRejected || b.entered.Load() != 0) {
				t.Fatalf("got %s with the body entered %d times; want rejected, never entered", a.Kind, b.entered.Load())
			}
		})
	}
}

func TestEffectfulFailureIsIndeterminate(t *testing.T) {
	b := &body{fn: func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "", errors.New("read timeout after request was sent")
	}}
	e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{MaxAttempts: 5}, b))
	d := e.dispatcher(t, "w1")
	_, err := d.Call(context.Background(), call("book", "c1", `{"flight":"BA117"}`))
	var ie *events.IndeterminateOutcomeError
	if !errors.As(err, &ie) {
		t.Fatalf("error %v is not an IndeterminateOutcomeError", err)
	}
	if ie.Tool != "book" || ie.Reason != events.ReasonBodyFailed || !ie.BodyEntered || ie.Key == "" || !strings.Contains(ie.Error(), "book") {
		t.Fatalf("error = %+v", ie)
	}
	if !strings.Contains(errors.Unwrap(ie).Error(), "read timeout") {
		t.Errorf("the body's error is not wrapped: %v", errors.Unwrap(ie))
	}
	rec, err := e.store.Get(context.Background(), "acme", ie.Key)
	if err != nil || rec.State != kvstore.StateIndeterminate || rec.Reason != "body_failed" {
		t.Fatalf("record = %+v, %v; want indeterminate body_failed", rec, err)
	}
	// A retry of the same effect is answered indeterminate again, never re-run.
	a := mustDispatch(t, d, call("book", "c2", `{"flight":"BA117"}`))
	if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonBodyFailed || b.entered.Load() != 1 {
		t.Fatalf("retry: %+v, entries %d", a, b.entered.Load())
	}
}

func TestEffectfulTimeoutIsIndeterminate(t *testing.T) {
	b := &body{fn: func(ctx context.Context, _ tool.Context, _ json.RawMessage) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	}}
	tl, err := tool.New(tool.Spec{Name: "book", Idempotency: policy(tool.Effectful, "flight"), Timeout: 20 * time.Millisecond,
		Parameters: json.RawMessage(bookSchema)}, b.call)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, tl)
	a := mustDispatch(t, e.dispatcher(t, "w1"), call("book", "c1", `{"flight":"BA117"}`))
	if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonTimeout || !a.BodyEntered {
		t.Fatalf("answer = %+v; want indeterminate timeout", a)
	}
}

func TestPanicIsAFailure(t *testing.T) {
	b := &body{fn: func(context.Context, tool.Context, json.RawMessage) (string, error) { panic("boom") }}
	e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
	a := mustDispatch(t, e.dispatcher(t, "w1"), call("book", "c1", `{"flight":"BA117"}`))
	if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonBodyFailed {
		t.Fatalf("answer = %+v; want indeterminate body_failed", a)
	}
}

func TestNoEffectReleases(t *testing.T) {
	for _, kind := range []tool.Kind{tool.Effectful, tool.Idempotent} {
		t.Run(string(kind), func(t *testing.T) {
			b := &body{}
			b.fn = func(context.Context, tool.Context, json.RawMessage) (string, error) {
				if b.entered.Load() == 1 {
					return "", tool.NoEffect(errors.New("409 refused before acting"))
				}
				return "booked", nil
			}
			e := newEnv(t, newTool(t, "book", policy(kind, "flight"), tool.Retry{MaxAttempts: 1}, b))
			d := e.dispatcher(t, "w1")
			a := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117"}`))
			if a.Kind != events.KindFailed || a.Code != events.CodeNoEffect || !strings.Contains(a.Error, "409") {
				t.Fatalf("answer = %+v; want failed no_effect", a)
			}
			if _, err := e.store.Get(context.Background(), "acme", a.Key); !errors.Is(err, kvstore.ErrNotFound) {
				t.Fatalf("the claim was not released: %v", err)
			}
			// The key is free: the next call runs the body.
			a = mustDispatch(t, d, call("book", "c2", `{"flight":"BA117"}`))
			if a.Kind != events.KindCompleted || b.entered.Load() != 2 {
				t.Fatalf("after release: %+v, entries %d", a, b.entered.Load())
			}
		})
	}
}

func TestIdempotentFailureReleasesAndFails(t *testing.T) {
	b := &body{fn: func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "", errors.New("503")
	}}
	e := newEnv(t, newTool(t, "sync", policy(tool.Idempotent, "flight"), fastRetry, b))
	a := mustDispatch(t, e.dispatcher(t, "w1"), call("sync", "c1", `{"flight":"BA117"}`))
	if a.Kind != events.KindFailed || a.Code != events.CodeToolError || b.entered.Load() != 3 {
		t.Fatalf("answer = %+v after %d entries; want failed tool_error after 3", a, b.entered.Load())
	}
	if _, err := e.store.Get(context.Background(), "acme", a.Key); !errors.Is(err, kvstore.ErrNotFound) {
		t.Fatalf("claim kept after an idempotent failure: %v", err)
	}
}

func TestSameCallAgainGetsTheSameAnswer(t *testing.T) {
	b := &body{}
	e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
	d := e.dispatcher(t, "w1")
	first := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117"}`))
	again := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117"}`))
	if again.Kind != events.KindCompleted || again.Outcome != first.Outcome || b.entered.Load() != 1 {
		t.Fatalf("redelivered call: %+v, entries %d; want the same completed answer, one entry", again, b.entered.Load())
	}
}

func TestArgumentsMismatch(t *testing.T) {
	b := &body{}
	tl, err := tool.New(tool.Spec{Name: "book", Parameters: json.RawMessage(bookSchema),
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}, CheckArguments: []string{"seats"}}}, b.call)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, tl)
	d := e.dispatcher(t, "w1")
	mustDispatch(t, d, call("book", "c1", `{"flight":"BA117","seats":2}`))
	same := mustDispatch(t, d, call("book", "c2", `{"flight":"BA117","seats":2.0,"request_id":"z"}`))
	if same.Kind != events.KindDeduplicated {
		t.Fatalf("same check arguments: %+v; want deduplicated", same)
	}
	other := mustDispatch(t, d, call("book", "c3", `{"flight":"BA117","seats":3}`))
	if other.Kind != events.KindRejected || other.Code != events.CodeArgumentsMismatch || b.entered.Load() != 1 {
		t.Fatalf("changed check argument: %+v, entries %d; want rejected arguments_mismatch", other, b.entered.Load())
	}
}

func TestUnderivableKey(t *testing.T) {
	for _, kind := range []tool.Kind{tool.Effectful, tool.Idempotent} {
		t.Run(string(kind), func(t *testing.T) {
			b := &body{}
			e := newEnv(t, newTool(t, "book", policy(kind, "flight"), tool.Retry{}, b))
			d := e.dispatcher(t, "w1")
			a := mustDispatch(t, d, call("book", "c1", `{"request_id":"a"}`))
			if kind == tool.Effectful {
				if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonKeyUnderivable || a.BodyEntered || b.entered.Load() != 0 {
					t.Fatalf("answer = %+v, entries %d; want indeterminate key_underivable, body not entered", a, b.entered.Load())
				}
				return
			}
			if a.Kind != events.KindCompleted || b.entered.Load() != 1 || d.Stats().Unguarded.Load() != 1 {
				t.Fatalf("answer = %+v, entries %d, unguarded %d; want completed, run once without a claim", a, b.entered.Load(), d.Stats().Unguarded.Load())
			}
			if b.contexts()[0].IdempotencyKey != "" {
				t.Fatalf("underivable key passed to the tool as %q", b.contexts()[0].IdempotencyKey)
			}
		})
	}
}

func TestStoreUnavailable(t *testing.T) {
	for _, kind := range []tool.Kind{tool.Effectful, tool.Idempotent} {
		t.Run(string(kind), func(t *testing.T) {
			b := &body{}
			e := newEnv(t, newTool(t, "book", policy(kind, "flight"), tool.Retry{}, b))
			d := e.dispatcherOver(t, "w1", downStore{e.store}, nil)
			a := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117"}`))
			if kind == tool.Effectful {
				if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonStoreUnavailable || a.BodyEntered || b.entered.Load() != 0 {
					t.Fatalf("answer = %+v, entries %d; want indeterminate store_unavailable, body not entered", a, b.entered.Load())
				}
				return
			}
			if a.Kind != events.KindCompleted || b.entered.Load() != 1 || d.Stats().Unguarded.Load() != 1 {
				t.Fatalf("answer = %+v; want completed without a claim", a)
			}
		})
	}
}

// TestStoreUnavailableOnRedelivery: a call delivered again finds the store
// away. This delivery enters no body, but an earlier one may have (its
// acknowledgement lost, as when its executor was cut off mid-call): the answer
// does not say that nothing ran.
func TestStoreUnavailableOnRedelivery(t *testing.T) {
	b := &body{}
	e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
	d := e.dispatcherOver(t, "w1", downStore{e.store}, nil)
	for _, c := range []struct {
		delivery    int
		bodyEntered bool
	}{{0, false}, {1, false}, {2, true}, {7, true}} {
		cl := call("book", fmt.Sprintf("c%d", c.delivery), `{"flight":"BA117"}`)
		cl.Delivery = c.delivery
		a := mustDispatch(t, d, cl)
		if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonStoreUnavailable || a.BodyEntered != c.bodyEntered {
			t.Errorf("delivery %d: %+v; want store_unavailable, body entered %v", c.delivery, a, c.bodyEntered)
		}
	}
	if n := b.entered.Load(); n != 0 {
		t.Errorf("entered the body %d times while the store was away", n)
	}
}

// TestConcurrentDuplicates: 64 identical Effectful calls at once enter the body
// once; the other 63 are answered deduplicated with the same outcome.
func TestConcurrentDuplicates(t *testing.T) {
	release := make(chan struct{})
	b := &body{fn: func(context.Context, tool.Context, json.RawMessage) (string, error) {
		<-release
		return "PNR-7781", nil
	}}
	e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
	const n = 64
	answers := make([]events.Answer, n)
	var wg sync.WaitGroup
	for i := range n {
		d := e.dispatcher(t, fmt.Sprintf("w%d", i%4))
		wg.Go(func() {
			a, err := d.Dispatch(context.Background(), call("book", fmt.Sprintf("c%d", i), fmt.Sprintf(`{"flight":"BA117","request_id":"r%d"}`, i)))
			if err != nil {
				t.Error(err)
			}
			answers[i] = a
		})
	}
	wait.Eventually(t, waitLimit, "the body to be entered", func() bool { return b.entered.Load() == 1 })
	close(release)
	wg.Wait()
	var completed, deduplicated int
	for _, a := range answers {
		if a.Outcome != "PNR-7781" {
			t.Errorf("answer %s has outcome %q", a.CallID, a.Outcome)
		}
		switch a.Kind {
		case events.KindCompleted:
			completed++
		case events.KindDeduplicated:
			deduplicated++
		}
	}
	if b.entered.Load() != 1 || completed != 1 || deduplicated != n-1 {
		t.Fatalf("entries %d, completed %d, deduplicated %d; want 1, 1, %d", b.entered.Load(), completed, deduplicated, n-1)
	}
}

// holdKey claims the key of args for a holder that never finishes, as a crashed
// worker would, and returns the record.
func holdKey(t *testing.T, s kvstore.Store, toolName, args string, keyArgs []string) kvstore.ClaimResult {
	t.Helper()
	k, err := idemkey.Derive("acme", "run_1", toolName, []byte(args), keyArgs)
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Claim(context.Background(), kvstore.ClaimRequest{Tenant: "acme", Key: k.Hex, Holder: "crashed", Lease: lease, Tool: toolName, RunID: "run_1", CallID: "c0"})
	if err != nil || !res.Claimed {
		t.Fatalf("claim as the crashed holder: %+v, %v", res, err)
	}
	return res
}

// dispatchAsync runs one call in the background and returns its answer channel.
func dispatchAsync(ctx context.Context, d *dispatch.Dispatcher, c events.Call) <-chan events.Answer {
	ch := make(chan events.Answer, 1)
	go func() {
		a, err := d.Dispatch(ctx, c)
		if err != nil {
			a = events.Answer{Kind: "error: " + events.Kind(err.Error())}
		}
		ch <- a
	}()
	return ch
}

func TestWaitsForHolder(t *testing.T) {
	ctx := context.Background()
	t.Run("holder completes", func(t *testing.T) {
		b := &body{}
		e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
		held := holdKey(t, e.store, "book", `{"flight":"BA117"}`, []string{"flight"})
		got := dispatchAsync(ctx, e.dispatcher(t, "w1"), call("book", "c1", `{"flight":"BA117"}`))
		e.clock.BlockUntil(1, nil) // the waiter is parked on the lease deadline
		if err := e.store.Record(ctx, held.Lease, "PNR-1"); err != nil {
			t.Fatal(err)
		}
		a := <-got
		if a.Kind != events.KindDeduplicated || a.Outcome != "PNR-1" || b.entered.Load() != 0 {
			t.Fatalf("answer = %+v, entries %d; want deduplicated PNR-1 without entering", a, b.entered.Load())
		}
	})
	t.Run("holder releases", func(t *testing.T) {
		b := &body{}
		e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
		held := holdKey(t, e.store, "book", `{"flight":"BA117"}`, []string{"flight"})
		got := dispatchAsync(ctx, e.dispatcher(t, "w1"), call("book", "c1", `{"flight":"BA117"}`))
		e.clock.BlockUntil(1, nil)
		if err := e.store.Release(ctx, held.Lease); err != nil {
			t.Fatal(err)
		}
		a := <-got
		if a.Kind != events.KindCompleted || b.entered.Load() != 1 {
			t.Fatalf("answer = %+v, entries %d; want completed after claiming again", a, b.entered.Load())
		}
	})
	t.Run("holder marks indeterminate", func(t *testing.T) {
		b := &body{}
		e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
		held := holdKey(t, e.store, "book", `{"flight":"BA117"}`, []string{"flight"})
		got := dispatchAsync(ctx, e.dispatcher(t, "w1"), call("book", "c1", `{"flight":"BA117"}`))
		e.clock.BlockUntil(1, nil)
		if err := e.store.MarkIndeterminate(ctx, held.Lease, "body_failed", true); err != nil {
			t.Fatal(err)
		}
		a := <-got
		if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonBodyFailed || b.entered.Load() != 0 {
			t.Fatalf("answer = %+v; want indeterminate body_failed", a)
		}
	})
	t.Run("effectful holder lost", func(t *testing.T) {
		b := &body{}
		e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
		holdKey(t, e.store, "book", `{"flight":"BA117"}`, []string{"flight"})
		got := dispatchAsync(ctx, e.dispatcher(t, "w1"), call("book", "c1", `{"flight":"BA117"}`))
		e.clock.BlockUntil(1, nil)
		e.clock.Advance(lease + time.Second)
		a := <-got
		if a.Kind != events.KindIndeterminate || a.Reason != events.ReasonHolderLost || !a.BodyEntered || b.entered.Load() != 0 {
			t.Fatalf("answer = %+v, entries %d; want indeterminate holder_lost, never re-run", a, b.entered.Load())
		}
		rec, err := e.store.Get(ctx, "acme", a.Key)
		if err != nil || rec.State != kvstore.StateIndeterminate || rec.Reason != "holder_lost" {
			t.Fatalf("record = %+v, %v", rec, err)
		}
	})
	t.Run("idempotent holder lost is taken over", func(t *testing.T) {
		b := &body{}
		e := newEnv(t, newTool(t, "sync", policy(tool.Idempotent, "flight"), tool.Retry{}, b))
		held := holdKey(t, e.store, "sync", `{"flight":"BA117"}`, []string{"flight"})
		got := dispatchAsync(ctx, e.dispatcher(t, "w1"), call("sync", "c1", `{"flight":"BA117"}`))
		e.clock.BlockUntil(1, nil)
		e.clock.Advance(lease + time.Second)
		a := <-got
		if a.Kind != events.KindCompleted || b.entered.Load() != 1 {
			t.Fatalf("answer = %+v, entries %d; want completed by the taker", a, b.entered.Load())
		}
		// The crashed holder is fenced off.
		if err := e.store.Record(ctx, held.Lease, "late"); !errors.Is(err, kvstore.ErrNotHolder) {
			t.Fatalf("stale holder recorded: %v", err)
		}
	})
	t.Run("context ends while waiting", func(t *testing.T) {
		b := &body{}
		e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
		holdKey(t, e.store, "book", `{"flight":"BA117"}`, []string{"flight"})
		cctx, cancel := context.WithCancel(ctx)
		d := e.dispatcher(t, "w1")
		done := make(chan error, 1)
		go func() {
			_, err := d.Dispatch(cctx, call("book", "c1", `{"flight":"BA117"}`))
			done <- err
		}()
		e.clock.BlockUntil(1, nil)
		cancel()
		if err := <-done; !errors.Is(err, dispatch.ErrHandBack) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want ErrNoAnswer wrapping context.Canceled", err)
		}
	})
}

// TestLeaseRenewedWhileBodyRuns: a body that runs for several leases keeps its
// claim; a waiter never takes over and is answered from the holder's outcome.
func TestLeaseRenewedWhileBodyRuns(t *testing.T) {
	ctx := context.Background()
	release := make(chan struct{})
	b := &body{fn: func(context.Context, tool.Context, json.RawMessage) (string, error) {
		<-release
		return "done", nil
	}}
	e := newEnv(t, newTool(t, "sync", policy(tool.Idempotent, "flight"), tool.Retry{}, b))
	holder := dispatchAsync(ctx, e.fakeDispatcher(t, "w1"), call("sync", "c1", `{"flight":"BA117"}`))
	wait.Eventually(t, waitLimit, "the body to be entered", func() bool { return b.entered.Load() == 1 })
	k, _ := idemkey.Derive("acme", "run_1", "sync", []byte(`{"flight":"BA117"}`), []string{"flight"})
	waiter := dispatchAsync(ctx, e.fakeDispatcher(t, "w2"), call("sync", "c2", `{"flight":"BA117"}`))
	// Move time forward by a third of a lease at a time, for three leases, each
	// time waiting until the holder has renewed.
	for i := range 9 {
		e.clock.BlockUntil(2, nil) // the renewal timer and the waiter's lease timer
		before, err := e.store.Get(ctx, "acme", k.Hex)
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(lease / 3)
		wait.Eventually(t, waitLimit, fmt.Sprintf("renewal %d", i+1), func() bool {
			rec, err := e.store.Get(ctx, "acme", k.Hex)
			return err == nil && rec.Revision != before.Revision
		})
	}
	close(release)
	if a := <-holder; a.Kind != events.KindCompleted {
		t.Fatalf("holder: %+v", a)
	}
	if a := <-waiter; a.Kind != events.KindDeduplicated || a.Outcome != "done" || b.entered.Load() != 1 {
		t.Fatalf("waiter: %+v, entries %d; want deduplicated, one entry", a, b.entered.Load())
	}
}

func TestOutcomeTooLarge(t *testing.T) {
	b := &body{fn: func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return strings.Repeat("x", 100), nil
	}}
	reg, _ := tool.NewRegistry(newTool(t, "lookup", policy(tool.ReadOnly), tool.Retry{MaxAttempts: 3}, b))
	e := newEnv(t)
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: e.store, MaxOutcomeBytes: 10, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	a := mustDispatch(t, d, call("lookup", "c1", `{}`))
	if a.Kind != events.KindFailed || a.Code != events.CodeOutcomeTooLarge || b.entered.Load() != 1 {
		t.Fatalf("answer = %+v, entries %d; want failed outcome_too_large without retry", a, b.entered.Load())
	}
}

func TestNewRequiresToolsAndStore(t *testing.T) {
	if _, err := dispatch.New(dispatch.Config{}); err == nil {
		t.Fatal("New without tools or store succeeded")
	}
}

// flakyRecordStore fails the first n Record calls as an unreachable store would.
type flakyRecordStore struct {
	kvstore.Store
	mu    sync.Mutex // protects fails
	fails int
}

func (f *flakyRecordStore) Record(ctx context.Context, l kvstore.Lease, out string) error {
	f.mu.Lock()
	if f.fails > 0 {
		f.fails--
		f.mu.Unlock()
		return errDown
	}
	f.mu.Unlock()
	return f.Store.Record(ctx, l, out)
}

// TestRecordRetriedWhileTheStoreIsAway: an outcome that cannot be recorded at
// once (a store restarting) is retried, so duplicates are answered from it
// rather than holder_lost once the lease runs out.
func TestRecordRetriedWhileTheStoreIsAway(t *testing.T) {
	b := &body{}
	e := newEnv(t, newTool(t, "book", policy(tool.Effectful, "flight"), tool.Retry{}, b))
	d := e.dispatcherOver(t, "w1", &flakyRecordStore{Store: e.store, fails: 4}, nil)
	first := mustDispatch(t, d, call("book", "c1", `{"flight":"BA117"}`))
	if first.Kind != events.KindCompleted {
		t.Fatalf("first: %+v", first)
	}
	rec, err := e.store.Get(context.Background(), "acme", first.Key)
	if err != nil || rec.State != kvstore.StateCompleted || rec.Outcome != "ok" {
		t.Fatalf("record after 4 failed attempts = %+v, %v; want completed", rec, err)
	}
	if dup := mustDispatch(t, d, call("book", "c2", `{"flight":"BA117"}`)); dup.Kind != events.KindDeduplicated || b.entered.Load() != 1 {
		t.Fatalf("duplicate: %+v, entries %d", dup, b.entered.Load())
	}
}
