package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/embedded"
	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/internal/app/metrics"
	"github.com/tesserix/toolexec/internal/app/storeflags"
	"github.com/tesserix/toolexec/internal/app/tracing"
	"github.com/tesserix/toolexec/kvstore/pgstore"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
	"github.com/tesserix/toolexec/tool/toolsfile"
	"github.com/tesserix/toolexec/tool/workerset"
)

// run starts everything cfg describes and serves until ctx ends, then drains.
// It prints one "ready" line on out once calls are being taken, and logs to
// logOut.
func run(ctx context.Context, cfg config, out, logOut io.Writer) error {
	log, err := newLogger(cfg, logOut)
	if err != nil {
		return usageError{err}
	}

	var closers []func()
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}()
	// The tools' MCP servers are stopped last: after the executor has drained
	// the calls that use them.
	tools, natsTools, servers, closeTools, err := loadTools(ctx, cfg, log)
	if err != nil {
		return usageError{err}
	}
	closers = append(closers, closeTools)

	traces, err := tracing.Setup(ctx, tracing.Config{})
	if err != nil {
		return usageError{err}
	}
	if traces.Enabled() {
		log.Info("tracing on", "exporter", traces.Exporter())
		closers = append(closers, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := traces.Shutdown(sctx); err != nil {
				log.Warn("sending the last spans failed", "error", err)
			}
		})
	}
	reg := newRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	names := tools.Names()
	for _, p := range natsTools {
		names = append(names, p.Spec.Name)
	}
	m, err := metrics.New(reg, metrics.Config{Tools: names})
	if err != nil {
		return err
	}

	// The ops endpoint comes first, so that /readyz can say what the executor
	// waits for.
	ready := &readiness{}
	if servers != nil {
		ready.servers = servers.Servers
	}
	if err := registerBuildAndReady(reg, ready); err != nil {
		return err
	}
	if err := registerMCPServers(reg, servers); err != nil {
		return err
	}
	if cfg.metricsAddr != "" {
		stop, err := serveHTTP("--metrics-addr", cfg.metricsAddr, opsHandler(ready, reg), log)
		if err != nil {
			return err
		}
		closers = append(closers, stop)
	}

	nc, natsURL, stopServer, err := connectNATS(ctx, cfg, ready, log, logOut)
	if errors.Is(err, errStopped) {
		log.Info("stopped before NATS could be reached")
		return nil
	}
	if err != nil {
		return err
	}
	ready.connected(nc)
	closers = append(closers, stopServer, nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The store is opened here, whichever it is, rather than left to
	// NewExecutor's default, so that its operations are measured.
	rawStore, closeStore, err := cfg.store.Open(setupCtx, js, cfg.replicas, log)
	var ue *storeflags.UsageError
	if errors.As(err, &ue) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	closers = append(closers, closeStore)
	store := m.Store(rawStore, cfg.store.Kind)
	if pg, ok := rawStore.(*pgstore.Store); ok {
		if err := metrics.GroupCommits(reg, cfg.store.Kind, func() (int64, int64, int64) {
			st := pg.BatchStats()
			return st.Batches, st.Writes, st.Retried
		}); err != nil {
			return err
		}
	}

	ecfg := toolexec.ExecutorConfig{
		Tools: tools.Tools(), NATSTools: natsTools, Store: store, Replicas: cfg.replicas, EventMaxAge: cfg.eventMaxAge,
		Concurrency: cfg.concurrency, Lease: cfg.lease, AckWait: cfg.ackWait, MaxDeliver: cfg.maxDeliver,
		MaxOutcomeBytes: cfg.maxOutcome, Limits: cfg.limits, MaxInFlightMemory: int64(cfg.inflightMiB) << 20,
		BinaryAnswers: cfg.binaryAnswers, DrainTimeout: cfg.drain,
		AdminAccount: cfg.adminAccount, Logger: log, Observer: m,
	}
	if traces.Enabled() {
		ecfg.TracerProvider = traces // without one the dispatcher spends nothing on spans
	}
	if cfg.workers.on {
		ecfg.Workers = &workerset.Config{Interval: cfg.workers.interval, Window: cfg.workers.window}
	}
	ex, err := toolexec.NewExecutor(setupCtx, nc, ecfg)
	if err != nil {
		return err
	}
	closers = append(closers, ex.Close)
	if servers != nil {
		servers.Attach(ex.Registry())
	}
	stopStoreMetrics, err := startStoreMetrics(cfg, reg, m, js, rawStore, log)
	if err != nil {
		return err
	}
	closers = append(closers, stopStoreMetrics)
	ready.running(store, ex)
	if cfg.console.addr != "" {
		stop, err := startConsole(cfg.console, js, ex.Admin(), log)
		if err != nil {
			return err
		}
		closers = append(closers, stop)
	}
	if cfg.mcp.addr != "" {
		stop, err := startMCP(cfg.mcp, nc, log)
		if err != nil {
			return err
		}
		closers = append(closers, stop)
	}

	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	names = ex.Tools()
	log.Info("executor ready", "nats", redactNATSURL(natsURL), "store", cfg.store.Kind, "tools", strings.Join(names, ","),
		"holder", ex.Holder(), "concurrency", cfg.concurrency)
	fmt.Fprintf(out, "toolexec executor ready: nats=%s store=%s tools=%s\n", redactNATSURL(natsURL), cfg.store.Kind, strings.Join(names, ","))
	if err := <-done; err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	log.Info("stopped")
	return nil
}

// loadTools returns the demo's tools and the tools file's, the file's tools
// whose bodies workers serve (built once connected), the file's toolset (nil
// without a file: its MCP servers' states, to attach to the executor's
// registry), and a function that stops the MCP servers the file's tools call.
func loadTools(ctx context.Context, cfg config, log *slog.Logger) (*tool.Registry, []natstool.Pending, *toolsfile.Toolset, func(), error) {
	var all []*tool.Tool
	var natsTools []natstool.Pending
	var ts *toolsfile.Toolset
	if cfg.demo {
		all = append(all, demo.New().Tools()...)
	}
	closeTools := func() {}
	if cfg.toolsFile != "" {
		var err error
		ts, err = toolsfile.Load(ctx, cfg.toolsFile, toolsfile.Options{Logger: log.With("component", "mcp")})
		if err != nil {
			return nil, nil, nil, nil, err
		}
		closeTools = func() { ts.Close() }
		all = append(all, ts.Tools()...)
		natsTools = ts.NATSTools()
	}
	reg, err := tool.NewRegistry(all...)
	if err == nil {
		for _, p := range natsTools {
			if _, dup := reg.Lookup(p.Spec.Name); dup {
				err = fmt.Errorf("%w: %q (a demo tool and a tool of %s)", tool.ErrDuplicateTool, p.Spec.Name, cfg.toolsFile)
			}
		}
	}
	if err == nil && len(reg.Names()) == 0 && len(natsTools) == 0 && !cfg.workers.on {
		// Only imports of servers not reached yet: NewExecutor would refuse
		// an executor with no tools, without saying why.
		err = fmt.Errorf("%s: every tool is imported from an MCP server that cannot be reached yet: "+
			"start it first, name its tools in the tools list, or give --workers to start with no tools", cfg.toolsFile)
	}
	if err != nil {
		closeTools()
		return nil, nil, nil, nil, err
	}
	return reg, natsTools, ts, closeTools, nil
}

// connectNATS connects to the configured server, waiting for it while it
// cannot be reached (see waitForNATS), or starts the embedded one and connects
// to it. It returns the connection, the URL for clients, and a function that
// stops the embedded server (a no-op otherwise).
func connectNATS(
	ctx context.Context, cfg config, ready *readiness, log *slog.Logger, logOut io.Writer,
) (*nats.Conn, string, func(), error) {
	cc := cfg.conn.ConnectConfig()
	cc.Name, cc.Logger = "toolexec-executor", log
	if !cfg.embedded() {
		nc, err := waitForNATS(ctx, cfg, cc, ready, log)
		if err != nil {
			return nil, "", nil, err
		}
		return nc, cfg.conn.Server, func() {}, nil
	}
	if err := os.MkdirAll(cfg.natsStoreDir(), 0o750); err != nil {
		return nil, "", nil, fmt.Errorf("embedded NATS: data directory: %w", err)
	}
	s, err := embedded.Start(embedded.Config{
		Host: cfg.natsHost, Port: cfg.natsPort, StoreDir: cfg.natsStoreDir(),
		SyncInterval: cfg.syncInterval, Logger: serverLogger(cfg, log, logOut),
	})
	if err != nil {
		return nil, "", nil, err
	}
	url := s.ClientURL()
	cc.URL = url
	nc, err := bus.Connect(cc)
	if err != nil {
		s.Shutdown()
		return nil, "", nil, fmt.Errorf("connecting to the embedded NATS server: %w", err)
	}
	sync := "always (fsync before every ack)"
	if cfg.syncInterval > 0 {
		sync = cfg.syncInterval.String()
	}
	log.Info("embedded NATS server started", "url", url, "store_dir", cfg.natsStoreDir(), "sync_interval", sync)
	return nc, url, func() { s.Shutdown(); s.WaitForShutdown() }, nil
}

// opsHandler serves /metrics (what g gathers), /healthz (the process is up)
// and /readyz (the executor runs, NATS is connected and the store answers; 503
// naming what is not, otherwise). After its verdict /readyz lists the state
// of each MCP server of the tools file and the tools not run because their
// declarations conflict, one line each: neither makes the executor unready,
// since it serves every other tool, and every executor of the fleet reaches
// the same servers and sees the same workers (taking one out of a load
// balancer would not bring a server back).
func opsHandler(ready *readiness, g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(g))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		notes := ""
		for _, n := range ready.notes() {
			notes += n + "\n"
		}
		if problems := ready.problems(r.Context()); len(problems) > 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, strings.Join(problems, "\n")+"\n"+notes)
			return
		}
		_, _ = io.WriteString(w, "ready\n"+notes)
	})
	return mux
}

// serveHTTP serves h on addr (named by flag in errors) until the returned
// function stops it.
func serveHTTP(flag, addr string, h http.Handler, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "flag", flag, "error", err)
		}
	}()
	log.Info("serving "+strings.TrimPrefix(flag, "--"), "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
