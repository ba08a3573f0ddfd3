package workerset_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
	"github.com/tesserix/toolexec/tool/workerset"
)

// TestLearnsAndForgetsTools: the tools of a Go worker are put in the registry
// as the worker declares them, with bodies that reach it, and removed once
// the worker has gone unheard for Absent rounds.
func TestLearnsAndForgetsTools(t *testing.T) {
	h := newHarness(t, nil)
	book := build(t, spec("book", tool.Effectful, "flight"), "PNR-1")
	echo := build(t, spec("echo", ""), "hi")
	w := h.goWorker(t, book, echo)
	h.refresh(t)
	if h.names() != "book,echo" {
		t.Fatalf("after a round the registry serves %q, want book,echo", h.names())
	}
	got, _ := h.reg.Lookup("book")
	want := book.Spec()
	want.Timeout = natstool.DefaultTimeout
	if !reflect.DeepEqual(got.Spec(), want) {
		t.Errorf("book is registered as %+v, want %+v", got.Spec(), want)
	}
	if out, err := h.callTool(t, "book"); err != nil || out != "PNR-1" {
		t.Errorf("calling the learned book: %q, %v", out, err)
	}
	if r := h.obs.last(); r.Workers != 1 || r.Tools != 2 || r.Conflicts != 0 || r.Refused != 0 {
		t.Errorf("the round found %+v, want one worker serving two tools", r)
	}
	if n := len(h.logs.at(slog.LevelInfo)); n != 2 {
		t.Errorf("%d info lines for two tools learned, want 2", n)
	}
	h.refresh(t)
	if n := len(h.logs.at(slog.LevelInfo)); n != 2 {
		t.Errorf("a round that changed nothing logged: %d info lines", n)
	}

	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < absent; i++ {
		h.refresh(t)
		if h.names() != "book,echo" {
			t.Fatalf("after %d rounds unheard the worker's tools are gone: %q; want them kept for %d rounds", i, h.names(), absent)
		}
	}
	h.refresh(t)
	if h.names() != "" {
		t.Errorf("after %d rounds unheard the registry still serves %q", absent, h.names())
	}
	if _, err := h.reg.Get("book"); !errors.Is(err, tool.ErrUnknownTool) {
		t.Errorf("Get(book) after the worker left: %v, want ErrUnknownTool", err)
	}
}

// TestDeclarationsRefused: an endpoint whose declaration cannot be served is
// refused, logged at error level once while it lasts, naming the worker and
// the tool and saying why, and its tool is not served.
func TestDeclarationsRefused(t *testing.T) {
	const good = `{"name":"book","parameters":` + bookSchema + `,"kind":"effectful","key_arguments":["flight"]}`
	tests := []struct {
		name string
		ep   endpoint
		says string
	}{
		{"no declaration", endpoint{name: "book", subject: "toolexec.body.book", queue: wire.BodyQueue}, "no toolexec.declaration"},
		{"malformed JSON", endpoint{"book", "toolexec.body.book", wire.BodyQueue, declared(`{"name":"book",`)}, "not the JSON"},
		{"a bad name", endpoint{"book", "toolexec.body.book", wire.BodyQueue, declared(`{"name":"bo ok"}`)}, "name"},
		{"a schema that does not compile", endpoint{"book", "toolexec.body.book", wire.BodyQueue,
			declared(`{"name":"book","parameters":{"type":"object","properties":{"flight":{"type":7}}}}`)}, "parameters"},
		{"a key argument that is not a parameter", endpoint{"book", "toolexec.body.book", wire.BodyQueue,
			declared(`{"name":"book","parameters":` + bookSchema + `,"kind":"effectful","key_arguments":["date"]}`)}, `"date"`},
		{"a check argument that is not a parameter", endpoint{"book", "toolexec.body.book", wire.BodyQueue,
			declared(`{"name":"book","parameters":` + bookSchema + `,"kind":"effectful","check_arguments":["gate"]}`)}, `"gate"`},
		{"an unknown member", endpoint{"book", "toolexec.body.book", wire.BodyQueue,
			declared(`{"name":"book","kind":"effectful","key_argument":["flight"]}`)}, "key_argument"},
		{"another tool's name", endpoint{"book", "toolexec.body.book", wire.BodyQueue, declared(`{"name":"cancel"}`)}, `declares the tool "cancel"`},
		{"no queue group", endpoint{"book", "toolexec.body.book", "", declared(good)}, "queue group"},
		{"another queue group", endpoint{"book", "toolexec.body.book", "q", declared(good)}, "queue group"},
		{"a wildcard subject", endpoint{"book", "toolexec.body.*", wire.BodyQueue, declared(good)}, "subject"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			id := h.rawWorker(t, tt.ep)
			h.refresh(t)
			h.refresh(t)
			if h.names() != "" {
				t.Errorf("the registry serves %q from a refused declaration", h.names())
			}
			if _, err := h.reg.Get("book"); !errors.Is(err, tool.ErrUnknownTool) {
				t.Errorf("Get(book) = %v, want ErrUnknownTool (no conflict: no one else declares it)", err)
			}
			errs := h.logs.at(slog.LevelError)
			if len(errs) != 1 {
				t.Fatalf("%d error lines over two rounds, want 1: %+v", len(errs), errs)
			}
			e := errs[0]
			if e.attrs["worker"] != workerLabel(id, "0.1.0") || e.attrs["tool"] != "book" || !strings.Contains(e.attrs["error"], tt.says) {
				t.Errorf("logged %+v; want the worker %s, the tool book and an error saying %q", e, id, tt.says)
			}
			if r := h.obs.last(); r.Refused != 1 || r.Tools != 0 || r.Workers != 1 {
				t.Errorf("the round found %+v, want one worker and one refusal", r)
			}
		})
	}
}

// TestConflictBetweenWorkers: two workers declaring one tool differently put
// it in conflict — not served, logged at error level naming both and what
// differs, observed once — until one of them leaves, when it is served as the
// other declares it.
func TestConflictBetweenWorkers(t *testing.T) {
	h := newHarness(t, nil)
	w1 := h.goWorker(t, build(t, spec("book", tool.Effectful, "flight"), "one"))
	w2 := h.goWorker(t, build(t, spec("book", tool.Effectful, "flight", "seats"), "two"))
	h.refresh(t)
	h.refresh(t)
	_, err := h.reg.Get("book")
	var ce *tool.ConflictError
	if !errors.As(err, &ce) {
		t.Fatalf("Get(book) = %v, want a conflict", err)
	}
	for _, want := range []string{workerLabel(w1.ID(), "1.0.0"), workerLabel(w2.ID(), "1.0.0"), "differ in key_arguments"} {
		if !strings.Contains(ce.Msg, want) {
			t.Errorf("the conflict says %q; want it to name %q", ce.Msg, want)
		}
	}
	if strings.Contains(ce.Msg, "parameters") {
		t.Errorf("the conflict says %q: the parameters do not differ", ce.Msg)
	}
	if h.names() != "" {
		t.Errorf("a tool in conflict is served: %q", h.names())
	}
	errs := h.logs.at(slog.LevelError)
	if len(errs) != 1 || errs[0].attrs["tool"] != "book" || errs[0].attrs["conflict"] != ce.Msg {
		t.Errorf("error lines %+v; want one naming book and the conflict", errs)
	}
	if began := h.obs.conflictsBegun(); !slices.Equal(began, []string{"book"}) {
		t.Errorf("conflicts begun %v, want [book] once", began)
	}
	if r := h.obs.last(); r.Conflicts != 1 || r.Tools != 0 {
		t.Errorf("the round found %+v, want one conflict", r)
	}

	if err := w2.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range absent {
		h.refresh(t)
	}
	if out, err := h.callTool(t, "book"); err != nil || out != "one" {
		t.Fatalf("after the second worker left: %q, %v; want book served by the first", out, err)
	}
	got, _ := h.reg.Lookup("book")
	if keys := got.Policy().KeyArguments; !slices.Equal(keys, []string{"flight"}) {
		t.Errorf("book is served with key arguments %v, want the first worker's", keys)
	}
	if len(h.reg.Conflicts()) != 0 || len(h.obs.conflictsBegun()) != 1 {
		t.Errorf("conflicts %v after it ended", h.reg.Conflicts())
	}
}

// TestConflictNamesWhatDiffers: each part of a declaration counts, and only
// its meaning: spacing and member order of the schema, the order of key
// arguments, and an absent timeout against the default, do not.
func TestConflictNamesWhatDiffers(t *testing.T) {
	base := `"name":"book","description":"Take a seat.","kind":"effectful","key_arguments":["flight","seats"],"timeout_ms":30000`
	params := `"parameters":` + bookSchema
	alike := []string{
		`{` + base + `,` + params + `}`,
		`{"parameters":{"required":["flight"], "properties":{"seats":{"type":"integer"},"flight":{"type":"string"}},"type":"object"},` +
			`"name":"book","description":"Take a seat.","kind":"effectful","key_arguments":["seats","flight"]}`,
	}
	tests := []struct {
		name, other, differs string
	}{
		{"description", strings.Replace(alike[0], "Take a seat.", "Book a seat.", 1), "description"},
		{"parameters", strings.Replace(alike[0], `"integer"`, `"number"`, 1), "parameters"},
		{"kind", strings.Replace(alike[0], "effectful", "idempotent", 1), "kind"},
		{"every argument against a list", strings.Replace(alike[0], `"key_arguments":["flight","seats"],`, "", 1), "key_arguments"},
		{"check arguments", strings.Replace(alike[0], `"timeout_ms"`, `"check_arguments":["seats"],"timeout_ms"`, 1), "check_arguments"},
		{"timeout", strings.Replace(alike[0], "30000", "1000", 1), "timeout_ms"},
	}
	h := newHarness(t, nil)
	h.rawWorker(t, endpoint{"book", "toolexec.body.book", wire.BodyQueue, declared(alike[0])})
	h.rawWorker(t, endpoint{"book", "toolexec.body.book", wire.BodyQueue, declared(alike[1])})
	h.refresh(t)
	if _, err := h.reg.Get("book"); err != nil {
		t.Fatalf("two declarations alike in meaning: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.rawWorker(t, endpoint{"book", "toolexec.body.book", wire.BodyQueue, declared(alike[0])})
			h.rawWorker(t, endpoint{"book", "toolexec.body.book", wire.BodyQueue, declared(tt.other)})
			h.refresh(t)
			var ce *tool.ConflictError
			if _, err := h.reg.Get("book"); !errors.As(err, &ce) || !strings.HasSuffix(ce.Msg, "differ in "+tt.differs) {
				t.Errorf("Get(book) = %v; want a conflict in %s alone", err, tt.differs)
			}
		})
	}
	t.Run("subject", func(t *testing.T) {
		h := newHarness(t, nil)
		h.rawWorker(t, endpoint{"book", "toolexec.body.book", wire.BodyQueue, declared(alike[0])})
		h.rawWorker(t, endpoint{"book", "toolexec.body.book-v2", wire.BodyQueue, declared(alike[0])})
		h.refresh(t)
		var ce *tool.ConflictError
		if _, err := h.reg.Get("book"); !errors.As(err, &ce) || !strings.HasSuffix(ce.Msg, "differ in subject") {
			t.Errorf("Get(book) = %v; want a conflict in subject alone", err)
		}
	})
}

// TestRefusedBesideServed: a worker whose declaration of a tool is refused,
// beside another that declares it well, puts the tool in conflict: its
// endpoint shares the tool's subject and queue group.
func TestRefusedBesideServed(t *testing.T) {
	h := newHarness(t, nil)
	h.goWorker(t, build(t, spec("book", tool.Effectful, "flight"), "good"))
	bad := h.rawWorker(t, endpoint{"book", "toolexec.body.book", wire.BodyQueue, declared(`{"name":"book","kind":"once"}`)})
	h.refresh(t)
	var ce *tool.ConflictError
	if _, err := h.reg.Get("book"); !errors.As(err, &ce) || !strings.Contains(ce.Msg, bad) || !strings.Contains(ce.Msg, "share of the calls") {
		t.Fatalf("Get(book) = %v; want a conflict naming the refused worker", err)
	}
}

// TestServedTools: a tool the executor declares with a body served by workers
// (a tools file's nats: tool) stays the executor's: a worker declaring it
// alike changes nothing, one declaring it otherwise puts it in conflict, and
// a worker declaring a tool whose body the executor runs itself does too.
func TestServedTools(t *testing.T) {
	var conn nats.Conn // the registry's tools are not called here
	rebook, err := natstool.New(spec("rebook", tool.Idempotent, "flight"), natstool.Endpoint{Conn: &conn})
	if err != nil {
		t.Fatal(err)
	}
	cancel := build(t, spec("cancel", ""), "cancelled")
	h := newHarness(t, map[string]string{"rebook": ""}, rebook, cancel)

	alike := h.goWorker(t, build(t, spec("rebook", tool.Idempotent, "flight"), "x"))
	h.refresh(t)
	if got, err := h.reg.Get("rebook"); err != nil || got != rebook {
		t.Fatalf("Get(rebook) = %v, %v; want the executor's own tool", got, err)
	}
	if r := h.obs.last(); r.Tools != 1 || r.Conflicts != 0 {
		t.Errorf("the round found %+v, want rebook served by a worker", r)
	}

	other := h.goWorker(t, build(t, spec("rebook", tool.Effectful, "flight"), "x"))
	h.refresh(t)
	var ce *tool.ConflictError
	if _, err := h.reg.Get("rebook"); !errors.As(err, &ce) ||
		!strings.Contains(ce.Msg, "[the executor, "+workerLabel(alike.ID(), "1.0.0")+"] and ["+workerLabel(other.ID(), "1.0.0")+"]") ||
		!strings.HasSuffix(ce.Msg, "differ in kind") {
		t.Errorf("Get(rebook) = %v; want a conflict of the executor and the first worker against the second, in kind", err)
	}

	own := h.goWorker(t, build(t, spec("cancel", ""), "from a worker"))
	h.refresh(t)
	if _, err := h.reg.Get("cancel"); !errors.As(err, &ce) || !strings.Contains(ce.Msg, "runs its body itself") ||
		!strings.Contains(ce.Msg, own.ID()) {
		t.Errorf("Get(cancel) = %v; want a conflict: the executor runs cancel itself", err)
	}
	if err := own.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range absent {
		h.refresh(t)
	}
	if got, err := h.reg.Get("cancel"); err != nil || got != cancel {
		t.Errorf("after the worker left, Get(cancel) = %v, %v; want the executor's own tool again", got, err)
	}

	// A tool the executor registers later (an MCP server's import, once it
	// is reached) is its own too: a worker declaring it is a conflict, not
	// a replacement.
	late := build(t, spec("late", ""), "late")
	if err := h.reg.Register(late); err != nil {
		t.Fatal(err)
	}
	h.refresh(t)
	lateWorker := h.goWorker(t, build(t, spec("late", ""), "from a worker"))
	h.refresh(t)
	if _, err := h.reg.Get("late"); !errors.As(err, &ce) || !strings.Contains(ce.Msg, "runs its body itself") ||
		!strings.Contains(ce.Msg, lateWorker.ID()) {
		t.Errorf("Get(late) = %v; want a conflict: the executor runs late itself", err)
	}
}

// TestAbsentRounds: a worker that misses fewer than Absent rounds in a row is
// remembered, its tools served all along; one that misses Absent is forgotten.
func TestAbsentRounds(t *testing.T) {
	h := newHarness(t, nil)
	decl, err := natstool.Declaration(build(t, spec("book", tool.Effectful, "flight"), ""))
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(micro.Info{
		ServiceIdentity: micro.ServiceIdentity{Name: wire.WorkerService, ID: "flaky", Version: "1.0.0"},
		Type:            micro.InfoResponseType,
		Endpoints:       []micro.EndpointInfo{{Name: "book", Subject: "toolexec.body.book", QueueGroup: wire.BodyQueue, Metadata: declared(string(decl))}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var answering atomic.Bool
	nc := natstest.Connect(t, h.srv)
	if _, err := nc.Subscribe(wire.WorkerInfoSubject, func(m *nats.Msg) {
		if answering.Load() {
			_ = m.Respond(info)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	answering.Store(true)
	h.refresh(t)
	answering.Store(false)
	for i := 1; i < absent; i++ {
		h.refresh(t)
	}
	answering.Store(true)
	h.refresh(t)
	answering.Store(false)
	for i := 1; i < absent; i++ {
		h.refresh(t)
		if h.names() != "book" {
			t.Fatalf("after %d rounds unheard: %q, want book kept", i, h.names())
		}
	}
	h.refresh(t)
	if h.names() != "" {
		t.Errorf("after %d rounds unheard: %q, want book forgotten", absent, h.names())
	}
}

// TestUnreadableReplies: a reply that is not a worker's info is logged once
// while such replies come, and changes nothing.
func TestUnreadableReplies(t *testing.T) {
	h := newHarness(t, nil)
	h.goWorker(t, build(t, spec("book", tool.Effectful, "flight"), ""))
	nc := natstest.Connect(t, h.srv)
	for _, reply := range []string{`not json`, `{"name":"other-service","id":"x","type":"io.nats.micro.v1.info_response"}`} {
		if _, err := nc.Subscribe(wire.WorkerInfoSubject, func(m *nats.Msg) { _ = m.Respond([]byte(reply)) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	h.refresh(t)
	h.refresh(t)
	if h.names() != "book" {
		t.Errorf("the registry serves %q, want book", h.names())
	}
	if errs := h.logs.at(slog.LevelError); len(errs) != 1 || !strings.Contains(errs[0].msg, "not read") {
		t.Errorf("error lines %+v; want one about the replies not read", errs)
	}
}

// TestFailedRound: a round whose request cannot be sent returns its error,
// is observed as failed, and changes nothing.
func TestFailedRound(t *testing.T) {
	h := newHarness(t, nil)
	h.goWorker(t, build(t, spec("book", tool.Effectful, "flight"), ""))
	h.refresh(t)
	h.nc.Close()
	for range absent + 1 {
		if err := h.set.Refresh(context.Background()); err == nil {
			t.Fatal("a round on a closed connection succeeded")
		}
	}
	if r := h.obs.last(); !r.Failed || r.Workers != 1 {
		t.Errorf("the round is observed as %+v, want failed, the worker still known", r)
	}
	if h.names() != "book" {
		t.Errorf("failed rounds changed the registry: %q", h.names())
	}
}

// TestRun: Run refreshes every Interval until its context ends.
func TestRun(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	reg := &tool.Registry{}
	set, err := workerset.New(nc, reg, workerset.Config{Interval: 20 * time.Millisecond, Window: 20 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { set.Run(ctx); close(done) }()
	h := &harness{srv: srv}
	h.goWorker(t, build(t, spec("book", tool.Effectful, "flight"), ""))
	wait.Until(10*time.Second, func() bool { return len(reg.Names()) != 0 })
	cancel()
	<-done
	if !slices.Equal(reg.Names(), []string{"book"}) {
		t.Errorf("Run learned %v, want [book]", reg.Names())
	}
}

// TestNewRefuses: a Set that cannot work is refused when it is made.
func TestNewRefuses(t *testing.T) {
	nc := natstest.Connect(t, natstest.Start(t))
	reg, _ := tool.NewRegistry(build(t, spec("book", ""), ""))
	tests := []struct {
		name string
		nc   *nats.Conn
		reg  *tool.Registry
		cfg  workerset.Config
	}{
		{"no connection", nil, reg, workerset.Config{}},
		{"no registry", nc, nil, workerset.Config{}},
		{"a served tool not registered", nc, reg, workerset.Config{Served: map[string]string{"cancel": ""}}},
		{"a served subject with a wildcard", nc, reg, workerset.Config{Served: map[string]string{"book": "toolexec.body.*"}}},
		{"a negative window", nc, reg, workerset.Config{Window: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := workerset.New(tt.nc, tt.reg, tt.cfg); !errors.Is(err, workerset.ErrInvalidConfig) {
				t.Errorf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// TestNoWorkersEndsTheRoundAtOnce: with no worker anywhere the server answers
// the request with no responders, and the round ends without waiting for the
// window.
func TestNoWorkersEndsTheRoundAtOnce(t *testing.T) {
	srv := natstest.Start(t)
	set, err := workerset.New(natstest.Connect(t, srv), &tool.Registry{}, workerset.Config{Window: 10 * time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := set.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a round with no worker took %v, the window being 10s", d)
	}
}
