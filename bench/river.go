package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// riverSchema is the schema River's tables live in for the benchmark; it is
// dropped afterwards.
const riverSchema = "river_bench"

// benchJobArgs are the args of the benchmark's unique jobs: the key alone, so
// that duplicates have equal args.
type benchJobArgs struct {
	Key string `json:"key"`
}

// Kind names the job kind.
func (benchJobArgs) Kind() string { return "toolexec_bench_noop" }

// noopWorker counts the jobs it works, by key.
type noopWorker struct {
	river.WorkerDefaults[benchJobArgs]
	mu      sync.Mutex // protects entered
	entered map[string]int
	total   atomic.Int64
}

// Work does nothing but count.
func (w *noopWorker) Work(_ context.Context, job *river.Job[benchJobArgs]) error {
	w.mu.Lock()
	w.entered[job.Args.Key]++
	w.mu.Unlock()
	w.total.Add(1)
	return nil
}

// completions tells inserters when the job they wait for has completed.
type completions struct {
	mu      sync.Mutex // protects done and waiting
	done    map[int64]time.Time
	waiting map[int64][]chan time.Time
}

func (c *completions) completed(id int64, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.done[id] = at
	for _, ch := range c.waiting[id] {
		ch <- at
	}
	delete(c.waiting, id)
}

// wait returns a channel that receives the completion time of job id.
func (c *completions) wait(id int64) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if at, ok := c.done[id]; ok {
		ch <- at
		return ch
	}
	c.waiting[id] = append(c.waiting[id], ch)
	return ch
}

// runRiver measures River's unique jobs on the same PostgreSQL: conc
// inserters, each Insert with UniqueOpts{ByArgs: true} of a key (duplicates
// repeat a key), and a no-op worker, 64 at most at once, as River's defaults
// otherwise stand. Closed loop, an inserter waits for its job's completion
// event before the next insert (64 jobs in flight, as toolexec's rows have);
// open, the inserters do not wait and the run lasts until every job completed.
func (h *harness) runRiver(ctx context.Context, id string, open bool) Result {
	n, conc := h.cfg.riverJobs, h.cfg.concurrency
	r := Result{ID: id, Group: groupPeer, Name: "River unique jobs (ByArgs), no-op worker", Concurrency: conc, Duplicates: h.cfg.duplicates, dbServer: true}
	if open {
		r.Name += ", inserted without waiting"
	}
	pool, err := h.pgPool(ctx)
	if err != nil {
		return failed(r, err)
	}
	defer pool.Close()
	r.Durability = "synchronous_commit=" + pgSetting(ctx, pool, "synchronous_commit") + fmt.Sprintf(", %d connections", h.cfg.pgConns)
	if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+riverSchema+` CASCADE; CREATE SCHEMA `+riverSchema); err != nil {
		return failed(r, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pool.Exec(cctx, `DROP SCHEMA IF EXISTS `+riverSchema+` CASCADE`)
	}()
	driver := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: riverSchema, Logger: quiet})
	if err != nil {
		return failed(r, err)
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return failed(r, fmt.Errorf("migrating River's schema: %w", err))
	}
	worker := &noopWorker{entered: map[string]int{}}
	workers := river.NewWorkers()
	river.AddWorker(workers, worker)
	client, err := river.NewClient(driver, &river.Config{
		Schema:  riverSchema,
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 64}},
		Workers: workers,
		Logger:  quiet,
	})
	if err != nil {
		return failed(r, err)
	}
	events, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: 4 * (n + h.cfg.warmup), Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancelSub()
	comp := &completions{done: map[int64]time.Time{}, waiting: map[int64][]chan time.Time{}}
	go func() {
		for e := range events {
			comp.completed(e.Job.ID, time.Now())
		}
	}()
	if err := client.Start(ctx); err != nil {
		return failed(r, err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(sctx)
	}()

	var deadlocks, retries atomic.Int64
	insert := func(key string) (int64, error) {
		for attempt := 0; ; attempt++ {
			res, err := client.Insert(ctx, benchJobArgs{Key: key}, &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByArgs: true}})
			if err == nil {
				return res.Job.ID, nil
			}
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "40P01" {
				deadlocks.Add(1)
			}
			if attempt == 5 || ctx.Err() != nil {
				return 0, err
			}
			retries.Add(1)
			time.Sleep(10 * time.Millisecond)
		}
	}
	// drive inserts jobs with conc inserters. Closed loop: each inserter waits
	// for its job's completion before the next insert. Open loop: inserters do
	// not wait; the run ends when every job has completed.
	drive := func(tag string, jobs int, dup float64, open bool) (int, int, time.Duration, *latencies, error) {
		plan, distinct := planKeys(jobs, dup, uint64(time.Now().UnixNano()))
		var next, finished atomic.Int64
		var firstErr atomic.Value
		lat := &latencies{}
		type inserted struct {
			id int64
			t0 time.Time
		}
		var mu sync.Mutex
		var pending []inserted // open loop: jobs not waited for yet
		await := func(id int64, t0 time.Time) bool {
			select {
			case at := <-comp.wait(id):
				lat.add(max(at.Sub(t0), 0))
				finished.Add(1)
				return true
			case <-time.After(2 * time.Minute):
				firstErr.CompareAndSwap(nil, fmt.Errorf("job %d not completed within 2m", id))
			case <-ctx.Done():
			}
			return false
		}
		start := time.Now()
		var wg sync.WaitGroup
		for range min(conc, jobs) {
			wg.Go(func() {
				for ctx.Err() == nil {
					i := int(next.Add(1) - 1)
					if i >= jobs {
						return
					}
					t0 := time.Now()
					id, err := insert(tag + "-" + strconv.Itoa(plan[i]))
					if err != nil {
						firstErr.CompareAndSwap(nil, err)
						return
					}
					if open {
						mu.Lock()
						pending = append(pending, inserted{id, t0})
						mu.Unlock()
						continue
					}
					if !await(id, t0) {
						return
					}
				}
			})
		}
		wg.Wait()
		for _, p := range pending {
			if !await(p.id, p.t0) {
				break
			}
		}
		if err, ok := firstErr.Load().(error); ok {
			return 0, distinct, 0, lat, err
		}
		return int(finished.Load()), distinct, time.Since(start), lat, ctx.Err()
	}
	if _, _, _, _, err := drive("warm", h.cfg.warmup, 0, false); err != nil {
		return failed(r, fmt.Errorf("warm-up: %w", err))
	}
	before := worker.total.Load()
	worker.mu.Lock()
	clear(worker.entered)
	worker.mu.Unlock()
	cpu0 := takeCPU()
	done, distinct, elapsed, lat, err := drive("run", n, h.cfg.duplicates, open)
	if err != nil {
		return failed(r, err)
	}
	r.rate(done, elapsed)
	r.cpu(cpu0, takeCPU())
	lat.fill(&r)
	entered := worker.total.Load() - before
	twice := 0
	worker.mu.Lock()
	for _, c := range worker.entered {
		if c > 1 {
			twice++
		}
	}
	worker.mu.Unlock()
	r.CheckOK = done == n && int(entered) == distinct && twice == 0
	r.Check = fmt.Sprintf("%d of %d jobs completed; worked %d, distinct keys %d, keys worked twice %d; %d inserts retried (%d deadlocks)",
		done, n, entered, distinct, twice, retries.Load(), deadlocks.Load())
	return r
}
