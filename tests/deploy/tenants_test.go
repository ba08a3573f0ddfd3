package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/tool"
)

// confFile is the configuration under test, exactly as shipped.
const confFile = "../../deploy/tenants.conf"

// identities are the users of tenants.conf, the environment variables their
// passwords come from, and the inbox prefix each must connect with ("" for the
// default _INBOX).
var identities = []struct{ user, env, inbox string }{
	{"executor", "TOOLEXEC_EXECUTOR_PASSWORD", ""},
	{"admin", "TOOLEXEC_ADMIN_PASSWORD", "_INBOX_admin"},
	{"acme", "TOOLEXEC_ACME_PASSWORD", "_INBOX_acme"},
	{"globex", "TOOLEXEC_GLOBEX_PASSWORD", "_INBOX_globex"},
}

const (
	// waitLong bounds the wait for what must happen: an answer, a refusal.
	waitLong = 30 * time.Second
	// refusedWait bounds a request whose publication the server refuses, so
	// that it can only end with its context.
	refusedWait = 2 * time.Second
)

// quiet discards the logs of the pieces under test.
var quiet = slog.New(slog.DiscardHandler)

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// setPasswords puts a fresh password for every identity in the environment, where
// tenants.conf reads them, and returns them by user.
func setPasswords(t *testing.T) map[string]string {
	t.Helper()
	pw := make(map[string]string)
	for _, id := range identities {
		p := "pw" + rand.Text()
		t.Setenv(id.env, p)
		pw[id.user] = p
	}
	return pw
}

// env is a server running tenants.conf, the passwords it was started with, and
// an executor on it.
type env struct {
	srv  *server.Server
	pw   map[string]string
	exec *executor
}

// newEnv starts a server from tenants.conf and an executor connected as the
// executor user.
func newEnv(t *testing.T) *env {
	t.Helper()
	pw := setPasswords(t)
	opts, err := server.ProcessConfigFile(confFile)
	if err != nil {
		t.Fatalf("loading %s: %v", confFile, err)
	}
	// Only where the server listens and keeps its data changes.
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.HTTPHost, opts.HTTPPort = "", 0
	opts.StoreDir = t.TempDir()
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("server from %s: %v", confFile, err)
	}
	go s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("the server did not start")
	}
	e := &env{srv: s, pw: pw}
	e.exec = startExecutor(t, e)
	return e
}

// asyncErrors collects a connection's asynchronous errors: the server reports a
// refused publication or subscription this way, never as the result of Publish
// or Subscribe.
type asyncErrors struct {
	mu   sync.Mutex // protects errs
	errs []error
}

func (a *asyncErrors) record(_ *nats.Conn, _ *nats.Subscription, err error) {
	a.mu.Lock()
	a.errs = append(a.errs, err)
	a.mu.Unlock()
}

func (a *asyncErrors) all() []error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]error(nil), a.errs...)
}

// refusedAs reports whether the server refused op ("Publish" or "Subscription")
// on subject.
func (a *asyncErrors) refusedAs(op, subject string) bool {
	want := fmt.Sprintf("Permissions Violation for %s to %q", op, subject)
	for _, err := range a.all() {
		if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), want) {
			return true
		}
	}
	return false
}

// conn is one identity's connection, as bus.Connect makes it.
type conn struct {
	user   string
	nc     *nats.Conn
	js     jetstream.JetStream
	client *bus.Client
	admin  *admin.Client
	errs   *asyncErrors
}

// as connects as user with its password and the inbox prefix tenants.conf
// confines it to.
func (e *env) as(t *testing.T, user string) *conn {
	t.Helper()
	for _, id := range identities {
		if id.user == user {
			return e.connect(t, user, id.inbox)
		}
	}
	t.Fatalf("no identity %q", user)
	return nil
}

// connect connects as user with the given inbox prefix.
func (e *env) connect(t *testing.T, user, inbox string) *conn {
	t.Helper()
	nc, err := bus.Connect(bus.ConnectConfig{
		URL: e.srv.ClientURL(), User: user, Password: e.pw[user], InboxPrefix: inbox, Name: user, Logger: quiet,
	})
	if err != nil {
		t.Fatalf("connecting as %s: %v", user, err)
	}
	t.Cleanup(nc.Close)
	c := &conn{user: user, nc: nc, errs: &asyncErrors{}}
	nc.SetErrorHandler(c.errs.record)
	if c.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	if c.client, err = bus.NewClient(c.js, bus.ClientConfig{Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	if c.admin, err = admin.NewClient(nc); err != nil {
		t.Fatal(err)
	}
	return c
}

// noErrors fails the test if the server refused c anything: the identity's
// permissions must cover all it did.
func (c *conn) noErrors(t *testing.T) {
	t.Helper()
	if err := c.nc.Flush(); err != nil {
		t.Errorf("%s: flush: %v", c.user, err)
	}
	for _, err := range c.errs.all() {
		t.Errorf("%s met an asynchronous error: %v", c.user, err)
	}
}

// waitRefused waits until the server has refused c op on subject.
func (c *conn) waitRefused(t *testing.T, op, subject string) {
	t.Helper()
	deadline := time.Now().Add(waitLong)
	for !c.errs.refusedAs(op, subject) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the server did not refuse %s to %q; errors: %v", c.user, op, subject, c.errs.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// publishRefused publishes to subject and waits for the server's refusal.
func (c *conn) publishRefused(t *testing.T, subject string) {
	t.Helper()
	if err := c.nc.Publish(subject, []byte(`{}`)); err != nil {
		t.Fatalf("%s: publishing to %s: %v", c.user, subject, err)
	}
	c.waitRefused(t, "Publish", subject)
}

// subscribeRefused subscribes to subject and waits for the server's refusal.
func (c *conn) subscribeRefused(t *testing.T, subject string) {
	t.Helper()
	sub, err := c.nc.SubscribeSync(subject)
	if err != nil {
		t.Fatalf("%s: subscribing to %s: %v", c.user, subject, err)
	}
	defer sub.Unsubscribe()
	c.waitRefused(t, "Subscription", subject)
}

// executor is an executor connected as the executor user: the streams, the KV
// store, the admin responder and a worker serving two tools whose bodies count
// their runs per tenant.
type executor struct {
	*conn
	store  *natsstore.Store
	disp   *dispatch.Dispatcher
	worker *bus.Worker
	done   chan error

	mu   sync.Mutex     // protects runs
	runs map[string]int // "<tenant>/<tool>" -> bodies entered
}

// bookArgs are the arguments of the book tool: an Effectful booking keyed by
// flight, which fails after its effect when asked to.
type bookArgs struct {
	Flight string `json:"flight"`
	Fail   bool   `json:"fail,omitempty"`
}

func startExecutor(t *testing.T, e *env) *executor {
	t.Helper()
	x := &executor{conn: e.as(t, "executor"), runs: make(map[string]int)}
	ctx := ctxT(t, waitLong)
	if err := bus.EnsureStreams(ctx, x.js, bus.StreamsConfig{}); err != nil {
		t.Fatalf("executor: EnsureStreams: %v", err)
	}
	store, err := natsstore.New(ctx, x.js, natsstore.Config{})
	if err != nil {
		t.Fatalf("executor: natsstore: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	x.store = store

	echo, err := tool.New(tool.Spec{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, tc tool.Context, args json.RawMessage) (string, error) {
			x.ran(tc)
			return string(args), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	book, err := tool.Typed(tool.Spec{Name: "book", Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}}},
		func(_ context.Context, tc tool.Context, a bookArgs) (string, error) {
			x.ran(tc)
			if a.Fail {
				return "", errors.New("the airline took the seat, then the line dropped")
			}
			return "PNR-" + a.Flight, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := tool.NewRegistry(echo, book)
	if err != nil {
		t.Fatal(err)
	}
	if x.disp, err = dispatch.New(dispatch.Config{Tools: reg, Store: store, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	adm, err := admin.Serve(x.js, store, admin.Config{Logger: quiet})
	if err != nil {
		t.Fatalf("executor: admin.Serve: %v", err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	x.startWorker(t)
	return x
}

func (x *executor) ran(tc tool.Context) {
	x.mu.Lock()
	x.runs[tc.Tenant+"/"+tc.Tool]++
	x.mu.Unlock()
}

// bodies returns how often tool's body ran for tenant.
func (x *executor) bodies(tenant, tool string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.runs[tenant+"/"+tool]
}

func (x *executor) startWorker(t *testing.T) {
	t.Helper()
	w, err := bus.NewWorker(x.js, x.disp, bus.WorkerConfig{Concurrency: 8, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	x.worker, x.done = w, make(chan error, 1)
	go func() { x.done <- w.Run(context.Background()) }()
	t.Cleanup(func() { x.stopWorker(t) })
}

// stopWorker stops the worker gracefully; calls published afterwards stay in
// TOOLEXEC_CALLS.
func (x *executor) stopWorker(t *testing.T) {
	t.Helper()
	if x.worker == nil {
		return
	}
	if err := x.worker.Shutdown(ctxT(t, waitLong)); err != nil {
		t.Errorf("worker shutdown: %v", err)
	}
	if err := <-x.done; err != nil {
		t.Errorf("worker: %v", err)
	}
	x.worker = nil
}

// stored returns how many messages stream holds on subjects matching filter,
// as the executor (allowed stream info) sees it.
func (x *executor) stored(t *testing.T, stream, filter string) uint64 {
	t.Helper()
	ctx := ctxT(t, waitLong)
	s, err := x.js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("executor: stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatalf("executor: info of %s: %v", stream, err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// lastSeq returns the last sequence of stream.
func (x *executor) lastSeq(t *testing.T, stream string) uint64 {
	t.Helper()
	ctx := ctxT(t, waitLong)
	s, err := x.js.Stream(ctx, stream)
	if err != nil {
		t.Fatalf("executor: stream %s: %v", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatalf("executor: info of %s: %v", stream, err)
	}
	return info.State.LastSeq
}

// records returns tenant's records as the bucket holds them.
func (x *executor) records(t *testing.T, tenant string) [][]byte {
	t.Helper()
	recs, err := x.store.DumpRaw(ctxT(t, waitLong), tenant)
	if err != nil {
		t.Fatalf("executor: records of %s: %v", tenant, err)
	}
	return recs
}

// call returns a call. Call ids are unique across tenants: the calls stream
// deduplicates by call id whatever the tenant (see TestCallIDsSpanTenants).
func call(tenant, tool, runID, callID, args string) events.Call {
	return events.Call{Tenant: tenant, Tool: tool, RunID: runID, CallID: callID, Source: "/agents/test", Arguments: json.RawMessage(args)}
}

// mustCall makes c's call and checks that its answer is of kind want.
func mustCall(t *testing.T, c *conn, cl events.Call, want events.Kind) events.Answer {
	t.Helper()
	a, err := c.client.Call(ctxT(t, waitLong), cl)
	if err != nil {
		t.Fatalf("%s: Call %s: %v", c.user, cl.CallID, err)
	}
	if a.Kind != want || a.Tenant != cl.Tenant || a.CallID != cl.CallID {
		t.Fatalf("%s: Call %s answered %+v, want %s for %s", c.user, cl.CallID, a, want, cl.Tenant)
	}
	return a
}

// next returns the next event from ch.
func next(t *testing.T, who string, ch <-chan events.Answer) events.Answer {
	t.Helper()
	select {
	case a, ok := <-ch:
		if !ok {
			t.Fatalf("%s: the watch ended", who)
		}
		return a
	case <-time.After(waitLong):
		t.Fatalf("%s: no event", who)
	}
	return events.Answer{}
}

// TestTenantsConfFile checks the file itself: it starts only with every
// password set, syncs JetStream writes before acknowledging them, and lets no
// one in without credentials.
func TestTenantsConfFile(t *testing.T) {
	setPasswords(t)
	opts, err := server.ProcessConfigFile(confFile)
	if err != nil {
		t.Fatalf("loading %s: %v", confFile, err)
	}
	if !opts.JetStream || !opts.SyncAlways {
		t.Errorf("JetStream %v, sync_interval always %v; want both", opts.JetStream, opts.SyncAlways)
	}
	if opts.HTTPHost != "127.0.0.1" {
		t.Errorf("monitoring listens on %q, want the loopback interface only", opts.HTTPHost)
	}
	users := map[string]*server.User{}
	for _, u := range opts.Users {
		users[u.Username] = u
	}
	for _, id := range identities {
		u := users[id.user]
		if u == nil {
			t.Errorf("no user %s", id.user)
			continue
		}
		if u.Permissions == nil || u.Permissions.Publish == nil || u.Permissions.Subscribe == nil ||
			len(u.Permissions.Publish.Allow) == 0 || len(u.Permissions.Subscribe.Allow) == 0 {
			t.Errorf("user %s has no publish and subscribe allow lists", id.user)
		}
		if u.Account == nil || u.Account.Name != "TOOLEXEC" {
			t.Errorf("user %s is not in the account TOOLEXEC", id.user)
		}
	}
	if len(users) != len(identities) {
		t.Errorf("%d users, want %d", len(users), len(identities))
	}

	// The hazard the file warns of: a variable set empty is an empty password.
	t.Setenv("TOOLEXEC_GLOBEX_PASSWORD", "")
	opts, err = server.ProcessConfigFile(confFile)
	if err != nil {
		t.Fatalf("loading %s with an empty password: %v", confFile, err)
	}
	for _, u := range opts.Users {
		if u.Username == "globex" && u.Password != "" {
			t.Errorf("an empty variable gave globex the password %q: the warning in %s is out of date", u.Password, confFile)
		}
	}

	// One password missing: the server must not start.
	if err := os.Unsetenv("TOOLEXEC_GLOBEX_PASSWORD"); err != nil { // t.Setenv restores it
		t.Fatal(err)
	}
	if _, err := server.ProcessConfigFile(confFile); err == nil {
		t.Error("the configuration loaded without TOOLEXEC_GLOBEX_PASSWORD")
	}
}

// TestTenantsNeedCredentials checks that connections without a user, or with
// another user's password, are turned away.
func TestTenantsNeedCredentials(t *testing.T) {
	e := newEnv(t)
	if nc, err := nats.Connect(e.srv.ClientURL()); err == nil {
		nc.Close()
		t.Error("a connection without credentials was accepted")
	}
	if nc, err := nats.Connect(e.srv.ClientURL(), nats.UserInfo("acme", e.pw["globex"])); err == nil {
		nc.Close()
		t.Error("acme was let in with globex's password")
	}
}

// TestTenantCallsItsOwnTools: a tenant calls, re-calls, publishes, attaches and
// watches on its own subjects through bus.Client, and neither it nor the
// executor meets a single permission error.
func TestTenantCallsItsOwnTools(t *testing.T) {
	e := newEnv(t)
	acme := e.as(t, "acme")
	ctx := ctxT(t, waitLong)

	watch, err := acme.client.Watch(ctx, wire.TenantEventSubjects("acme"), bus.WatchFromStart())
	if err != nil {
		t.Fatalf("acme: Watch its own events: %v", err)
	}
	first := mustCall(t, acme, call("acme", "echo", "run-1", "call-1", `{"say":"hi"}`), events.KindCompleted)
	if first.Outcome != `{"say":"hi"}` {
		t.Errorf("echo outcome %q", first.Outcome)
	}
	// The same call again: the stream drops it as a duplicate, and the client
	// finds the stored answer through an Attach consumer.
	again := mustCall(t, acme, call("acme", "echo", "run-1", "call-1", `{"say":"hi"}`), events.KindCompleted)
	if again.Outcome != first.Outcome {
		t.Errorf("re-call answered %q, want %q", again.Outcome, first.Outcome)
	}
	booked := mustCall(t, acme, call("acme", "book", "run-1", "call-2", `{"flight":"BA117"}`), events.KindCompleted)
	if booked.Outcome != "PNR-BA117" || booked.Key == "" {
		t.Errorf("book answered %+v", booked)
	}
	// Publish now, attach later.
	if _, err := acme.client.Publish(ctx, call("acme", "book", "run-2", "call-3", `{"flight":"BA117"}`)); err != nil {
		t.Fatalf("acme: Publish: %v", err)
	}
	dup, err := acme.client.Attach(ctx, "acme", "book", "run-2", "call-3")
	if err != nil {
		t.Fatalf("acme: Attach: %v", err)
	}
	if dup.Kind != events.KindCompleted && dup.Kind != events.KindDeduplicated {
		t.Errorf("Attach answered %+v", dup)
	}
	for i, want := range []string{"call-1", "call-2", "call-3"} {
		if a := next(t, "acme watch", watch); a.CallID != want || a.Tenant != "acme" {
			t.Errorf("watched event %d: %s of %s, want %s of acme", i, a.CallID, a.Tenant, want)
		}
	}
	acme.noErrors(t)
	e.exec.noErrors(t)
}

// TestTenantNeedsItsInbox: with the default inbox prefix a tenant cannot even
// receive its PubAcks, which is why tenants.conf confines each to _INBOX_<t>.
func TestTenantNeedsItsInbox(t *testing.T) {
	e := newEnv(t)
	acme := e.connect(t, "acme", "")
	ctx := ctxT(t, refusedWait)
	if _, err := acme.client.Publish(ctx, call("acme", "echo", "run-1", "call-1", `{}`)); err == nil {
		t.Error("acme published a call with replies to _INBOX.>")
	}
	if !slices.ContainsFunc(acme.errs.all(), func(err error) bool {
		return errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), `Subscription to "_INBOX.`)
	}) {
		t.Errorf("no refusal of the default inbox; errors: %v", acme.errs.all())
	}
}

// TestTenantCannotCallAsAnother: every way for acme to put a call on globex's
// subjects is refused, and globex's tools never run.
func TestTenantCannotCallAsAnother(t *testing.T) {
	e := newEnv(t)
	acme, globex := e.as(t, "acme"), e.as(t, "globex")
	before := e.exec.lastSeq(t, wire.CallStream)

	// Straight to the subject.
	acme.publishRefused(t, "toolexec.call.globex.book")
	acme.publishRefused(t, "toolexec.call.globex.echo")
	// Through the client, which subscribes to the answer first.
	if _, err := acme.client.Call(ctxT(t, refusedWait), call("globex", "book", "run-1", "call-1", `{"flight":"BA117"}`)); err == nil {
		t.Error("acme's Call as globex returned without error")
	}
	acme.waitRefused(t, "Subscription", wire.AnswerFilter("globex", "book", "run-1", "call-1"))
	acme.waitRefused(t, "Publish", wire.CallSubject("globex", "book"))
	if after := e.exec.lastSeq(t, wire.CallStream); after != before {
		t.Errorf("TOOLEXEC_CALLS grew from %d to %d", before, after)
	}

	// On its own subject, claiming to be globex in the tenant extension: the
	// executor rejects it, on acme's subjects.
	ev, err := wire.CallEvent(call("globex", "book", "run-1", "call-2", `{"flight":"BA117"}`))
	if err != nil {
		t.Fatal(err)
	}
	msg, err := wire.NewMsg(wire.CallSubject("acme", "book"), ev, wire.Structured)
	if err != nil {
		t.Fatal(err)
	}
	answer, err := acme.nc.SubscribeSync(wire.AnswerFilter("acme", "book", "run-1", "call-2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acme.js.PublishMsg(ctxT(t, waitLong), msg, jetstream.WithMsgID("call-2")); err != nil {
		t.Fatalf("acme: publishing on its own subject: %v", err)
	}
	m, err := answer.NextMsg(waitLong)
	if err != nil {
		t.Fatalf("acme: no answer to the call claiming globex: %v", err)
	}
	if a, err := wire.DecodeAnswer(m.Header, m.Data); err != nil || a.Kind != events.KindRejected || a.Code != events.CodeTenantMismatch {
		t.Errorf("the call claiming globex was answered %+v, %v; want rejected, tenant_mismatch", a, err)
	}

	// With a reply subject on globex's calls: the server delivers acme's PubAck
	// there (reply subjects are not checked against permissions), but it is no
	// call, and the executor rejects it without running anything.
	gw, err := globex.client.Watch(ctxT(t, waitLong), wire.TenantEventSubjects("globex"), bus.WatchFromStart())
	if err != nil {
		t.Fatalf("globex: Watch: %v", err)
	}
	ev, err = wire.CallEvent(call("acme", "echo", "run-1", "call-3", `{}`))
	if err != nil {
		t.Fatal(err)
	}
	msg, err = wire.NewMsg(wire.CallSubject("acme", "echo"), ev, wire.Structured)
	if err != nil {
		t.Fatal(err)
	}
	msg.Reply = wire.CallSubject("globex", "book")
	if err := acme.nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	if a := next(t, "globex watch", gw); a.Kind != events.KindRejected || a.Tenant != "globex" || !strings.HasPrefix(a.CallID, bus.StandInPrefix) {
		t.Errorf("the PubAck sent to globex's calls was answered %+v, want a rejection under a stand-in call id", a)
	}
	if n := e.exec.bodies("globex", "book") + e.exec.bodies("globex", "echo"); n != 0 {
		t.Errorf("globex's tools ran %d times; globex called nothing", n)
	}
	if n := e.exec.bodies("acme", "book"); n != 0 {
		t.Errorf("book ran %d times for calls that should all be refused or rejected", n)
	}
	globex.noErrors(t)
	e.exec.noErrors(t)
}

// TestTenantCannotReadAnother: acme cannot subscribe to globex's answers or
// inbox, cannot watch or attach to them, cannot smuggle globex's filter into a
// consumer it may create, and cannot reach the API requests that read streams
// whole.
func TestTenantCannotReadAnother(t *testing.T) {
	e := newEnv(t)
	acme, globex := e.as(t, "acme"), e.as(t, "globex")
	mustCall(t, globex, call("globex", "book", "run-1", "g-call-1", `{"flight":"LH400"}`), events.KindCompleted)

	for _, subject := range []string{
		"toolexec.event.globex.>",
		wire.AnswerFilter("globex", "book", "run-1", "g-call-1"),
		"toolexec.event.>",
		"toolexec.event.*.completed.>",
		">",
		"_INBOX.>",
		"_INBOX_globex.>",
		"toolexec.call.>",
		"toolexec.admin.>",
		"$JS.>",
	} {
		t.Run("subscribe "+subject, func(t *testing.T) { acme.subscribeRefused(t, subject) })
	}

	// A refused subscription receives nothing: globex's next answer reaches
	// globex and not acme.
	spy, err := acme.nc.SubscribeSync("toolexec.event.globex.>")
	if err != nil {
		t.Fatal(err)
	}
	acme.waitRefused(t, "Subscription", "toolexec.event.globex.>")
	mustCall(t, globex, call("globex", "echo", "run-1", "g-call-2", `{"secret":"LH400"}`), events.KindCompleted)
	if err := acme.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	if m, err := spy.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("acme received globex's %s", m.Subject)
	}

	// Watch and Attach on globex's subjects: the consumer is never created.
	ctx := ctxT(t, refusedWait)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Go(func() { _, errs[0] = acme.client.Watch(ctx, "toolexec.event.globex.>", bus.WatchFromStart()) })
	wg.Go(func() { _, errs[1] = acme.client.Watch(ctx, "", bus.WatchFromStart()) })
	wg.Go(func() { _, errs[2] = acme.client.Attach(ctx, "globex", "book", "run-1", "g-call-1") })
	wg.Wait()
	for i, what := range []string{"Watch globex", "Watch everything", "Attach to globex's call"} {
		if errs[i] == nil {
			t.Errorf("acme: %s succeeded", what)
		}
	}
	if !slices.ContainsFunc(acme.errs.all(), func(err error) bool {
		return strings.Contains(err.Error(), `Publish to "$JS.API.CONSUMER.CREATE.TOOLEXEC_EVENTS.`) &&
			strings.Contains(err.Error(), `.toolexec.event.globex.*.book.run-1.g-call-1"`)
	}) {
		t.Errorf("no refusal of the consumer for globex's call; errors: %v", acme.errs.all())
	}

	// A consumer create on a subject acme may use, whose body asks for globex's
	// events: the server answers with an error and creates nothing.
	for name, cfg := range map[string]string{
		"filter":  `"filter_subject":"toolexec.event.globex.>"`,
		"filters": `"filter_subjects":["toolexec.event.globex.>"]`,
		"none":    `"deliver_policy":"all"`,
	} {
		t.Run("smuggled "+name, func(t *testing.T) {
			subject := "$JS.API.CONSUMER.CREATE.TOOLEXEC_EVENTS.sneak_" + name + ".toolexec.event.acme.>"
			body := `{"stream_name":"TOOLEXEC_EVENTS","config":{"name":"sneak_` + name + `","ack_policy":"none",` + cfg + `}}`
			reply, err := acme.nc.Request(subject, []byte(body), waitLong)
			if err != nil {
				t.Fatalf("consumer create request: %v", err)
			}
			var resp struct {
				Error *struct {
					Code int    `json:"err_code"`
					Desc string `json:"description"`
				} `json:"error"`
			}
			if err := json.Unmarshal(reply.Data, &resp); err != nil || resp.Error == nil {
				t.Fatalf("a consumer on globex's events was accepted: %s", reply.Data)
			}
		})
	}

	// The API requests that read a stream whatever its subjects, or name any
	// consumer, and the idempotency records.
	for _, subject := range []string{
		"$JS.API.STREAM.INFO.TOOLEXEC_EVENTS",
		"$JS.API.STREAM.INFO.TOOLEXEC_CALLS",
		"$JS.API.STREAM.MSG.GET.TOOLEXEC_EVENTS",
		"$JS.API.DIRECT.GET.TOOLEXEC_EVENTS",
		"$JS.API.DIRECT.GET.TOOLEXEC_EVENTS.toolexec.event.globex.completed.book.run-1.g-call-1",
		"$JS.API.CONSUMER.LIST.TOOLEXEC_EVENTS",
		"$JS.API.CONSUMER.NAMES.TOOLEXEC_EVENTS",
		"$JS.API.CONSUMER.INFO.TOOLEXEC_EVENTS.x",
		"$JS.API.CONSUMER.DELETE.TOOLEXEC_EVENTS.x",
		"$JS.API.CONSUMER.CREATE.TOOLEXEC_CALLS.toolexec-executor",
		"$JS.API.CONSUMER.MSG.NEXT.TOOLEXEC_CALLS.toolexec-executor",
		"$JS.API.STREAM.PURGE.TOOLEXEC_EVENTS",
		"$JS.API.STREAM.DELETE.TOOLEXEC_EVENTS",
		"$JS.API.STREAM.MSG.GET.KV_toolexec_idempotency",
		"$JS.API.INFO",
		"$KV.toolexec_idempotency.globex.x",
		"toolexec.event.acme.completed.book.run-1.call-9",
	} {
		t.Run("publish "+subject, func(t *testing.T) { acme.publishRefused(t, subject) })
	}
	globex.noErrors(t)
	e.exec.noErrors(t)
}

// TestTenantCannotAdminister: acme's admin requests never reach an executor,
// and acme cannot stand in for the admin responder either.
func TestTenantCannotAdminister(t *testing.T) {
	e := newEnv(t)
	acme, globex := e.as(t, "acme"), e.as(t, "globex")
	booked := mustCall(t, globex, call("globex", "book", "run-1", "g-call-1", `{"flight":"LH400"}`), events.KindCompleted)

	ctx := ctxT(t, refusedWait)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Go(func() { _, errs[0] = acme.admin.Forget(ctx, "globex") })
	wg.Go(func() {
		_, errs[1] = acme.admin.List(ctx, admin.ListRequest{Tenant: "globex", State: kvstore.StateCompleted})
	})
	wg.Go(func() { _, errs[2] = acme.admin.Inspect(ctx, "globex", booked.Key) })
	wg.Go(func() {
		_, errs[3] = acme.admin.Resolve(ctx, admin.ResolveRequest{Tenant: "globex", Key: booked.Key, Action: events.ActionRelease})
	})
	wg.Wait()
	for i, what := range []string{"Forget", "List", "Inspect", "Resolve"} {
		if errs[i] == nil || errors.Is(errs[i], admin.ErrNoResponder) {
			t.Errorf("acme: %s: %v, want the request refused", what, errs[i])
		}
	}
	for _, subject := range []string{admin.ForgetSubject, admin.ListSubject, admin.InspectSubject, admin.ResolveSubject} {
		acme.waitRefused(t, "Publish", subject)
	}
	acme.subscribeRefused(t, admin.Subjects)
	acme.subscribeRefused(t, admin.ForgetSubject)
	if recs := e.exec.records(t, "globex"); len(recs) != 1 {
		t.Errorf("globex has %d records after acme's forget, want 1", len(recs))
	}
	if n := e.exec.stored(t, wire.EventStream, wire.TenantEventSubjects("globex")); n != 1 {
		t.Errorf("globex has %d events after acme's forget, want 1", n)
	}
	e.exec.noErrors(t)
}

// TestCallIDsSpanTenants pins down a limit tenants.conf names, which no
// permission can lift: JetStream deduplicates the one calls stream by
// Nats-Msg-Id, the call id, across tenants. A tenant that publishes first with
// another tenant's call id turns that tenant's call into a duplicate that is
// never stored. If this test fails, the limit is gone: update tenants.conf.
func TestCallIDsSpanTenants(t *testing.T) {
	e := newEnv(t)
	acme, globex := e.as(t, "acme"), e.as(t, "globex")
	ctx := ctxT(t, waitLong)
	if ack, err := acme.client.Publish(ctx, call("acme", "echo", "run-1", "shared-id", `{}`)); err != nil || ack.Duplicate {
		t.Fatalf("acme: Publish = %+v, %v", ack, err)
	}
	ack, err := globex.client.Publish(ctx, call("globex", "book", "run-1", "shared-id", `{"flight":"LH400"}`))
	if err != nil {
		t.Fatalf("globex: Publish: %v", err)
	}
	if !ack.Duplicate {
		t.Error("globex's call with acme's call id was stored: the limit named in tenants.conf is gone, update its comments")
	}
}

// TestExecutorWatchesALargeBucket: a watch over many records is paced by flow
// control, whose replies the executor must be allowed to send; without them the
// watch stalls.
func TestExecutorWatchesALargeBucket(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t, waitLong)
	kv, err := e.exec.js.KeyValue(ctx, natsstore.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	const n = 600 // 600 values of 16 KiB: well past what the server sends unpaced
	val := []byte(strings.Repeat("x", 16<<10))
	for i := range n {
		if _, err := kv.Put(ctx, fmt.Sprintf("acme.%064x", i), val); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(e.exec.records(t, "acme")); got != n {
		t.Errorf("the watch read %d records, want %d", got, n)
	}
	e.exec.noErrors(t)
}

// TestOnlyTheExecutorAndAdminDoTheirJobs: the executor may not publish calls,
// the admin may not publish calls or events.
func TestOnlyTheExecutorAndAdminDoTheirJobs(t *testing.T) {
	e := newEnv(t)
	ops := e.as(t, "admin")
	e.exec.publishRefused(t, "toolexec.call.acme.book")
	e.exec.publishRefused(t, "$JS.API.STREAM.DELETE.TOOLEXEC_CALLS")
	ops.publishRefused(t, "toolexec.call.acme.book")
	ops.publishRefused(t, "toolexec.event.acme.completed.book.run-1.call-1")
	ops.publishRefused(t, "$JS.API.STREAM.PURGE.TOOLEXEC_EVENTS")
	ops.subscribeRefused(t, "_INBOX.>")
	ops.subscribeRefused(t, "toolexec.admin.>")
}

// TestAdminForgetsATenant: the admin inspects and resolves a tenant's key,
// audits indeterminate answers, and forgets the tenant: its records are erased
// and its subjects purged from both streams, while another tenant's stay.
func TestAdminForgetsATenant(t *testing.T) {
	e := newEnv(t)
	acme, globex, ops := e.as(t, "acme"), e.as(t, "globex"), e.as(t, "admin")
	ctx := ctxT(t, waitLong)

	audit, err := ops.client.Watch(ctx, wire.KindSubjects(events.KindIndeterminate), bus.WatchFromStart())
	if err != nil {
		t.Fatalf("admin: Watch indeterminate: %v", err)
	}
	lost := mustCall(t, acme, call("acme", "book", "run-1", "call-1", `{"flight":"BA117","fail":true}`), events.KindIndeterminate)
	booked := mustCall(t, acme, call("acme", "book", "run-1", "call-2", `{"flight":"AF1"}`), events.KindCompleted)
	theirs := mustCall(t, globex, call("globex", "book", "run-1", "g-call-1", `{"flight":"LH400"}`), events.KindCompleted)
	if a := next(t, "admin audit", audit); a.Kind != events.KindIndeterminate || a.Tenant != "acme" || a.Key != lost.Key {
		t.Errorf("admin audit saw %+v, want acme's indeterminate key %s", a, lost.Key)
	}

	// The console's feed: the executor watches every tenant's events of a kind.
	feed, err := e.exec.client.Watch(ctx, wire.KindSubjects(events.KindIndeterminate), bus.WatchSince(time.Now().Add(-time.Hour)))
	if err != nil {
		t.Fatalf("executor: Watch for the console: %v", err)
	}
	if a := next(t, "console feed", feed); a.Key != lost.Key {
		t.Errorf("the console feed saw %+v, want acme's indeterminate key %s", a, lost.Key)
	}

	list, err := ops.admin.List(ctx, admin.ListRequest{Tenant: "acme"})
	if err != nil || len(list.Records) != 1 || list.Records[0].Key != lost.Key {
		t.Fatalf("admin: List = %+v, %v; want acme's one indeterminate key", list, err)
	}
	rec, err := ops.admin.Inspect(ctx, "acme", lost.Key)
	if err != nil || rec.State != kvstore.StateIndeterminate {
		t.Fatalf("admin: Inspect = %+v, %v; want indeterminate", rec, err)
	}
	rec, err = ops.admin.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: lost.Key, Action: events.ActionComplete, Outcome: "PNR-BA117", Operator: "ops"})
	if err != nil || rec.State != kvstore.StateCompleted || rec.Outcome != "PNR-BA117" {
		t.Fatalf("admin: Resolve = %+v, %v; want completed", rec, err)
	}

	// Calls that wait in TOOLEXEC_CALLS while no worker runs, for both tenants.
	e.exec.stopWorker(t)
	if _, err := acme.client.Publish(ctx, call("acme", "book", "run-2", "call-3", `{"flight":"BA117"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := globex.client.Publish(ctx, call("globex", "book", "run-1", "g-call-2", `{"flight":"LH400"}`)); err != nil {
		t.Fatal(err)
	}

	stored := func(stream, tenant string) uint64 {
		sub := wire.TenantEventSubjects(tenant)
		if stream == wire.CallStream {
			sub = wire.TenantCallSubjects(tenant)
		}
		return e.exec.stored(t, stream, sub)
	}
	for _, tenant := range []string{"acme", "globex"} {
		if stored(wire.CallStream, tenant) == 0 || stored(wire.EventStream, tenant) == 0 || len(e.exec.records(t, tenant)) == 0 {
			t.Fatalf("%s has nothing stored before forget", tenant)
		}
	}
	globexEvents, globexRecords := stored(wire.EventStream, "globex"), len(e.exec.records(t, "globex"))

	n, err := ops.admin.Forget(ctx, "acme")
	if err != nil {
		t.Fatalf("admin: Forget acme: %v", err)
	}
	if n != -1 {
		t.Errorf("Forget = %d; the JetStream store cannot count and says -1", n)
	}
	if recs := e.exec.records(t, "acme"); len(recs) != 0 {
		t.Errorf("acme keeps %d records after forget", len(recs))
	}
	for _, stream := range []string{wire.CallStream, wire.EventStream} {
		if n := stored(stream, "acme"); n != 0 {
			t.Errorf("%s keeps %d messages of acme after forget", stream, n)
		}
	}
	for _, key := range []string{lost.Key, booked.Key} {
		if _, err := ops.admin.Inspect(ctx, "acme", key); !errors.Is(err, kvstore.ErrNotFound) {
			t.Errorf("admin: Inspect of a forgotten key: %v, want ErrNotFound", err)
		}
	}

	if got := stored(wire.CallStream, "globex"); got != 1 {
		t.Errorf("globex's waiting calls: %d after acme's forget, want 1", got)
	}
	if got := stored(wire.EventStream, "globex"); got != globexEvents {
		t.Errorf("globex's events: %d after acme's forget, want %d", got, globexEvents)
	}
	if got := len(e.exec.records(t, "globex")); got != globexRecords {
		t.Errorf("globex's records: %d after acme's forget, want %d", got, globexRecords)
	}
	if rec, err := ops.admin.Inspect(ctx, "globex", theirs.Key); err != nil || rec.Outcome != "PNR-LH400" {
		t.Errorf("admin: Inspect of globex's key after acme's forget = %+v, %v", rec, err)
	}

	// globex's waiting call is still served once a worker runs again.
	e.exec.startWorker(t)
	a, err := globex.client.Attach(ctx, "globex", "book", "run-1", "g-call-2")
	if err != nil || a.Kind != events.KindDeduplicated || a.Outcome != "PNR-LH400" {
		t.Errorf("globex's waiting call answered %+v, %v; want deduplicated PNR-LH400", a, err)
	}
	for _, c := range []*conn{acme, globex, ops, e.exec.conn} {
		c.noErrors(t)
	}
}
