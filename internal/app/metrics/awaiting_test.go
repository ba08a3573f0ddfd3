package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tesserix/toolexec/internal/app/metrics"
	"github.com/tesserix/toolexec/internal/buildinfo"
	"github.com/tesserix/toolexec/internal/clock"
	"github.com/tesserix/toolexec/internal/testkit/dbproc"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/kvstore/pgstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// park makes n indeterminate records of tenant in s and returns their digests.
func park(t *testing.T, s kvstore.Store, tenant string, n int) []string {
	t.Helper()
	var out []string
	for i := range n {
		d := fmt.Sprintf("%064x", time.Now().UnixNano()+int64(i))
		res, err := s.Claim(context.Background(), kvstore.ClaimRequest{Tenant: tenant, Key: d, Holder: "w1", Lease: time.Minute})
		if err != nil || !res.Claimed {
			t.Fatalf("claim: %+v %v", res, err)
		}
		if err := s.MarkIndeterminate(context.Background(), res.Lease, "body_failed", true); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// executorMetrics is one executor's registry with the awaiting gauge over s.
func executorMetrics(t *testing.T, s kvstore.Store, cfg metrics.AwaitingConfig) (*metrics.Awaiting, *prometheus.Registry) {
	t.Helper()
	m, reg := newMetrics(t)
	census, ok := s.(kvstore.Census)
	if !ok {
		t.Fatalf("%T does not count", s)
	}
	cfg.Census = census
	a, err := m.Awaiting(reg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return a, reg
}

func refresh(t *testing.T, a *metrics.Awaiting) {
	t.Helper()
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh: %v", err)
	}
}

// TestAwaitingOnEveryStore: on each real store, two executors' gauges count
// the same keys per tenant (so max over executors is the store's number);
// a resolution shows after the next refresh, and the oldest key's time is
// when it became indeterminate.
func TestAwaitingOnEveryStore(t *testing.T) {
	stores := map[string]func(t *testing.T) kvstore.Store{
		"jetstream": func(t *testing.T) kvstore.Store {
			nc := natstest.Connect(t, natstest.Start(t))
			js, err := jetstream.New(nc)
			if err != nil {
				t.Fatal(err)
			}
			s, err := natsstore.New(context.Background(), js, natsstore.Config{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		},
		"postgres": func(t *testing.T) kvstore.Store {
			s, _ := dbproc.PostgresStore(t, testenv.PostgresURL(t), pgstore.Config{})
			return s
		},
		"redis": func(t *testing.T) kvstore.Store {
			s, _ := dbproc.RedisStore(t, testenv.RedisURL(t), redisstore.Config{})
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			s := open(t)
			// Tenants of this test's own: Redis and PostgreSQL are shared.
			acme, globex := "acme_"+strings.ToLower(name), "globex_"+strings.ToLower(name)
			before := time.Now().Add(-time.Second)
			acmeKeys := park(t, s, acme, 2)
			park(t, s, globex, 1)
			a1, reg1 := executorMetrics(t, s, metrics.AwaitingConfig{Store: name})
			a2, reg2 := executorMetrics(t, s, metrics.AwaitingConfig{Store: name})
			refresh(t, a1)
			refresh(t, a2)
			for _, reg := range []*prometheus.Registry{reg1, reg2} {
				if got := value(t, reg, "toolexec_keys_awaiting_decision", l{"tenant": acme}); got != 2 {
					t.Errorf("acme: %v keys awaiting, want 2", got)
				}
				if got := value(t, reg, "toolexec_keys_awaiting_decision", l{"tenant": globex}); got != 1 {
					t.Errorf("globex: %v keys awaiting, want 1", got)
				}
				oldest := value(t, reg, "toolexec_keys_awaiting_decision_oldest_timestamp_seconds", l{"tenant": acme})
				if oldest < float64(before.Unix()) || oldest > float64(time.Now().Unix()+1) {
					t.Errorf("acme's oldest key: %v, want between %v and now", oldest, before.Unix())
				}
				if got := value(t, reg, "toolexec_store_operation_duration_seconds", l{"store": name, "operation": "count"}); got != 1 {
					t.Errorf("%v counts timed, want 1", got)
				}
			}
			// An operator resolves one of acme's keys; the executor that
			// refreshes sees it at once, the other at its next refresh.
			if _, err := s.Resolve(context.Background(), acme, acmeKeys[0], kvstore.Resolution{Outcome: "PNR"}); err != nil {
				t.Fatal(err)
			}
			refresh(t, a1)
			if got := value(t, reg1, "toolexec_keys_awaiting_decision", l{"tenant": acme}); got != 1 {
				t.Errorf("after a resolution: %v keys awaiting, want 1", got)
			}
			if got := value(t, reg2, "toolexec_keys_awaiting_decision", l{"tenant": acme}); got != 2 {
				t.Errorf("before its refresh, the other executor says %v, want still 2", got)
			}
			if _, err := s.Resolve(context.Background(), globex, mustOnly(t, s, globex), kvstore.Resolution{Release: true}); err != nil {
				t.Fatal(err)
			}
			refresh(t, a2)
			if got := value(t, reg2, "toolexec_keys_awaiting_decision", l{"tenant": globex}); got != -1 {
				t.Errorf("a tenant with no key waiting has a series (%v), want none", got)
			}
		})
	}
}

// mustOnly returns the digest of the tenant's one indeterminate record.
func mustOnly(t *testing.T, s kvstore.Store, tenant string) string {
	t.Helper()
	recs, err := s.(kvstore.Lister).List(context.Background(), tenant, kvstore.StateIndeterminate, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("List: %d records, %v", len(recs), err)
	}
	return recs[0].Key
}

// TestAwaitingBoundsTenants: past MaxTenants, the tenants with the fewest
// keys are summed under "(other)", with the oldest of their keys.
func TestAwaitingBoundsTenants(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Config{Clock: fc})
	t.Cleanup(func() { s.Close() })
	park(t, s, "small1", 1) // the oldest key of all, in a small tenant
	fc.Advance(time.Minute)
	park(t, s, "big", 3)
	park(t, s, "mid", 2)
	park(t, s, "small2", 1)
	a, reg := executorMetrics(t, s, metrics.AwaitingConfig{Store: "memory", MaxTenants: 2})
	refresh(t, a)
	for tenant, want := range map[string]float64{"big": 3, "mid": 2, "(other)": 2, "small1": -1, "small2": -1} {
		if got := value(t, reg, "toolexec_keys_awaiting_decision", l{"tenant": tenant}); got != want {
			t.Errorf("tenant %s: %v, want %v", tenant, got, want)
		}
	}
	want := float64(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC).Unix())
	if got := value(t, reg, "toolexec_keys_awaiting_decision_oldest_timestamp_seconds", l{"tenant": "(other)"}); got != want {
		t.Errorf("(other)'s oldest: %v, want %v (small1's key)", got, want)
	}
}

// failingCensus fails when told to.
type failingCensus struct {
	kvstore.Census
	fail bool
}

func (c *failingCensus) Count(ctx context.Context, st kvstore.State) (map[string]kvstore.TenantCount, error) {
	if c.fail {
		return nil, errors.Join(kvstore.ErrUnavailable, errors.New("connection refused"))
	}
	return c.Census.Count(ctx, st)
}

// TestAwaitingKeepsLastCountOnFailure: a failed refresh keeps the last
// numbers, does not move the refreshed timestamp, and is counted as a store
// error; Run refreshes at once and then every interval.
func TestAwaitingKeepsLastCountOnFailure(t *testing.T) {
	s := memstore.New(memstore.Config{})
	t.Cleanup(func() { s.Close() })
	park(t, s, "acme", 1)
	fc := &failingCensus{Census: s}
	m, reg := newMetrics(t)
	a, err := m.Awaiting(reg, metrics.AwaitingConfig{Census: fc, Store: "memory", Interval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "toolexec_keys_awaiting_decision_refreshed_timestamp_seconds", l{}); got != 0 {
		t.Fatalf("refreshed before any refresh: %v, want 0", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	wait.Eventually(t, 10*time.Second, "Run to refresh", func() bool {
		return value(t, reg, "toolexec_keys_awaiting_decision", l{"tenant": "acme"}) == 1
	})
	cancel()
	<-done
	at := value(t, reg, "toolexec_keys_awaiting_decision_refreshed_timestamp_seconds", l{})
	if at <= 0 {
		t.Fatalf("refreshed timestamp %v after a refresh", at)
	}
	park(t, s, "acme", 1)
	fc.fail = true
	if err := a.Refresh(context.Background()); !errors.Is(err, kvstore.ErrUnavailable) {
		t.Fatalf("Refresh with the store away: %v", err)
	}
	if got := value(t, reg, "toolexec_keys_awaiting_decision", l{"tenant": "acme"}); got != 1 {
		t.Errorf("after a failed refresh: %v, want the last count, 1", got)
	}
	if got := value(t, reg, "toolexec_keys_awaiting_decision_refreshed_timestamp_seconds", l{}); got != at {
		t.Errorf("a failed refresh moved the refreshed timestamp: %v, was %v", got, at)
	}
	if got := value(t, reg, "toolexec_store_errors_total", l{"store": "memory", "operation": "count", "error": "unavailable"}); got != 1 {
		t.Errorf("%v count errors, want 1", got)
	}
	fc.fail = false
	refresh(t, a)
	if got := value(t, reg, "toolexec_keys_awaiting_decision", l{"tenant": "acme"}); got != 2 {
		t.Errorf("after recovering: %v, want 2", got)
	}
	if _, err := m.Awaiting(prometheus.NewRegistry(), metrics.AwaitingConfig{}); err == nil {
		t.Error("Awaiting without a census: no error")
	}
}

// TestBuildInfoReadyConsumer: build_info names the build, ready follows its
// function, and the consumer's backlog is read at each scrape (a failed read
// omits the gauges and counts an error).
func TestBuildInfoReadyConsumer(t *testing.T) {
	_, reg := newMetrics(t)
	info := buildinfo.Info{Version: "v1.2.3", Revision: "abc123", Modified: true, GoVersion: "go1.26.8"}
	if err := metrics.BuildInfo(reg, info); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "toolexec_build_info", l{"version": "v1.2.3", "revision": "abc123-modified", "goversion": "go1.26.8"}); got != 1 {
		t.Errorf("build_info = %v, want 1 with the build's labels", got)
	}
	ready := true
	if err := metrics.Ready(reg, time.Second, func(ctx context.Context) bool {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("ready asked without a deadline")
		}
		return ready
	}); err != nil {
		t.Fatal(err)
	}
	if got := value(t, reg, "toolexec_ready", l{}); got != 1 {
		t.Errorf("ready = %v, want 1", got)
	}
	ready = false
	if got := value(t, reg, "toolexec_ready", l{}); got != 0 {
		t.Errorf("ready = %v, want 0", got)
	}
	var fail bool
	if err := metrics.Consumer(reg, time.Second, func(context.Context) (metrics.ConsumerStats, error) {
		if fail {
			return metrics.ConsumerStats{}, errors.New("timeout")
		}
		return metrics.ConsumerStats{Pending: 7, AckPending: 3, Redelivered: 1}, nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		"toolexec_consumer_pending_messages": 7, "toolexec_consumer_ack_pending_messages": 3,
		"toolexec_consumer_redelivered_messages": 1, "toolexec_consumer_info_errors_total": 0,
	} {
		if got := value(t, reg, name, l{}); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	fail = true
	if got := value(t, reg, "toolexec_consumer_pending_messages", l{}); got != -1 {
		t.Errorf("pending after a failed read = %v, want no series", got)
	}
	// Each scrape asks again: the one above and this one failed.
	if got := value(t, reg, "toolexec_consumer_info_errors_total", l{}); got != 2 {
		t.Errorf("consumer errors = %v, want 2", got)
	}
}

// slowCensus takes its time, as a large JetStream bucket does.
type slowCensus struct {
	kvstore.Census
	took time.Duration
}

func (c slowCensus) Count(ctx context.Context, st kvstore.State) (map[string]kvstore.TenantCount, error) {
	select {
	case <-time.After(c.took):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return c.Census.Count(ctx, st)
}

// TestAwaitingSlowCountNotCutOff: a count that takes longer than the
// interval still completes (it is cut off at the timeout, not the interval:
// a store too large to count within the interval was never counted before).
func TestAwaitingSlowCountNotCutOff(t *testing.T) {
	s := memstore.New(memstore.Config{})
	t.Cleanup(func() { s.Close() })
	park(t, s, "acme", 1)
	m, reg := newMetrics(t)
	a, err := m.Awaiting(reg, metrics.AwaitingConfig{
		Census: slowCensus{Census: s, took: 100 * time.Millisecond}, Store: "memory", Interval: 10 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Refresh(context.Background()); err != nil {
		t.Fatalf("Refresh of a count ten times the interval: %v", err)
	}
	if got := value(t, reg, "toolexec_keys_awaiting_decision", l{"tenant": "acme"}); got != 1 {
		t.Errorf("%v keys awaiting, want 1", got)
	}
	b, err := m.Awaiting(prometheus.NewRegistry(), metrics.AwaitingConfig{
		Census: slowCensus{Census: s, took: time.Minute}, Store: "memory", Timeout: 20 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Refresh(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Refresh past the timeout: %v, want the deadline exceeded", err)
	}
}
