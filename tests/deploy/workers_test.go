package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
	"github.com/tesserix/toolexec/tool/workerset"
	"github.com/tesserix/toolexec/worker"
)

// learning has the executors learn the workers' tools, in quick rounds, and
// declare refund, a tool served by workers that no worker serves here.
func learning(e *env) {
	e.workers = &workerset.Config{Interval: 100 * time.Millisecond, Window: 100 * time.Millisecond, Absent: 2}
	e.natsTools = []natstool.Pending{{Spec: tool.Spec{Name: "refund", Idempotency: &tool.Policy{Kind: tool.Effectful}}}}
}

// rebooks is a worker's body of rebook: it counts each key's entries and
// records the tenants it served.
type rebooks struct {
	mu      sync.Mutex // protects the fields below
	entries map[string]int
	tenants []string
}

// rebookSpec declares rebook: effectful, keyed by pnr.
var rebookSpec = tool.Spec{
	Name: "rebook", Description: "Move a booking.", Timeout: 5 * time.Second,
	Parameters:  json.RawMessage(`{"type":"object","properties":{"pnr":{"type":"string"},"secret":{"type":"string"}},"required":["pnr"]}`),
	Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"pnr"}},
}

func (r *rebooks) tool(t *testing.T) *tool.Tool {
	t.Helper()
	tl, err := tool.New(rebookSpec, func(_ context.Context, tc tool.Context, args json.RawMessage) (string, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.entries[tc.IdempotencyKey]++
		if !slices.Contains(r.tenants, tc.Tenant) {
			r.tenants = append(r.tenants, tc.Tenant)
		}
		var a struct{ PNR string }
		if err := json.Unmarshal(args, &a); err != nil {
			return "", err
		}
		return "moved " + a.PNR + " for " + tc.Tenant, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func (r *rebooks) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.entries[key]
}

func (r *rebooks) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.entries {
		n += c
	}
	return n
}

// serve runs a Go worker of tools on c's connection.
func (c *conn) serve(t *testing.T, tools ...*tool.Tool) *worker.Worker {
	t.Helper()
	w, err := worker.Serve(c.nc, worker.Config{Version: "1.0.0", Logger: quiet}, tools...)
	if err != nil {
		t.Fatalf("%s: worker.Serve: %v", c.user, err)
	}
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

// listsRebook waits until tenant c's catalog lists rebook, as its worker
// declares it: the executors learnt it from the workers' account. Each
// executor learns it in its own round, so it waits for all of them, each of
// which may take any call.
func (e *env) listsRebook(t *testing.T, c *conn) {
	t.Helper()
	if !wait.Until(waitLong, func() bool {
		decls, err := c.client.Tools(ctxT(t, waitLong), c.user)
		return err == nil && slices.ContainsFunc(decls, func(d bus.ToolDecl) bool {
			return d.Name == "rebook" && d.Kind == tool.Effectful && slices.Equal(d.KeyArguments, []string{"pnr"})
		})
	}) {
		t.Fatalf("%s's catalog never listed the workers' rebook", c.user)
	}
	for _, x := range e.execs {
		if !wait.Until(waitLong, func() bool { return slices.Contains(x.ex.Tools(), "rebook") }) {
			t.Fatalf("an executor never learnt rebook: it serves %v", x.ex.Tools())
		}
	}
}

// TestWorkerServesTenants: a worker connected as worker, in WORKERS, serves
// rebook; the executors learn it across the accounts and run it for acme and
// globex, each key's body once, the worker learning each call's tenant; a tool
// the executors declare that no worker serves fails without effect at once.
func TestWorkerServesTenants(t *testing.T) {
	e := newEnv(t, accountsLayout, learning)
	acme, globex, wk := e.as(t, "acme"), e.as(t, "globex"), e.as(t, "worker")
	r := &rebooks{entries: map[string]int{}}
	wk.serve(t, r.tool(t))
	e.listsRebook(t, acme)

	first := mustCall(t, acme, call("acme", "rebook", "run-1", "a-1", `{"pnr":"K7Q2ZD"}`), events.KindCompleted)
	if first.Outcome != "moved K7Q2ZD for acme" {
		t.Errorf("acme's rebook answered %q", first.Outcome)
	}
	again := mustCall(t, acme, call("acme", "rebook", "run-1", "a-2", `{"pnr":"K7Q2ZD"}`), events.KindDeduplicated)
	if again.Outcome != first.Outcome {
		t.Errorf("the duplicate answered %q, want %q", again.Outcome, first.Outcome)
	}
	theirs := mustCall(t, globex, call("globex", "rebook", "run-1", "g-1", `{"pnr":"K7Q2ZD"}`), events.KindCompleted)
	if theirs.Outcome != "moved K7Q2ZD for globex" || theirs.Key == first.Key {
		t.Errorf("globex's rebook answered %q under %s", theirs.Outcome, theirs.Key)
	}
	if r.count(first.Key) != 1 || r.count(theirs.Key) != 1 {
		t.Errorf("the body ran %d and %d times for the two keys, want once each", r.count(first.Key), r.count(theirs.Key))
	}
	if r.mu.Lock(); !slices.Equal(r.tenants, []string{"acme", "globex"}) {
		t.Errorf("the worker served tenants %v, want acme then globex", r.tenants)
	}
	r.mu.Unlock()

	refund := mustCall(t, acme, call("acme", "refund", "run-1", "a-3", `{}`), events.KindFailed)
	if refund.Code != events.CodeNoEffect || !strings.Contains(refund.Error, "no worker") {
		t.Errorf("refund, which no worker serves, answered %s %q; want failed no_effect", refund.Code, refund.Error)
	}
	for _, x := range e.execs {
		if cs := x.ex.Conflicts(); len(cs) != 0 {
			t.Errorf("an executor withholds %v", cs)
		}
	}
	e.noErrors(t)
	wk.noErrors(t)
}

// TestTenantCannotReachWorkers: a tenant's requests on the body subjects and
// on the workers' service API, $SRV.>, reach no worker.
func TestTenantCannotReachWorkers(t *testing.T) {
	e := newEnv(t, accountsLayout, learning)
	acme, wk := e.as(t, "acme"), e.as(t, "worker")
	r := &rebooks{entries: map[string]int{}}
	w := wk.serve(t, r.tool(t))
	e.listsRebook(t, acme)
	for _, subject := range []string{
		wire.BodySubject("rebook"), "toolexec.body.refund",
		"$SRV.INFO", "$SRV.PING", "$SRV.STATS",
		wire.WorkerInfoSubject, "$SRV.PING." + wire.WorkerService, "$SRV.STATS." + wire.WorkerService,
		"$SRV.INFO." + wire.WorkerService + "." + w.ID(), "$SRV.PING." + wire.WorkerService + "." + w.ID(),
	} {
		t.Run(subject, func(t *testing.T) {
			reply, err := acme.nc.Request(subject, []byte(`{"pnr":"K7Q2ZD"}`), settle)
			if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
				t.Errorf("acme's request on %s: %v, %+v; want no responder", subject, err, reply)
			}
		})
	}
	if n := r.total(); n != 0 {
		t.Errorf("the worker's body ran %d times for requests of acme's", n)
	}
}

// TestTenantCannotImpersonateAWorker: acme runs a service named
// toolexec-worker in its own account, declaring rebook otherwise and a tool of
// its own: no executor hears it. rebook stays the real worker's, the tool of
// acme's is unknown, and acme's bodies never run.
func TestTenantCannotImpersonateAWorker(t *testing.T) {
	e := newEnv(t, accountsLayout, learning)
	acme, wk := e.as(t, "acme"), e.as(t, "worker")
	r := &rebooks{entries: map[string]int{}}
	wk.serve(t, r.tool(t))
	var fakes sync.Map
	fake := func(spec tool.Spec) *tool.Tool {
		tl, err := tool.New(spec, func(_ context.Context, tc tool.Context, _ json.RawMessage) (string, error) {
			fakes.Store(tc.CallID, tc.Tenant)
			return "faked", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	other := rebookSpec
	other.Idempotency = &tool.Policy{Kind: tool.Idempotent}
	acme.serve(t, fake(other), fake(tool.Spec{Name: "exfiltrate"}))
	e.listsRebook(t, acme)
	time.Sleep(5 * 100 * time.Millisecond) // more rounds than a worker may go unheard

	for _, x := range e.execs {
		if cs := x.ex.Conflicts(); len(cs) != 0 {
			t.Errorf("an executor withholds %v: it heard acme's service", cs)
		}
		if names := x.ex.Tools(); slices.Contains(names, "exfiltrate") {
			t.Errorf("an executor serves %v: it learnt acme's tool", names)
		}
	}
	a := mustCall(t, acme, call("acme", "rebook", "run-1", "a-1", `{"pnr":"K7Q2ZD"}`), events.KindCompleted)
	if a.Outcome != "moved K7Q2ZD for acme" {
		t.Errorf("rebook answered %q, want the real worker's outcome", a.Outcome)
	}
	if u := mustCall(t, acme, call("acme", "exfiltrate", "run-1", "a-2", `{}`), events.KindRejected); u.Code != events.CodeUnknownTool {
		t.Errorf("acme's own tool answered %s, want unknown_tool", u.Code)
	}
	fakes.Range(func(k, v any) bool {
		t.Errorf("acme's fake body ran for call %v of %v", k, v)
		return true
	})
}

// TestTenantSeesNoBodyRequests: while globex calls a tool served by a worker,
// with a secret among its arguments, and the executors ask the workers for
// their tools, acme, subscribed to everything in its account, sees none of it.
func TestTenantSeesNoBodyRequests(t *testing.T) {
	e := newEnv(t, accountsLayout, learning)
	acme, globex, wk := e.as(t, "acme"), e.as(t, "globex"), e.as(t, "worker")
	r := &rebooks{entries: map[string]int{}}
	wk.serve(t, r.tool(t))
	spies := map[string]*nats.Subscription{}
	for _, subject := range []string{">", "toolexec.body.>", "$SRV.>", "_INBOX.>", "_R_.>"} {
		spies[subject] = acme.subscribe(t, subject)
	}
	e.listsRebook(t, globex)
	for i := range 3 {
		mustCall(t, globex, call("globex", "rebook", "run-1", fmt.Sprintf("g-%d", i), fmt.Sprintf(`{"pnr":"LH40%d","secret":"s3cret"}`, i)), events.KindCompleted)
	}
	if r.total() != 3 {
		t.Fatalf("the worker ran %d of globex's bodies, want 3", r.total())
	}
	nothingOn(t, spies)
	acme.noErrors(t)
}

// TestWorkerSeesOnlyItsRequests: a worker sees the requests of its bodies and
// nothing else: no call, answer, admin request or JetStream traffic, and what
// it publishes on a call subject reaches no stream.
func TestWorkerSeesOnlyItsRequests(t *testing.T) {
	e := newEnv(t, accountsLayout, learning)
	acme, wk := e.as(t, "acme"), e.as(t, "worker")
	r := &rebooks{entries: map[string]int{}}
	wk.serve(t, r.tool(t))
	spies := map[string]*nats.Subscription{}
	for _, subject := range []string{"toolexec.call.>", "toolexec.event.>", "toolexec.admin.>", "toolexec.history.>", "$JS.>", "$KV.>"} {
		spies[subject] = wk.subscribe(t, subject)
	}
	e.listsRebook(t, acme)
	mustCall(t, acme, call("acme", "rebook", "run-1", "a-1", `{"pnr":"K7Q2ZD"}`), events.KindCompleted)
	mustCall(t, acme, call("acme", "echo", "run-1", "a-2", `{"say":"hi"}`), events.KindCompleted)
	nothingOn(t, spies)

	before := e.lastSeq(t, wire.CallStream)
	msg, err := wire.CallJSON(call("acme", "book", "run-1", "w-1", `{"flight":"BA117"}`))
	if err != nil {
		t.Fatal(err)
	}
	// Only the worker's own spy on toolexec.call.> hears it, and does not reply.
	if _, err := wk.nc.RequestMsg(wire.StructuredMsg(wire.CallSubject("acme", "book", "w-1"), msg), settle); !errors.Is(err, nats.ErrTimeout) {
		t.Errorf("the worker's call on acme's subject: %v, want no reply", err)
	}
	if after := e.lastSeq(t, wire.CallStream); after != before {
		t.Errorf("the calls stream moved from %d to %d on the worker's publication", before, after)
	}
}

// TestWorkerAsExecutorRunsTwice shows why accounts.conf says to run workers as
// worker and never as executor: a worker in TOOLEXEC takes each request for
// its tool besides the WORKERS worker that does, the import being a
// subscription of its own outside the queue group, so an effectful body runs
// twice for one request. If this test fails, the server no longer delivers so,
// and the warning may go. Both replies reach the executor, which is how it
// tells the operator (natstool.Endpoint.OnExtraReply: an error logged, the
// metric toolexec_worker_extra_replies_total).
func TestWorkerAsExecutorRunsTwice(t *testing.T) {
	pw := setPasswords(t)
	srv := startServer(t, accountsLayout.conf)
	e := &env{layout: accountsLayout, pw: pw, srv: srv}
	inWorkers, inExecutors := &rebooks{entries: map[string]int{}}, &rebooks{entries: map[string]int{}}
	e.as(t, "worker").serve(t, inWorkers.tool(t))
	e.as(t, "executor").serve(t, inExecutors.tool(t))
	heard := make(chan string, 1)
	body, err := natstool.New(rebookSpec, natstool.Endpoint{Conn: e.as(t, "executor").nc, OnExtraReply: func(s string) { heard <- s }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := body.Call(ctxT(t, waitLong), tool.Context{Tenant: "acme", IdempotencyKey: "k1"}, json.RawMessage(`{"pnr":"K7Q2ZD"}`)); err != nil {
		t.Fatalf("the body's request: %v", err)
	}
	if !wait.Until(settle, func() bool { return inWorkers.count("k1")+inExecutors.count("k1") == 2 }) {
		t.Errorf("one request ran the body %d times in WORKERS and %d in TOOLEXEC; the warning in accounts.conf expects both",
			inWorkers.count("k1"), inExecutors.count("k1"))
	}
	select {
	case s := <-heard:
		if s != "toolexec.body.rebook" {
			t.Errorf("OnExtraReply(%q), want toolexec.body.rebook", s)
		}
	case <-time.After(natstool.ExtraReplyWindow + waitLong):
		t.Error("the executor did not hear the second reply")
	}
}

// TestBodyReplyWithinThreshold: the server forgets where a body's reply goes
// once the export's response_threshold has passed, as accounts.conf warns: a
// reply later than that never reaches the executor, and the call is answered
// as a body that timed out.
func TestBodyReplyWithinThreshold(t *testing.T) {
	pw := setPasswords(t)
	conf := mutate(t, func(s string) string {
		return strings.Replace(s, `response_threshold: "10m"`, `response_threshold: "500ms"`, 1)
	})
	e := &env{layout: accountsLayout, pw: pw, srv: startServer(t, conf)}
	slow, err := tool.New(rebookSpec, func(ctx context.Context, _ tool.Context, _ json.RawMessage) (string, error) {
		time.Sleep(time.Second)
		return "moved", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.as(t, "worker").serve(t, slow)
	body, err := natstool.New(rebookSpec, natstool.Endpoint{Conn: e.as(t, "executor").nc})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	out, err := body.Call(ctx, tool.Context{Tenant: "acme"}, json.RawMessage(`{"pnr":"K7Q2ZD"}`))
	if !errors.Is(err, context.DeadlineExceeded) || tool.IsNoEffect(err) {
		t.Errorf("a reply after the threshold: %q, %v; want no reply within the timeout", out, err)
	}
}
