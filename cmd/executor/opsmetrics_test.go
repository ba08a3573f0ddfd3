package main

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tesserix/toolexec/internal/app/metrics"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
)

// TestOpsMetrics: the executor exports its build, its readiness, the shared
// consumer's backlog, and the keys awaiting decision per tenant, counted
// every --awaiting-interval.
func TestOpsMetrics(t *testing.T) {
	addr := testenv.FreeAddr(t)
	url, _ := startExecutor(t, "--demo", "--metrics-addr", addr, "--awaiting-interval", "100ms")
	sentinelCalls(t, url) // one of them leaves acme's key indeterminate
	want := []string{
		`toolexec_build_info{goversion="go`,
		"toolexec_ready 1",
		"toolexec_consumer_pending_messages 0",
		"toolexec_consumer_ack_pending_messages ",
		`toolexec_keys_awaiting_decision{tenant="acme"} 1`,
		`toolexec_keys_awaiting_decision_oldest_timestamp_seconds{tenant="acme"} `,
		`toolexec_store_operation_duration_seconds_count{operation="count",store="jetstream"} `,
	}
	var body string
	deadline := time.Now().Add(15 * time.Second)
	for {
		var code int
		code, body = httpGet(t, "http://"+addr+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d", code)
		}
		missing := ""
		for _, w := range want {
			if !strings.Contains(body, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s after 15s:\n%s", missing, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Contains(body, "refreshed_timestamp_seconds 0\n") {
		t.Error("the awaiting gauge was refreshed but says it never was")
	}
}

// TestAwaitingOff: --awaiting-interval 0 exports no awaiting gauge.
func TestAwaitingOff(t *testing.T) {
	addr := testenv.FreeAddr(t)
	startExecutor(t, "--demo", "--metrics-addr", addr, "--awaiting-interval", "0")
	_, body := httpGet(t, "http://"+addr+"/metrics")
	if strings.Contains(body, "toolexec_keys_awaiting_decision") || !strings.Contains(body, "toolexec_ready") {
		t.Errorf("with --awaiting-interval 0: awaiting series present or ready absent:\n%s", body)
	}
}

// TestNoMetricsAddrNoCount: without --metrics-addr nothing would serve the
// store's metrics, so none is registered and the store is never counted.
func TestNoMetricsAddrNoCount(t *testing.T) {
	store := &countingStore{Store: memstore.New(memstore.Config{})}
	t.Cleanup(func() { store.Close() })
	reg := prometheus.NewRegistry()
	m, err := metrics.New(reg, metrics.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config{awaitingInterval: time.Millisecond}
	stop, err := startStoreMetrics(cfg, reg, m, nil, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	stop()
	if n := store.counts.Load(); n != 0 {
		t.Errorf("the store was counted %d times with no --metrics-addr", n)
	}
	if n, _ := testutil.GatherAndCount(reg, "toolexec_keys_awaiting_decision_refreshed_timestamp_seconds", "toolexec_consumer_info_errors_total"); n != 0 {
		t.Errorf("%d store series registered with no --metrics-addr", n)
	}

	// With an address, the same store is counted.
	cfg.metricsAddr = "127.0.0.1:0"
	reg = prometheus.NewRegistry()
	m, _ = metrics.New(reg, metrics.Config{})
	stop, err = startStoreMetrics(cfg, reg, m, nil, store, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	wait.Until(10*time.Second, func() bool { return store.counts.Load() != 0 })
	stop()
	if store.counts.Load() == 0 {
		t.Error("with --metrics-addr the store was never counted")
	}
}

// countingStore counts the census calls made on it.
type countingStore struct {
	*memstore.Store
	counts atomic.Int64
}

func (s *countingStore) Count(ctx context.Context, st kvstore.State) (map[string]kvstore.TenantCount, error) {
	s.counts.Add(1)
	return s.Store.Count(ctx, st)
}
