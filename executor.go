package toolexec

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/trace"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/internal/retry"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
	"github.com/tesserix/toolexec/tool/workerset"
)

// DefaultDrainTimeout is how long Executor.Run lets the calls in flight finish
// once its context ends, unless ExecutorConfig.DrainTimeout says otherwise.
const DefaultDrainTimeout = 30 * time.Second

// ExecutorConfig configures an Executor. It needs tools: Tools, NATSTools,
// or Workers to learn them from; every other field has the default
// cmd/executor uses.
type ExecutorConfig struct {
	// Tools are the tools this executor runs. Every executor sharing the NATS
	// streams must serve the same tools: any of them may take any call.
	Tools []*tool.Tool
	// NATSTools are tools whose bodies workers serve over NATS, declared by
	// the executor itself (a tools file's nats: tools,
	// toolsfile.Toolset.NATSTools): they are built on the executor's
	// connection and served like Tools (docs/PROTOCOL.md §12).
	NATSTools []natstool.Pending
	// Workers, when set, has the executor learn the tools of the workers
	// serving bodies over NATS (package workerset): it asks them once before
	// it takes calls, then every Workers.Interval, serves and lists what they
	// declare alike, and rejects (tool_conflict) a tool whose declarations
	// disagree, NATSTools' included. Its Served is set from NATSTools; its
	// Logger defaults to Logger, its Observer to Observer when that
	// implements workerset.Observer. Nil: no worker's tool is learned
	// (NATSTools are served all the same, unchecked).
	Workers *workerset.Config

	// Store keeps the idempotency records. Default: the JetStream KV bucket
	// toolexec_idempotency on the executor's own connection (natsstore), with
	// Replicas and Retention; Close closes it. A store given here is the
	// caller's to close.
	Store kvstore.Store
	// Retention is how long the default store keeps a record after its last
	// write; default 24h (natsstore.DefaultRetention). Ignored with Store set.
	Retention time.Duration
	// Replicas is how many servers keep the streams and the default store
	// (1..5); default 1. Use 3 on a cluster.
	Replicas int
	// EventMaxAge is how long the events stream keeps answers, so that callers
	// can Attach to them; default 24h (bus.DefaultEventMaxAge).
	EventMaxAge time.Duration

	// Concurrency bounds the calls this executor runs at once; default 64
	// (bus.DefaultConcurrency).
	Concurrency int
	// Lease is how long a claim lasts unless renewed while its tool runs;
	// default 15s (dispatch.DefaultLease).
	Lease time.Duration
	// AckWait is how long JetStream waits for a call's acknowledgement before it
	// redelivers it, and MaxDeliver how often it delivers one call at most; see
	// bus.WorkerConfig for the defaults.
	AckWait    time.Duration
	MaxDeliver int
	// MaxOutcomeBytes bounds the outcome a tool may return; default an eighth of
	// the NATS server's maximum payload (JSON escaping can make an outcome six
	// times longer in its answer).
	MaxOutcomeBytes int
	// Limits bound what a call's arguments may expand to (members of an object,
	// elements of an array, values in all); calls over one are rejected
	// too_many_values. Zero fields take idemkey's defaults.
	Limits idemkey.Limits
	// MaxInFlightMemory bounds the memory the calls in flight take together,
	// each weighed by its size (bus.CallMemory); default 128 MiB
	// (bus.DefaultMaxInFlightMemory).
	MaxInFlightMemory int64
	// Relay bounds what a call's body may ask of its caller and report while
	// it runs (an upstream MCP server's elicitation, sampling, progress and
	// log messages; docs/PROTOCOL.md §13). Zero fields take bus's defaults.
	Relay bus.RelayLimits
	// BinaryAnswers publishes answers in CloudEvents binary mode instead of
	// structured mode.
	BinaryAnswers bool
	// Holder names this executor in the claims it makes; default
	// "<hostname>-<pid>-<random>".
	Holder string
	// DrainTimeout is how long Run lets calls in flight finish once its context
	// ends before it stops them hard (they are then redelivered and answered
	// from their records); default DefaultDrainTimeout.
	DrainTimeout time.Duration
	// DisableAdmin leaves the admin subjects (forget, inspect, list, resolve)
	// unserved by this executor. By default every executor serves them. The
	// operators' history, toolexec.admin.history, is the history service's and
	// is served either way.
	DisableAdmin bool
	// AdminAccount, when set, is the one NATS account whose admin requests this
	// executor serves (admin.Config.Account), the operators' history on
	// toolexec.admin.history included (bus.HistoryConfig.AdminAccount): ADMIN
	// with deploy/accounts.conf. Default: every request that reaches the admin
	// subjects, as on a server with one account.
	AdminAccount string

	// Logger receives one line per notable event, never arguments; default
	// slog.Default().
	Logger *slog.Logger
	// TracerProvider makes a span per call and its steps; default none.
	TracerProvider trace.TracerProvider
	// Observer is told what the executor does, for metrics; default none.
	Observer Observer
}

// Observer hears what an executor does with its calls and messages, for metrics.
type Observer interface {
	dispatch.Observer
	bus.WorkerObserver
}

// Executor runs the calls published for its tools: it takes them from the
// calls stream through the consumer all executors share, claims each call's
// key in its store, runs the tool and publishes the answer. It also answers
// the admin requests (unless DisableAdmin), the history requests
// (bus.HistoryService): the tenants' on toolexec.history.<tenant>, and the
// operators' on toolexec.admin.history, through which a client without
// JetStream access attaches to answers and watches events, and the catalog
// requests on toolexec.tools.<tenant> (bus.CatalogService), which tell an MCP
// gateway in any process what tools there are. With ExecutorConfig.Workers it
// learns the tools of the workers that serve bodies over NATS as they come
// and go (docs/PROTOCOL.md §12).
// Start as many as you like, in as many processes.
type Executor struct {
	log        *slog.Logger
	store      kvstore.Store
	ownStore   bool
	dispatcher *dispatch.Dispatcher
	worker     *bus.Worker
	// legacy takes the calls of the calls stream of wire version 1 while it
	// exists (bus.HasLegacyCallStream); nil where there is none.
	legacy  *bus.Worker
	admin   *admin.Service
	history *bus.HistoryService
	catalog *bus.CatalogService
	drain   time.Duration
	tools   *tool.Registry
	// stopWorkers stops learning the workers' tools; nil without Workers.
	stopWorkers func()
}

// NewExecutor creates or updates the streams (and the default store's bucket)
// on nc, starts serving the admin and history subjects, learns the workers'
// tools (with Workers), and returns an executor ready to Run. It returns an
// error matching ErrInvalidOption for a nil connection or no tools (and no
// Workers to learn them from), and the error of any step that fails (a tool
// declared twice, a NATS tool that cannot be built, JetStream not enabled,
// the store not reachable).
func NewExecutor(ctx context.Context, nc *nats.Conn, cfg ExecutorConfig) (*Executor, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: a NATS connection is required", ErrInvalidOption)
	}
	if len(cfg.Tools) == 0 && len(cfg.NATSTools) == 0 && cfg.Workers == nil {
		return nil, fmt.Errorf("%w: no tools", ErrInvalidOption)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	onExtra := extraReplies(log, cfg.Observer)
	all := slices.Clone(cfg.Tools)
	served := map[string]string{}
	for _, p := range cfg.NATSTools {
		p.Endpoint.OnExtraReply = onExtra
		t, err := p.Build(nc)
		if err != nil {
			return nil, fmt.Errorf("toolexec: %w", err)
		}
		all = append(all, t)
		served[t.Name()] = p.Subject()
	}
	tools, err := tool.NewRegistry(all...)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("toolexec: %w", err)
	}
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{Replicas: cfg.Replicas, EventMaxAge: cfg.EventMaxAge}); err != nil {
		return nil, fmt.Errorf("toolexec: creating the streams: %w", err)
	}
	e := &Executor{log: log, store: cfg.Store, drain: cfg.DrainTimeout, tools: tools}
	if e.drain <= 0 {
		e.drain = DefaultDrainTimeout
	}
	if e.store == nil {
		var s *natsstore.Store
		err := retry.Setup(ctx, retry.SetupAttempt, func(ctx context.Context) (err error) {
			s, err = natsstore.New(ctx, js, natsstore.Config{Replicas: cfg.Replicas, Retention: cfg.Retention})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("toolexec: the idempotency store: %w", err)
		}
		e.store, e.ownStore = s, true
	}
	ok := false
	defer func() {
		if !ok {
			e.Close()
		}
	}()

	maxOutcome := cfg.MaxOutcomeBytes
	if maxOutcome <= 0 {
		maxOutcome = int(nc.MaxPayload() / 8)
	}
	dcfg := dispatch.Config{
		Tools: tools, Store: e.store, Holder: cfg.Holder, Lease: cfg.Lease,
		MaxOutcomeBytes: maxOutcome, Limits: cfg.Limits, Logger: log, TracerProvider: cfg.TracerProvider,
	}
	wcfg := bus.WorkerConfig{
		Concurrency: cfg.Concurrency, AckWait: cfg.AckWait, MaxDeliver: cfg.MaxDeliver,
		MaxInFlightMemory: cfg.MaxInFlightMemory, MaxValues: cfg.Limits.Values,
		BinaryAnswers: cfg.BinaryAnswers, Relay: cfg.Relay, Logger: log,
	}
	if cfg.Observer != nil {
		dcfg.Observer, wcfg.Observer = cfg.Observer, cfg.Observer
	}
	if e.dispatcher, err = dispatch.New(dcfg); err != nil {
		return nil, err
	}
	wcfg.Source = "/toolexec/executor/" + e.dispatcher.Holder()
	if e.worker, err = bus.NewWorker(js, e.dispatcher, wcfg); err != nil {
		return nil, err
	}
	legacy, err := bus.HasLegacyCallStream(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("toolexec: %w", err)
	}
	if legacy {
		// Callers of wire version 1 may still publish there; their calls are
		// taken, with a share of the concurrency, until an operator deletes the
		// stream (docs/PROTOCOL.md §11).
		lcfg := wcfg
		lcfg.Stream, lcfg.StopWhenStreamGone = wire.LegacyCallStream, true
		conc := wcfg.Concurrency
		if conc <= 0 {
			conc = bus.DefaultConcurrency
		}
		lcfg.Concurrency = max(1, conc/4)
		if e.legacy, err = bus.NewWorker(js, e.dispatcher, lcfg); err != nil {
			return nil, err
		}
		log.Warn("the calls stream of wire version 1 exists: its calls are taken too, until it is deleted",
			"stream", wire.LegacyCallStream)
	}
	if !cfg.DisableAdmin {
		if e.admin, err = admin.Serve(js, e.store, admin.Config{Logger: log, Account: cfg.AdminAccount}); err != nil {
			return nil, fmt.Errorf("toolexec: serving the admin subjects: %w", err)
		}
	}
	if e.history, err = bus.ServeHistory(js, bus.HistoryConfig{Logger: log, AdminAccount: cfg.AdminAccount}); err != nil {
		return nil, fmt.Errorf("toolexec: serving the history subjects: %w", err)
	}
	if e.catalog, err = bus.ServeCatalog(nc, tools, bus.CatalogConfig{Logger: log}); err != nil {
		return nil, fmt.Errorf("toolexec: serving the tool catalog: %w", err)
	}
	if cfg.Workers != nil {
		wcfg := *cfg.Workers
		if wcfg.OnExtraReply == nil {
			wcfg.OnExtraReply = onExtra
		}
		if err := e.learnWorkers(ctx, nc, wcfg, served, cfg.Observer); err != nil {
			return nil, err
		}
	}
	ok = true
	return e, nil
}

// learnWorkers asks the workers for their tools once, and keeps asking until
// Close.
func (e *Executor) learnWorkers(ctx context.Context, nc *nats.Conn, wcfg workerset.Config, served map[string]string, obs Observer) error {
	wcfg.Served = served
	if wcfg.Logger == nil {
		wcfg.Logger = e.log
	}
	if o, ok := obs.(workerset.Observer); ok && wcfg.Observer == nil {
		wcfg.Observer = o
	}
	set, err := workerset.New(nc, e.tools, wcfg)
	if err != nil {
		return fmt.Errorf("toolexec: learning the workers' tools: %w", err)
	}
	if err := set.Refresh(ctx); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("toolexec: asking the workers for their tools: %w", err)
		}
		e.log.Warn("asking the workers for their tools failed; asking again later", "error", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		set.Run(runCtx)
	}()
	e.stopWorkers = func() { cancel(); <-done }
	return nil
}

// Tools returns the names of the tools the executor serves now, sorted: its
// own, and those learned from workers, but those in conflict.
func (e *Executor) Tools() []string { return e.tools.Names() }

// Conflicts returns the tools not run because their declarations conflict,
// and what conflicts, sorted by name (see package workerset).
func (e *Executor) Conflicts() []*tool.ConflictError { return e.tools.Conflicts() }

// Registry returns the registry the executor serves its tools from: a tool
// put in it, removed from it, or marked in conflict or unavailable there is
// dispatched, listed by the catalog and rejected accordingly from the next
// call and catalog request on (toolsfile.Toolset.Attach keeps the marks of
// the tools of MCP servers in it).
func (e *Executor) Registry() *tool.Registry { return e.tools }

// Holder returns the name this executor claims keys under.
func (e *Executor) Holder() string { return e.dispatcher.Holder() }

// Store returns the executor's idempotency store.
func (e *Executor) Store() kvstore.Store { return e.store }

// Admin returns the admin service this executor serves, nil with
// DisableAdmin; the console resolves keys through it.
func (e *Executor) Admin() *admin.Service { return e.admin }

// Run takes and answers calls until ctx ends, then stops taking calls and lets
// those in flight finish for up to the drain timeout; calls still running then
// are stopped and left to be redelivered, where their records answer them. It
// returns nil after a stop, or the error that ended it early (the shared
// consumer could not be created, the connection was closed). An executor runs
// once.
func (e *Executor) Run(ctx context.Context) error {
	// The workers are stopped hard only when the drain deadline passes.
	runCtx, hardStop := context.WithCancel(context.WithoutCancel(ctx))
	defer hardStop()
	done := make(chan error, 1)
	go func() { done <- e.worker.Run(runCtx) }()
	var legacyDone chan error // nil when there is no worker of the old calls stream, or it has ended
	if e.legacy != nil {
		legacyDone = make(chan error, 1)
		go func() { legacyDone <- e.legacy.Run(runCtx) }()
	}
wait:
	for {
		select {
		case err := <-done:
			hardStop()
			if legacyDone != nil {
				<-legacyDone
			}
			return err
		case err := <-legacyDone:
			legacyDone = nil
			if err != nil {
				hardStop()
				<-done
				return err
			}
			// Its stream was deleted: the calls stream of wire version 1 is gone.
		case <-ctx.Done():
			break wait
		}
	}
	e.log.Info("shutting down: finishing calls in flight", "drain_timeout", e.drain)
	drainCtx, cancel := context.WithTimeout(context.Background(), e.drain)
	defer cancel()
	var drainErr error
	if legacyDone != nil {
		drainErr = e.legacy.Shutdown(drainCtx)
	}
	if err := e.worker.Shutdown(drainCtx); err != nil {
		drainErr = err
	}
	switch {
	case errors.Is(drainErr, context.DeadlineExceeded):
		e.log.Warn("drain deadline passed: calls still in flight were handed back", "drain_timeout", e.drain)
	case drainErr != nil:
		return drainErr
	}
	err := <-done
	if legacyDone != nil {
		if lerr := <-legacyDone; err == nil {
			err = lerr
		}
	}
	return err
}

// Close stops learning the workers' tools, stops serving the admin, history
// and catalog subjects and closes the store NewExecutor opened. Call it after
// Run returns.
func (e *Executor) Close() {
	if e.stopWorkers != nil {
		e.stopWorkers()
		e.stopWorkers = nil
	}
	if e.admin != nil {
		_ = e.admin.Close()
	}
	if e.history != nil {
		_ = e.history.Close()
	}
	if e.catalog != nil {
		_ = e.catalog.Close()
	}
	if e.ownStore {
		_ = e.store.Close()
	}
}

// extraReplyObserver is the part of an Observer that counts requests for a
// body that more than one worker answered (internal/app/metrics implements it).
type extraReplyObserver interface {
	ExtraReply(subject string)
}

// extraReplies returns the natstool.Endpoint.OnExtraReply of an executor's
// NATS tools: each report counted by obs when it counts them, and logged at
// error level at most once a minute for each subject.
func extraReplies(log *slog.Logger, obs Observer) func(subject string) {
	var mu sync.Mutex
	logged := map[string]time.Time{}
	return func(subject string) {
		if o, ok := obs.(extraReplyObserver); ok {
			o.ExtraReply(subject)
		}
		mu.Lock()
		defer mu.Unlock()
		if at, ok := logged[subject]; ok && time.Since(at) < time.Minute {
			return
		}
		logged[subject] = time.Now()
		log.Error("a tool body's request was answered by more than one worker: each call runs the body more than once; "+
			"serve the subject from one account, in the queue group "+wire.BodyQueue+" (docs/PROTOCOL.md §12)",
			"subject", subject)
	}
}
