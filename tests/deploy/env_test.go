package deploy_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/clienttest"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
	"github.com/tesserix/toolexec/tool/workerset"
)

// layout is a server configuration under test and how its identities must
// connect to it.
type layout struct {
	// conf is the configuration file.
	conf string
	// adminAccount is the executors' admin.Config.Account.
	adminAccount string
	// inbox is the inbox prefix each user must connect with; a user not listed
	// uses the default _INBOX.
	inbox map[string]string
	// calm says the executors meet no refusal even while they are attacked. The
	// old file refuses some of their replies to what an attacker had delivered
	// to them (an admin error reply to a JetStream acknowledgement subject).
	calm bool
}

var (
	// accountsLayout is deploy/accounts.conf as shipped, with executors started
	// as its comments say (--admin-account ADMIN).
	accountsLayout = layout{conf: "../../deploy/accounts.conf", adminAccount: "ADMIN", calm: true}
	// allowListLayout is the file accounts.conf replaced: one account, a user
	// per identity fenced by allow lists, each tenant confined to an inbox
	// prefix of its own. Only the attacks are played against it.
	allowListLayout = layout{
		conf:  "testdata/tenants.conf",
		inbox: map[string]string{"admin": "_INBOX_admin", "acme": "_INBOX_acme", "globex": "_INBOX_globex"},
	}
)

// passwordVars are the users both files define and the variables their
// passwords come from.
var passwordVars = map[string]string{
	"executor": "TOOLEXEC_EXECUTOR_PASSWORD",
	"admin":    "TOOLEXEC_ADMIN_PASSWORD",
	"acme":     "TOOLEXEC_ACME_PASSWORD",
	"globex":   "TOOLEXEC_GLOBEX_PASSWORD",
	"worker":   "TOOLEXEC_WORKER_PASSWORD",
}

const (
	// waitLong bounds the wait for what must happen: an answer, a reply.
	waitLong = 30 * time.Second
	// settle is how long a check that something did NOT happen waits after the
	// last thing that would have caused it. Every such check follows a reply or
	// an answer that came after the cause, so this is slack, not a measure.
	settle = time.Second
	// executors is how many executors share the work, as in the attacks
	// reported (three, in one queue group for the admin subjects).
	executors = 3
)

// quiet discards the logs of the pieces under test.
var quiet = slog.New(slog.DiscardHandler)

func ctxT(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// setPasswords puts a fresh password for every user in the environment, where
// the configuration files read them, and returns them by user.
func setPasswords(t *testing.T) map[string]string {
	t.Helper()
	pw := make(map[string]string)
	for user, v := range passwordVars {
		p := "pw" + rand.Text()
		t.Setenv(v, p)
		pw[user] = p
	}
	return pw
}

// startServer runs the server conf describes, changing only where it listens
// and keeps its data.
func startServer(t *testing.T, conf string) *server.Server {
	t.Helper()
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("loading %s: %v", conf, err)
	}
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.HTTPHost, opts.HTTPPort = "", 0
	opts.StoreDir = t.TempDir()
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("server from %s: %v", conf, err)
	}
	go s.Start()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("the server did not start")
	}
	return s
}

// env is a server running a layout, the passwords it was started with, the
// downstream the tools act on, the executors, and a connection of the
// executors' user through which the tests look at the streams and the bucket
// (and play the operators' and the history service's parts), whether the
// executors run or not.
type env struct {
	layout
	srv   *server.Server
	pw    map[string]string
	down  *downstream
	tools []*tool.Tool
	// natsTools and workers are the executors' tools served by workers and
	// how they learn the workers' tools; none, unless an envOption says.
	natsTools []natstool.Pending
	workers   *workerset.Config
	// extra are tools served besides the downstream's; none unless an
	// envOption says.
	extra []*tool.Tool
	execs []*executor
	view  *conn
	store *natsstore.Store // the bucket, on view
}

// envOption adjusts an env before its executors start.
type envOption func(*env)

// newEnv starts a server from l and its executors.
func newEnv(t *testing.T, l layout, opts ...envOption) *env {
	t.Helper()
	e := &env{layout: l, pw: setPasswords(t), down: newDownstream()}
	for _, o := range opts {
		o(e)
	}
	e.srv = startServer(t, l.conf)
	e.tools = append(e.down.tools(t), e.extra...)
	e.view = e.as(t, "executor")
	e.execs = e.startExecutors(t, executors)
	store, err := natsstore.New(ctxT(t, waitLong), e.view.js, natsstore.Config{})
	if err != nil {
		t.Fatalf("executor: the bucket: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	e.store = store
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
	return slices.Clone(a.errs)
}

// conn is one identity's connection, as bus.Connect makes it, and the clients
// on it.
type conn struct {
	user   string
	nc     *nats.Conn
	js     jetstream.JetStream
	client clienttest.Client
	admin  *admin.Client
	errs   *asyncErrors
}

// as connects as user, with its password and the inbox prefix the layout
// confines it to.
func (e *env) as(t *testing.T, user string) *conn {
	t.Helper()
	nc, err := bus.Connect(bus.ConnectConfig{
		URL: e.srv.ClientURL(), User: user, Password: e.pw[user], InboxPrefix: e.inbox[user], Name: user, Logger: quiet,
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
	c.client = clienttest.New(t, nc, toolexec.WithLogger(quiet))
	if c.admin, err = admin.NewClient(nc); err != nil {
		t.Fatal(err)
	}
	return c
}

// noErrors fails the test if the server refused c anything: every identity
// must be able to do its job without meeting a refusal.
func (c *conn) noErrors(t *testing.T) {
	t.Helper()
	if err := c.nc.Flush(); err != nil {
		t.Errorf("%s: flush: %v", c.user, err)
	}
	for _, err := range c.errs.all() {
		t.Errorf("%s met an asynchronous error: %v", c.user, err)
	}
}

// executor is an executor as cmd/executor runs one, connected as the executor
// user.
type executor struct {
	*conn
	ex   *toolexec.Executor
	stop func()
}

// startExecutors starts n executors serving e's tools; each stops when the
// test ends, or at its stop. All are made before any runs: nats-server 2.15.3
// races (under -race) when one executor's stream update meets another's
// consumer create on the same stream.
func (e *env) startExecutors(t *testing.T, n int) []*executor {
	t.Helper()
	xs := make([]*executor, n)
	for i := range xs {
		xs[i] = &executor{conn: e.as(t, "executor")}
		var workers *workerset.Config
		if e.workers != nil {
			w := *e.workers
			workers = &w
		}
		ex, err := toolexec.NewExecutor(ctxT(t, waitLong), xs[i].nc, toolexec.ExecutorConfig{
			Tools: e.tools, NATSTools: e.natsTools, Workers: workers, Concurrency: 8, AdminAccount: e.adminAccount, Logger: quiet,
		})
		if err != nil {
			t.Fatalf("executor: %v", err)
		}
		xs[i].ex = ex
	}
	for _, x := range xs {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- x.ex.Run(ctx) }()
		x.stop = sync.OnceFunc(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("executor: %v", err)
			}
			x.ex.Close()
		})
		t.Cleanup(x.stop)
	}
	return xs
}

// stopExecutors stops every executor gracefully; calls published afterwards
// wait in TOOLEXEC_CALLS.
func (e *env) stopExecutors() {
	for _, x := range e.execs {
		x.stop()
	}
}

// noErrors fails the test if any executor, or the tests' own connection of
// the executors' user, met a refusal.
func (e *env) noErrors(t *testing.T) {
	t.Helper()
	for _, x := range e.execs {
		x.noErrors(t)
	}
	e.view.noErrors(t)
}

// stored returns how many messages stream holds on subjects matching filter.
func (e *env) stored(t *testing.T, stream, filter string) uint64 {
	t.Helper()
	ctx := ctxT(t, waitLong)
	s, err := e.view.js.Stream(ctx, stream)
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

// firstStored decodes the first event stored in TOOLEXEC_EVENTS under
// subject, read through an ordered consumer as the executors' identity: both
// files let it make consumers on the events stream, while only accounts.conf
// lets it get messages (which Client.Attach does).
func (e *env) firstStored(t *testing.T, subject string) (events.Answer, error) {
	t.Helper()
	ctx := ctxT(t, waitLong)
	cons, err := e.view.js.OrderedConsumer(ctx, wire.EventStream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		t.Fatalf("executor: a consumer on %s: %v", subject, err)
	}
	m, err := cons.Next(jetstream.FetchMaxWait(waitLong))
	if err != nil {
		t.Fatalf("executor: reading %s: %v", subject, err)
	}
	return wire.DecodeAnswer(m.Headers(), m.Data())
}

// lastSeq returns the last sequence of stream.
func (e *env) lastSeq(t *testing.T, stream string) uint64 {
	t.Helper()
	ctx := ctxT(t, waitLong)
	s, err := e.view.js.Stream(ctx, stream)
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
func (e *env) records(t *testing.T, tenant string) [][]byte {
	t.Helper()
	recs, err := e.store.DumpRaw(ctxT(t, waitLong), tenant)
	if err != nil {
		t.Fatalf("executor: records of %s: %v", tenant, err)
	}
	return recs
}

// downstream stands for the systems the tools act on: it counts every effect,
// by idempotency key for the effectful book, by tenant for echo.
type downstream struct {
	mu      sync.Mutex     // protects effects
	effects map[string]int // "book/<key>" or "echo/<tenant>" -> effects
}

func newDownstream() *downstream { return &downstream{effects: make(map[string]int)} }

// bookArgs are the arguments of book: an Effectful booking keyed by flight,
// which fails after its effect when asked to.
type bookArgs struct {
	Flight string `json:"flight"`
	Fail   bool   `json:"fail,omitempty"`
}

// tools returns echo (no policy: it returns its arguments) and book (Effectful,
// keyed by flight), both counting their effects on d.
func (d *downstream) tools(t *testing.T) []*tool.Tool {
	t.Helper()
	echo, err := tool.New(tool.Spec{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, tc tool.Context, args json.RawMessage) (string, error) {
			d.effect("echo/" + tc.Tenant)
			return string(args), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	book, err := tool.Typed(tool.Spec{Name: "book", Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}}},
		func(_ context.Context, tc tool.Context, a bookArgs) (string, error) {
			d.effect("book/" + tc.IdempotencyKey)
			if a.Fail {
				return "", errors.New("the airline took the seat, then the line dropped")
			}
			return "PNR-" + a.Flight, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return []*tool.Tool{echo, book}
}

func (d *downstream) effect(what string) {
	d.mu.Lock()
	d.effects[what]++
	d.mu.Unlock()
}

// count returns how many effects what had.
func (d *downstream) count(what string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.effects[what]
}

// onePerKey fails the test if any booking key reached the downstream more than
// once: the guarantee every attack aims at.
func (d *downstream) onePerKey(t *testing.T) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, what := range slices.Sorted(maps.Keys(d.effects)) {
		if n := d.effects[what]; strings.HasPrefix(what, "book/") && n != 1 {
			t.Errorf("the downstream counts %d bookings for key %s, want 1", n, strings.TrimPrefix(what, "book/"))
		}
	}
}

// call returns a call. A call id is its tenant's alone (see
// TestCallIDsAreTheTenantsOwn).
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

// bookings are the calls every attack is played around: acme's and globex's
// one booking each.
type bookings struct {
	acme, globex events.Answer
}

// book makes acme's and globex's bookings, each of which must run once.
func (e *env) book(t *testing.T, acme, globex *conn) bookings {
	t.Helper()
	b := bookings{
		acme:   mustCall(t, acme, call("acme", "book", "run-1", "a-book-1", `{"flight":"BA117"}`), events.KindCompleted),
		globex: mustCall(t, globex, call("globex", "book", "run-1", "g-book-1", `{"flight":"LH400"}`), events.KindCompleted),
	}
	for _, a := range []events.Answer{b.acme, b.globex} {
		if n := e.down.count("book/" + a.Key); n != 1 {
			t.Fatalf("%s's booking ran %d times, want once", a.Tenant, n)
		}
	}
	return b
}

// rebook books the same flights again under new call ids and checks that
// both are answered from their records, so that the records survived whatever
// came in between, and that no booking ever ran twice.
func (e *env) rebook(t *testing.T, acme, globex *conn, b bookings, round int) {
	t.Helper()
	for _, r := range []struct {
		c      *conn
		before events.Answer
		flight string
	}{{acme, b.acme, "BA117"}, {globex, b.globex, "LH400"}} {
		id := fmt.Sprintf("%s-rebook-%d", r.c.user, round)
		a := mustCall(t, r.c, call(r.c.user, "book", "run-1", id, `{"flight":"`+r.flight+`"}`), events.KindDeduplicated)
		if a.Key != r.before.Key || a.Outcome != r.before.Outcome {
			t.Errorf("%s's booking again answered %+v, want the outcome %q of key %s", r.c.user, a, r.before.Outcome, r.before.Key)
		}
	}
	e.down.onePerKey(t)
}

// next returns the next answer from ch.
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

// subscribe subscribes c to subject and makes sure the server has the
// subscription before returning.
func (c *conn) subscribe(t *testing.T, subject string) *nats.Subscription {
	t.Helper()
	sub, err := c.nc.SubscribeSync(subject)
	if err != nil {
		t.Fatalf("%s: subscribing to %s: %v", c.user, subject, err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := c.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}

// nothingOn fails the test if any of subs (named by what they spy on)
// received anything, after waiting settle for stragglers.
func nothingOn(t *testing.T, subs map[string]*nats.Subscription) {
	t.Helper()
	time.Sleep(settle)
	for _, who := range slices.Sorted(maps.Keys(subs)) {
		for {
			m, err := subs[who].NextMsg(time.Millisecond)
			if errors.Is(err, nats.ErrTimeout) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", who, err)
			}
			t.Errorf("%s received %s: %.200s", who, m.Subject, m.Data)
		}
	}
}

// apiError is the error member of a JetStream API reply.
type apiError struct {
	Code    int    `json:"code"`
	ErrCode int    `json:"err_code"`
	Desc    string `json:"description"`
}

// apiReply reads a JetStream API reply: its error, nil if it succeeded.
func apiReply(t *testing.T, data []byte) *apiError {
	t.Helper()
	var r struct {
		Error *apiError `json:"error"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("a JetStream API reply that is not JSON: %q", data)
	}
	return r.Error
}
