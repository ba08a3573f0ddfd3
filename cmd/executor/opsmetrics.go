package main

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/app/metrics"
	"github.com/tesserix/toolexec/internal/buildinfo"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/tool/mcptool"
	"github.com/tesserix/toolexec/tool/toolsfile"
)

// metricsRegistry is what the executor registers its metrics with and
// /metrics serves.
type metricsRegistry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// newRegistry makes the executor's registry. Tests replace it to learn every
// metric the executor registers (the dashboard and the alert rules may query
// those only).
var newRegistry = func() metricsRegistry { return prometheus.NewRegistry() }

// scrapeTimeout bounds what a scrape of /metrics waits for: the readiness
// check and the consumer's state.
const scrapeTimeout = 2 * time.Second

// registerBuildAndReady registers toolexec_build_info and toolexec_ready (what
// /readyz answers, asked at each scrape).
func registerBuildAndReady(reg prometheus.Registerer, ready *readiness) error {
	if err := metrics.BuildInfo(reg, buildinfo.Get()); err != nil {
		return err
	}
	return metrics.Ready(reg, scrapeTimeout, func(ctx context.Context) bool { return len(ready.problems(ctx)) == 0 })
}

// registerMCPServers registers toolexec_mcp_server_state for the tools
// file's MCP servers (with no series without a tools file).
func registerMCPServers(reg prometheus.Registerer, ts *toolsfile.Toolset) error {
	var states []string
	for _, s := range mcptool.States() {
		states = append(states, string(s))
	}
	return metrics.MCPServers(reg, states, func() []metrics.MCPServerState {
		if ts == nil {
			return nil
		}
		var out []metrics.MCPServerState
		for _, s := range ts.Servers() {
			out = append(out, metrics.MCPServerState{Server: s.Name, State: string(s.Status.State)})
		}
		return out
	})
}

// startStoreMetrics registers the shared consumer's backlog and, unless
// interval is 0 or the store cannot count, the keys awaiting decision,
// refreshed every interval; nothing without --metrics-addr. It returns a function that stops the refreshes.
func startStoreMetrics(cfg config, reg prometheus.Registerer, m *metrics.Metrics, js jetstream.JetStream,
	store kvstore.Store, log *slog.Logger,
) (func(), error) {
	if cfg.metricsAddr == "" {
		return func() {}, nil // nothing would serve them: spend no store reads
	}
	if err := metrics.Consumer(reg, scrapeTimeout, func(ctx context.Context) (metrics.ConsumerStats, error) {
		c, err := js.Consumer(ctx, wire.CallStream, bus.DefaultDurable)
		if err != nil {
			return metrics.ConsumerStats{}, err
		}
		info := c.CachedInfo()
		return metrics.ConsumerStats{
			Pending: info.NumPending, AckPending: uint64(max(info.NumAckPending, 0)), Redelivered: uint64(max(info.NumRedelivered, 0)),
		}, nil
	}); err != nil {
		return nil, err
	}
	if cfg.awaitingInterval == 0 {
		log.Info("keys awaiting decision are not counted (--awaiting-interval 0)")
		return func() {}, nil
	}
	census, ok := store.(kvstore.Census)
	if !ok {
		log.Warn("the store cannot count its records: toolexec_keys_awaiting_decision is not exported", "store", cfg.store.Kind)
		return func() {}, nil
	}
	a, err := m.Awaiting(reg, metrics.AwaitingConfig{
		Census: census, Store: cfg.store.Kind, Interval: cfg.awaitingInterval, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { a.Run(ctx) })
	return func() { cancel(); wg.Wait() }, nil
}
