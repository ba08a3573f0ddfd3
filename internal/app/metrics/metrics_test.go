package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/internal/app/metrics"
	"github.com/tesserix/toolexec/internal/clock"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/workerset"
)

const secret = "ARG-SENTINEL-9182"

func newMetrics(t *testing.T, tools ...string) (*metrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Config{Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// value returns the value of the one series of name with the given labels
// (counter, gauge, or a histogram's sample count), or -1 when there is none.
func value(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			if len(got) != len(labels) {
				continue
			}
			for k, v := range labels {
				if got[k] != v {
					continue series
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				return m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				return m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}

type l = map[string]string

// TestDispatchMetrics drives a dispatcher over an instrumented store and reads
// back every dispatch series.
func TestDispatchMetrics(t *testing.T) {
	m, reg := newMetrics(t, "book", "cancel", "sync")
	fc := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	mem := memstore.New(memstore.Config{Clock: fc})
	t.Cleanup(func() { mem.Close() })
	store := m.Store(mem, "memory")
	schema := json.RawMessage(`{"type":"object","properties":{"flight":{"type":"string"},"request_id":{"type":"string"}}}`)
	mk := func(name string, kind tool.Kind, fn tool.Func) *tool.Tool {
		tl, err := tool.New(tool.Spec{Name: name, Parameters: schema, Idempotency: &tool.Policy{Kind: kind, KeyArguments: []string{"flight"}}}, fn)
		if err != nil {
			t.Fatal(err)
		}
		return tl
	}
	ok := func(context.Context, tool.Context, json.RawMessage) (string, error) { return "PNR", nil }
	fail := func(context.Context, tool.Context, json.RawMessage) (string, error) { return "", errors.New("reset") }
	reg2, err := tool.NewRegistry(mk("book", tool.Effectful, ok), mk("cancel", tool.Effectful, fail), mk("sync", tool.Idempotent, ok))
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{Tools: reg2, Store: store, Lease: time.Minute, Observer: m,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	call := func(tl, id, args string) events.Answer {
		t.Helper()
		a, err := d.Dispatch(context.Background(), events.Call{Tenant: "acme", RunID: "run_1", CallID: id, Tool: tl, Arguments: json.RawMessage(args)})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	call("book", "c1", `{"flight":"BA1","request_id":"`+secret+`"}`)
	call("book", "c2", `{"flight":"BA1","request_id":"`+secret+`"}`)
	call("book", "c3", `{"flight":"BA1"}`)
	a := call("cancel", "c4", `{"flight":"BA1","request_id":"`+secret+`"}`)
	call("sync", "c5", `{"request_id":"`+secret+`"}`)
	call("nope", "c6", `{}`)

	// A wait for a holder: hold a key, then let a call wait for it.
	res, err := mem.Claim(context.Background(), kvstore.ClaimRequest{Tenant: "acme", Key: keyOf(t, "book", "LH4"), Holder: "other", Lease: time.Minute})
	if err != nil || !res.Claimed {
		t.Fatalf("hold: %+v %v", res, err)
	}
	done := make(chan events.Answer)
	go func() { done <- call("book", "c7", `{"flight":"LH4"}`) }()
	fc.BlockUntil(1, nil)
	if err := mem.Record(context.Background(), res.Lease, "PNR-4"); err != nil {
		t.Fatal(err)
	}
	if got := <-done; got.Kind != events.KindDeduplicated {
		t.Fatalf("waiter: %+v", got)
	}

	for _, c := range []struct {
		name   string
		labels l
		want   float64
	}{
		{"toolexec_calls_total", l{"tool": "book", "kind": "completed"}, 1},
		{"toolexec_calls_total", l{"tool": "book", "kind": "deduplicated"}, 3},
		{"toolexec_calls_total", l{"tool": "book", "kind": "failed"}, 0}, // pre-created
		{"toolexec_calls_total", l{"tool": "cancel", "kind": "indeterminate"}, 1},
		{"toolexec_calls_total", l{"tool": "sync", "kind": "completed"}, 1},
		{"toolexec_calls_total", l{"tool": "(unknown)", "kind": "rejected"}, 1},
		{"toolexec_call_duration_seconds", l{"tool": "book", "kind": "deduplicated"}, 3},
		{"toolexec_calls_in_flight", l{"tool": "book"}, 0},
		{"toolexec_bodies_entered_total", l{"tool": "book"}, 1},
		{"toolexec_bodies_entered_total", l{"tool": "cancel"}, 1},
		{"toolexec_deduplicated_total", l{"tool": "book"}, 3},
		{"toolexec_indeterminate_total", l{"tool": "cancel", "reason": "body_failed"}, 1},
		{"toolexec_indeterminate_total", l{"tool": "cancel", "reason": "holder_lost"}, 0},
		{"toolexec_unguarded_runs_total", l{"tool": "sync", "reason": "key_underivable"}, 1},
		{"toolexec_holder_wait_seconds", l{"tool": "book"}, 1},
		{"toolexec_store_operation_duration_seconds", l{"store": "memory", "operation": "claim"}, 5},
		{"toolexec_store_operation_duration_seconds", l{"store": "memory", "operation": "record"}, 1},
		{"toolexec_store_operation_duration_seconds", l{"store": "memory", "operation": "mark_indeterminate"}, 1},
		{"toolexec_store_operation_duration_seconds", l{"store": "memory", "operation": "wait"}, 1},
	} {
		if got := value(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	noIdentities(t, reg, secret, a.Key, "run_1", "c1", "acme")
}

// keyOf derives the key the dispatcher claims for tool with flight.
func keyOf(t *testing.T, toolName, flight string) string {
	t.Helper()
	k, err := idemkey.Derive("acme", "run_1", toolName, []byte(`{"flight":"`+flight+`"}`), []string{"flight"})
	if err != nil {
		t.Fatal(err)
	}
	return k.Hex
}

// noIdentities fails if any label of any series holds one of the values, or
// uses a label name outside the bounded set.
func noIdentities(t *testing.T, reg *prometheus.Registry, values ...string) {
	t.Helper()
	allowed := map[string]bool{"tool": true, "kind": true, "reason": true, "code": true, "operation": true, "store": true, "error": true}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !allowed[lp.GetName()] {
					t.Errorf("%s has label %s", mf.GetName(), lp.GetName())
				}
				for _, v := range values {
					if strings.Contains(lp.GetValue(), v) {
						t.Errorf("%s{%s=%q} holds %q", mf.GetName(), lp.GetName(), lp.GetValue(), v)
					}
				}
			}
		}
	}
}

// TestWorkerMetrics: the bus observer methods feed their series, with codes
// bounded.
func TestWorkerMetrics(t *testing.T) {
	m, reg := newMetrics(t)
	m.MessageReceived(false)
	m.MessageReceived(true)
	m.MessageReceived(true)
	m.MessageRejected(events.CodeInvalidJSON)
	m.MessageRejected("")
	m.MessageRejected(events.Code("made-up " + secret))
	m.CallHandedBack()
	m.AnswerPublishRetried()
	m.AnswerPublishRetried()
	for _, c := range []struct {
		name   string
		labels l
		want   float64
	}{
		{"toolexec_messages_received_total", l{}, 3},
		{"toolexec_redeliveries_total", l{}, 2},
		{"toolexec_messages_rejected_total", l{"code": "invalid_json"}, 1},
		{"toolexec_messages_rejected_total", l{"code": "unaddressable"}, 1},
		{"toolexec_messages_rejected_total", l{"code": "other"}, 1},
		{"toolexec_calls_handed_back_total", l{}, 1},
		{"toolexec_answer_publish_retries_total", l{}, 2},
	} {
		if got := value(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	noIdentities(t, reg, secret)
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// TestWorkerSetMetrics: what the workers' discovery finds feeds its gauges,
// conflicts begun and failed rounds are counted, and a failed round leaves the
// gauges as they were.
func TestWorkerSetMetrics(t *testing.T) {
	m, reg := newMetrics(t)
	m.Refreshed(workerset.Round{Workers: 3, Tools: 4, Conflicts: 1, Refused: 2})
	m.ConflictBegan("book")
	m.Refreshed(workerset.Round{Failed: true})
	m.ConflictBegan("book")
	m.ExtraReply("toolexec.body.book")
	for _, c := range []struct {
		name string
		want float64
	}{
		{"toolexec_workers", 3},
		{"toolexec_worker_tools", 4},
		{"toolexec_worker_tool_conflicts", 1},
		{"toolexec_worker_declarations_refused", 2},
		{"toolexec_worker_conflicts_total", 2},
		{"toolexec_worker_discovery_failures_total", 1},
	} {
		if got := value(t, reg, c.name, l{}); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if got := value(t, reg, "toolexec_worker_extra_replies_total", l{"subject": "toolexec.body.book"}); got != 1 {
		t.Errorf("toolexec_worker_extra_replies_total = %v, want 1", got)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}

// downStore cannot be reached.
type downStore struct{ kvstore.Store }

var errDown = errors.Join(kvstore.ErrUnavailable, errors.New("connection refused"))

func (downStore) Claim(context.Context, kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	return kvstore.ClaimResult{}, errDown
}

// listerOnly is a store that lists but cannot withdraw.
type listerOnly struct{ *memstore.Store }

func (s listerOnly) Withdraw() {} // not kvstore.Withdrawer's: hides memstore's

// withdrawerOnly is a store that withdraws but cannot list.
type withdrawerOnly struct{ *memstore.Store }

func (s withdrawerOnly) List() {} // not kvstore.Lister's: hides memstore's

// TestStoreErrors: failures are counted by operation and class; the store's
// answers (not found, not holder, not indeterminate) are not failures.
func TestStoreErrors(t *testing.T) {
	m, reg := newMetrics(t)
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { mem.Close() })
	s := m.Store(mem, "memory")
	ctx := context.Background()
	d := strings.Repeat("a", 64)
	if _, err := s.Get(ctx, "acme", d); !errors.Is(err, kvstore.ErrNotFound) {
		t.Fatal(err)
	}
	if err := s.Release(ctx, kvstore.Lease{Tenant: "acme", Key: d, Holder: "w1", Token: "1"}); !errors.Is(err, kvstore.ErrNotHolder) {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "not a tenant", d); !errors.Is(err, kvstore.ErrInvalid) {
		t.Fatal(err)
	}
	down := m.Store(downStore{mem}, "redis")
	if _, err := down.Claim(ctx, kvstore.ClaimRequest{}); !errors.Is(err, kvstore.ErrUnavailable) {
		t.Fatal(err)
	}
	if _, ok := down.(kvstore.Lister); ok {
		t.Error("the wrapper of a store without List offers List")
	}
	if _, ok := s.(kvstore.Lister); !ok {
		t.Error("the wrapper of a Lister hides List")
	}
	// Each optional capability passes through on its own and with the other.
	for _, c := range []struct {
		name             string
		store            kvstore.Store
		lists, withdraws bool
	}{
		{"memstore", mem, true, true},
		{"a store with neither", downStore{mem}, false, false},
		{"a Lister only", listerOnly{mem}, true, false},
		{"a Withdrawer only", withdrawerOnly{mem}, false, true},
	} {
		w := m.Store(c.store, "memory")
		if _, ok := w.(kvstore.Lister); ok != c.lists {
			t.Errorf("the wrapper of %s offers List: %v, want %v", c.name, ok, c.lists)
		}
		if _, ok := w.(kvstore.Withdrawer); ok != c.withdraws {
			t.Errorf("the wrapper of %s offers Withdraw: %v, want %v", c.name, ok, c.withdraws)
		}
	}
	res, err := s.Claim(ctx, kvstore.ClaimRequest{Tenant: "acme", Key: d, Holder: "w1", Lease: time.Minute})
	if err != nil || !res.Claimed {
		t.Fatalf("claim: %+v %v", res, err)
	}
	if err := s.(kvstore.Withdrawer).Withdraw(ctx, res.Record, "w1"); err != nil {
		t.Fatalf("Withdraw through the wrapper: %v", err)
	}
	for _, c := range []struct {
		name   string
		labels l
		want   float64
	}{
		{"toolexec_store_errors_total", l{"store": "memory", "operation": "get", "error": "invalid"}, 1},
		{"toolexec_store_errors_total", l{"store": "redis", "operation": "claim", "error": "unavailable"}, 1},
		{"toolexec_store_operation_duration_seconds", l{"store": "memory", "operation": "get"}, 2},
		{"toolexec_store_operation_duration_seconds", l{"store": "memory", "operation": "release"}, 1},
		{"toolexec_store_operation_duration_seconds", l{"store": "memory", "operation": "withdraw"}, 1},
	} {
		if got := value(t, reg, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if n, err := testutil.GatherAndCount(reg, "toolexec_store_errors_total"); err != nil || n != 2 {
		t.Errorf("%d error series (%v), want 2: answers are not errors", n, err)
	}
}

// TestStoreWrapperConforms: the wrapper changes nothing a store does — it
// passes the whole conformance suite, List included.
func TestStoreWrapperConforms(t *testing.T) {
	m, _ := newMetrics(t)
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		s := memstore.New(memstore.Config{Clock: fc, Retention: opts.Retention})
		t.Cleanup(func() { s.Close() })
		return kvstoretest.Harness{Store: m.Store(s, "memory"), Advance: fc.Advance}
	})
}

// TestHandler: /metrics serves the series in the text format.
func TestHandler(t *testing.T) {
	m, reg := newMetrics(t, "book")
	m.CallStarted("book")
	srv := httptest.NewServer(metrics.Handler(reg))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`toolexec_calls_in_flight{tool="book"} 1`,
		`# TYPE toolexec_calls_total counter`,
		`toolexec_calls_total{kind="deduplicated",tool="book"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
	if _, err := metrics.New(reg, metrics.Config{}); err == nil {
		t.Error("registering twice succeeded")
	}
}

// TestGroupCommits: the store's counts are read at each scrape, under the
// store's label, and a second registration of the same store is refused.
func TestGroupCommits(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	b, w, r := int64(0), int64(0), int64(0)
	if err := metrics.GroupCommits(reg, "postgres", func() (int64, int64, int64) { return b, w, r }); err != nil {
		t.Fatal(err)
	}
	b, w, r = 3, 40, 1
	want := `
# HELP toolexec_store_group_commit_writes_total Store writes carried by group commits, by store.
# TYPE toolexec_store_group_commit_writes_total counter
toolexec_store_group_commit_writes_total{store="postgres"} 40
# HELP toolexec_store_group_commits_refused_total Group commits the store refused, whose writes were then made one by one, by store.
# TYPE toolexec_store_group_commits_refused_total counter
toolexec_store_group_commits_refused_total{store="postgres"} 1
# HELP toolexec_store_group_commits_total Transactions (or batches) of two store writes or more, by store.
# TYPE toolexec_store_group_commits_total counter
toolexec_store_group_commits_total{store="postgres"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
	if err := metrics.GroupCommits(reg, "postgres", func() (int64, int64, int64) { return 0, 0, 0 }); err == nil {
		t.Fatal("the same store registered twice")
	}
}
