package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/kvstore/pgstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
	"github.com/tesserix/toolexec/tool"
)

// benchTool is the demo tool the toolexec rows call: book, effectful, keyed
// by the flight.
const benchTool = "book"

// quiet discards the logs of the executor the benchmarks run.
var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// toolexecConfig is one configuration of toolexec to measure.
type toolexecConfig struct {
	id         string
	name       string // the store, for the table
	store      string // memory, jetstream, postgres, redis
	syncAlways bool   // the NATS server's fsync
	cluster    bool   // a three-node cluster, streams and bucket with three replicas
	linked     bool   // the cluster's routes through proxies, so that a node can crash
	// logger receives the executor's logs; nil discards them.
	logger  *slog.Logger
	profile bool // write a CPU profile of the executor's process during the run
	// latencyRun adds a run at concurrency 1 after the main one (row id + "-c1").
	latencyRun bool
}

// executor is toolexec as cmd/executor wires it, inside this process: an
// embedded NATS server reached over TCP, the two streams, a store, the
// dispatcher serving the demo airline, and a worker taking 64 calls at once.
type executor struct {
	env     *natsEnv
	airline *demo.Airline // the tools' bookings, for checks of effects by key
	js      jetstream.JetStream
	d       *dispatch.Dispatcher
	w       *bus.Worker
	done    chan error
	closers []func()
	// groups counts the store's group commits (nil: the store has none): the
	// transactions or atomic batches of two writes or more, the writes they
	// carried, and the ones the server refused, whose writes then went one by
	// one. The check reports them. For Redis they are its pipelines of two
	// script runs or more, the runs they carried (reads among them), and the
	// pipelines that lost their connection, whose unsettled runs went alone.
	groups func() (batches, writes, refused int64)
	// pipelined says that groups counts Redis's pipelines, not commits.
	pipelined bool
}

// startExecutor starts the executor of cfg.
func (h *harness) startExecutor(ctx context.Context, cfg toolexecConfig) (ex *executor, durability string, err error) {
	var env *natsEnv
	if cfg.linked {
		env, err = h.startCluster(cfg.id, cfg.syncAlways, true)
	} else {
		env, err = h.startEnv(cfg.id, cfg.syncAlways, cfg.cluster)
	}
	if err != nil {
		return nil, "", err
	}
	ex = &executor{env: env, airline: demo.New()}
	log := cfg.logger
	if log == nil {
		log = quiet
	}
	ex.closers = append(ex.closers, env.stop)
	defer func() {
		if err != nil {
			ex.close()
		}
	}()
	nc, err := bus.Connect(bus.ConnectConfig{URL: env.url, Name: "toolexec-executor", Logger: log})
	if err != nil {
		return nil, "", err
	}
	ex.closers = append(ex.closers, nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, "", err
	}
	ex.js = js
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{Replicas: env.replicas}); err != nil {
		return nil, "", err
	}
	durability = env.fsyncName()
	var store kvstore.Store
	switch cfg.store {
	case "memory":
		s := memstore.New(memstore.Config{})
		ex.closers = append(ex.closers, func() { _ = s.Close() })
		store = s
	case "jetstream":
		s, err := natsstore.New(ctx, js, natsstore.Config{Replicas: env.replicas})
		if err != nil {
			return nil, "", err
		}
		ex.closers = append(ex.closers, func() { _ = s.Close() })
		store = s
	case "postgres":
		pool, err := h.pgPool(ctx)
		if err != nil {
			return nil, "", err
		}
		ex.closers = append(ex.closers, pool.Close)
		const schema = "toolexec_bench"
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
			return nil, "", err
		}
		s, err := pgstore.New(ctx, pool, pgstore.Config{Schema: schema, Logger: log})
		if err != nil {
			return nil, "", err
		}
		ex.closers = append(ex.closers, func() {
			_ = s.Close()
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, _ = pool.Exec(cctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
		})
		if err := s.EnsureSchema(ctx); err != nil {
			return nil, "", err
		}
		durability += ", synchronous_commit=" + pgSetting(ctx, pool, "synchronous_commit") + fmt.Sprintf(", %d connections", h.cfg.pgConns)
		store = s
		ex.groups = func() (int64, int64, int64) {
			st := s.BatchStats()
			return st.Batches, st.Writes, st.Retried
		}
	case "redis":
		c, err := h.redisClient(ctx)
		if err != nil {
			return nil, "", err
		}
		prefix := "toolexec-bench-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		ex.closers = append(ex.closers, func() {
			cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			_ = unlinkPrefix(cctx, c, prefix+":")
			_ = c.Close()
		})
		s, err := redisstore.New(c, redisstore.Config{Prefix: prefix})
		if err != nil {
			return nil, "", err
		}
		ex.closers = append(ex.closers, func() { _ = s.Close() })
		durability += ", Redis " + redisPersistence(ctx, c)
		store = s
		ex.groups = func() (int64, int64, int64) {
			st := s.PipelineStats()
			return st.Pipelines, st.Runs, st.Alone
		}
		ex.pipelined = true
	default:
		return nil, "", fmt.Errorf("unknown store %q", cfg.store)
	}
	reg, err := tool.NewRegistry(ex.airline.Tools()...)
	if err != nil {
		return nil, "", err
	}
	ex.d, err = dispatch.New(dispatch.Config{Tools: reg, Store: store, Logger: log})
	if err != nil {
		return nil, "", err
	}
	ex.w, err = bus.NewWorker(js, ex.d, bus.WorkerConfig{Concurrency: bus.DefaultConcurrency, Logger: log})
	if err != nil {
		return nil, "", err
	}
	ex.done = make(chan error, 1)
	go func() { ex.done <- ex.w.Run(context.WithoutCancel(ctx)) }()
	return ex, durability, nil
}

// close stops the worker, then everything else in reverse order of starting.
func (ex *executor) close() {
	if ex.w != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = ex.w.Shutdown(ctx)
		cancel()
		<-ex.done
	}
	for i := len(ex.closers) - 1; i >= 0; i-- {
		ex.closers[i]()
	}
}

// emitterReport is the part of emitter bench's --json report the table uses.
type emitterReport struct {
	Calls          int            `json:"calls"`
	Concurrency    int            `json:"concurrency"`
	Duplicates     float64        `json:"duplicates"`
	DistinctKeys   int            `json:"distinct_keys"`
	Answered       int            `json:"answered"`
	Unanswered     int            `json:"unanswered"`
	Answers        map[string]int `json:"answers"`
	ElapsedSeconds float64        `json:"elapsed_seconds"`
	CallsPerSecond float64        `json:"calls_per_second"`
	Latency        struct {
		P50, P95, P99, Max, Mean float64
	} `json:"latency_ms"`
	Check struct {
		BodiesEntered    int    `json:"bodies_entered"`
		KeysEnteredTwice int    `json:"keys_entered_twice"`
		KeyMismatches    int    `json:"key_mismatches"`
		OK               bool   `json:"ok"`
		Verdict          string `json:"verdict"`
	} `json:"check"`
}

// emit runs emitter bench against url, calling the tool toolName, and returns
// its report. extra are more flags of emitter bench.
func (h *harness) emit(ctx context.Context, url, toolName string, calls, concurrency int, dup float64, extra ...string) (*emitterReport, error) {
	args := []string{"-s", url, "--json", "--timeout", "60s", "bench", "--tool", toolName,
		"--calls", strconv.Itoa(calls), "--concurrency", strconv.Itoa(concurrency),
		"--duplicates", strconv.FormatFloat(dup, 'f', -1, 64), "--warmup", "0"}
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, h.cfg.emitter, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var rep emitterReport
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return nil, fmt.Errorf("emitter bench: %v (%v): %s", runErr, err, bytes.TrimSpace(stderr.Bytes()))
	}
	return &rep, nil // a failed check is in the report
}

// runToolexec measures one configuration of toolexec: a warm-up, then the
// measured run of emitter bench (a separate process, as a client is), then,
// where asked, the run at concurrency 1.
func (h *harness) runToolexec(ctx context.Context, cfg toolexecConfig) []Result {
	r := Result{ID: cfg.id, Group: groupToolexec, Name: "toolexec, " + cfg.name, Concurrency: h.cfg.concurrency, Duplicates: h.cfg.duplicates,
		dbServer: cfg.store == "postgres" || cfg.store == "redis"}
	if cfg.cluster {
		r.Group = groupCluster
	}
	ex, durability, err := h.startExecutor(ctx, cfg)
	if err != nil {
		return []Result{failed(r, err)}
	}
	defer ex.close()
	r.Durability = durability
	if h.cfg.warmup > 0 {
		if _, err := h.emit(ctx, ex.env.url, benchTool, h.cfg.warmup, h.cfg.concurrency, 0); err != nil {
			return []Result{failed(r, fmt.Errorf("warm-up: %w", err))}
		}
	}
	var stopProfile func()
	var emitterFlags []string
	if h.round <= 1 && (cfg.profile || slices.Contains(strings.Split(h.cfg.profile, ","), cfg.id)) {
		stopProfile, err = h.startProfile(cfg.id)
		if err != nil {
			return []Result{failed(r, err)}
		}
		path := h.profilePath(cfg.id + "-emitter")
		emitterFlags = []string{"--cpuprofile", path}
		h.profiles = append(h.profiles, profileRun{id: cfg.id, path: path, client: true})
	}
	out := []Result{h.measureToolexec(ctx, r, ex, h.cfg.calls, h.cfg.concurrency, emitterFlags...)}
	if stopProfile != nil {
		stopProfile()
	}
	if cfg.latencyRun {
		c1 := r
		c1.ID, c1.Name, c1.Concurrency = cfg.id+"-c1", r.Name+", 1 in flight", 1
		out = append(out, h.measureToolexec(ctx, c1, ex, h.cfg.latencyCalls, 1))
	}
	return out
}

// measureToolexec runs emitter bench once and checks its count of bodies
// entered against the dispatcher's own.
func (h *harness) measureToolexec(ctx context.Context, r Result, ex *executor, calls, conc int, emitterFlags ...string) Result {
	before := ex.d.Stats().BodiesEntered.Load()
	var batches, writes, refused int64
	if ex.groups != nil {
		batches, writes, refused = ex.groups()
	}
	cpu0 := takeCPU()
	rep, err := h.emit(ctx, ex.env.url, benchTool, calls, conc, h.cfg.duplicates, emitterFlags...)
	if err != nil {
		return failed(r, err)
	}
	cpu1 := takeCPU()
	entered := ex.d.Stats().BodiesEntered.Load() - before
	r.rate(rep.Answered, time.Duration(rep.ElapsedSeconds*float64(time.Second)))
	r.cpu(cpu0, cpu1)
	r.P50, r.P99, r.Max = rep.Latency.P50, rep.Latency.P99, rep.Latency.Max
	r.CheckOK = rep.Check.OK && entered == int64(rep.DistinctKeys) && rep.Answered == calls
	r.Check = fmt.Sprintf("%d of %d answered (%s); emitter: %s; executor's own count of bodies entered: %d",
		rep.Answered, calls, kinds(rep.Answers), rep.Check.Verdict, entered)
	if ex.groups != nil {
		b, w, ref := ex.groups()
		b, w, ref = b-batches, w-writes, ref-refused
		format := "; group commit: %d store writes in %d batches of two or more (%.1f a batch), %d refused and written one by one"
		if ex.pipelined {
			format = "; pipelines: %d script runs in %d pipelines of two or more (%.1f a pipeline), %d left unsettled and run alone"
		}
		r.Check += fmt.Sprintf(format, w, b, float64(w)/float64(max(b, 1)), ref)
	}
	return r
}

// kinds prints answer counts in a fixed order.
func kinds(m map[string]int) string {
	var b bytes.Buffer
	for _, k := range []string{"completed", "deduplicated", "indeterminate", "failed", "rejected"} {
		if n := m[k]; n > 0 {
			if b.Len() > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%d %s", n, k)
		}
	}
	return b.String()
}

// startProfile writes a CPU profile of this process (the executor and its
// embedded NATS server; the emitter is another process) until the returned
// function is called.
func (h *harness) startProfile(id string) (func(), error) {
	path := h.profilePath(id)
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	h.profiles = append(h.profiles, profileRun{id: id, path: path})
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
