package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/embedded"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// natsEnv is one embedded NATS server with JetStream, on a port of the
// benchmark's range and a store directory of its own, or a cluster of them.
type natsEnv struct {
	srv        *server.Server // a single node; nil for a cluster
	cluster    *natsCluster   // nil for a single node
	url        string         // every node's, comma-separated
	dir        string
	syncAlways bool
	replicas   int // of the streams and buckets made on it: 0 (one) or clusterNodes
}

// startEnv starts a single node, or a cluster when cluster is set.
func (h *harness) startEnv(name string, syncAlways, cluster bool) (*natsEnv, error) {
	if cluster {
		return h.startCluster(name, syncAlways, false)
	}
	return h.startNATS(name, syncAlways)
}

// lazySync is the fsync period of "lazy" servers: nats-server's default.
const lazySync = 2 * time.Minute

// startNATS starts a server for one configuration: file storage under the work
// directory, fsync before every acknowledgement (syncAlways) or every two
// minutes, listening on the next free port of the range.
func (h *harness) startNATS(name string, syncAlways bool) (*natsEnv, error) {
	dir := h.storeDir(name)
	interval := lazySync
	if syncAlways {
		interval = 0 // embedded.Start: sync_interval always
	}
	for range 20 {
		port := h.nextPort()
		s, err := embedded.Start(embedded.Config{Host: "127.0.0.1", Port: port, StoreDir: dir, SyncInterval: interval})
		if errors.Is(err, embedded.ErrPortInUse) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &natsEnv{srv: s, url: s.ClientURL(), dir: dir, syncAlways: syncAlways}, nil
	}
	return nil, fmt.Errorf("no free port from %d on", h.cfg.portBase)
}

func (e *natsEnv) stop() {
	if e.cluster != nil {
		e.cluster.stop()
		return
	}
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// fsyncName describes the server's fsync setting for the table, and the
// cluster's shape if it is one.
func (e *natsEnv) fsyncName() string {
	s := "NATS fsync lazy"
	if e.syncAlways {
		s = "NATS fsync always"
	}
	if e.cluster != nil {
		s += fmt.Sprintf(", %d nodes, %d replicas", len(e.cluster.nodes), e.replicas)
	}
	return s
}

// connect dials the server and returns a JetStream context whose asynchronous
// publishes time out rather than hang.
func (e *natsEnv) connect(name string) (*nats.Conn, jetstream.JetStream, error) {
	nc, err := nats.Connect(e.url, nats.Name(name))
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4000), jetstream.WithPublishAsyncTimeout(30*time.Second))
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// publishAsync publishes a message asynchronously and handles the stall nats.go
// reports when too many acknowledgements are outstanding
// (ErrTooManyStalledMsgs): it waits for the outstanding ones and tries again,
// instead of dropping the message. It returns the future and how many stalls it
// waited out.
func publishAsync(ctx context.Context, js jetstream.JetStream, m *nats.Msg, opts ...jetstream.PublishOpt) (jetstream.PubAckFuture, int, error) {
	stalls := 0
	for {
		f, err := js.PublishMsgAsync(m, opts...)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return f, stalls, err
		}
		stalls++
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(time.Second):
		case <-ctx.Done():
			return nil, stalls, ctx.Err()
		}
	}
}

// settle waits for the outcome of an asynchronous publish, and publishes the
// message again synchronously if it failed. It reports whether it had to.
func settle(ctx context.Context, js jetstream.JetStream, f jetstream.PubAckFuture) (bool, error) {
	select {
	case <-f.Ok():
		return false, nil
	case err := <-f.Err():
		for attempt := 0; ; attempt++ {
			if _, err2 := js.PublishMsg(ctx, f.Msg()); err2 == nil {
				return true, nil
			} else if attempt == 5 || ctx.Err() != nil {
				return true, fmt.Errorf("publish failed (%v), and again: %w", err, err2)
			}
			time.Sleep(50 * time.Millisecond)
		}
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// callPayload is a structured CloudEvent of a demo booking: what every call in
// these benchmarks weighs.
func callPayload(callID, runID string, key int) []byte {
	e, err := wire.CallEvent(events.Call{
		Tenant: "bench", RunID: runID, CallID: callID, Tool: "book", Source: "/bench",
		Arguments: fmt.Appendf(nil, `{"flight":"K%d","seats":1,"request_id":"r-%s"}`, key, callID),
	})
	if err != nil {
		panic(err) // fixed, valid input
	}
	_, data, err := wire.Encode(e, wire.Structured)
	if err != nil {
		panic(err)
	}
	return data
}

// runCeiling measures the raw JetStream work queue: one producer publishing n
// messages asynchronously, four consumers on one durable pull consumer
// acknowledging each. No idempotency, no answers: the ceiling every executor on
// this server lives under.
func (h *harness) runCeiling(ctx context.Context, id string, syncAlways bool, n int) Result {
	r := Result{ID: id, Group: groupCeiling, Name: "JetStream work queue: async publish, 4 consumers, ack", Concurrency: 4}
	env, err := h.startNATS(id, syncAlways)
	if err != nil {
		return failed(r, err)
	}
	defer env.stop()
	r.Durability = env.fsyncName()

	pnc, pjs, err := env.connect("bench-producer")
	if err != nil {
		return failed(r, err)
	}
	defer pnc.Close()
	if _, err := pjs.CreateStream(ctx, jetstream.StreamConfig{
		Name: "BENCH_WQ", Subjects: []string{"bench.wq.>"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage,
	}); err != nil {
		return failed(r, err)
	}
	if _, err := pjs.CreateOrUpdateConsumer(ctx, "BENCH_WQ", jetstream.ConsumerConfig{
		Durable: "wq", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 20000, AckWait: time.Minute,
	}); err != nil {
		return failed(r, err)
	}

	var acked atomic.Int64
	all := make(chan struct{})
	var stops []func()
	for i := range 4 {
		nc, js, err := env.connect(fmt.Sprintf("bench-consumer-%d", i))
		if err != nil {
			return failed(r, err)
		}
		defer nc.Close()
		c, err := js.Consumer(ctx, "BENCH_WQ", "wq")
		if err != nil {
			return failed(r, err)
		}
		cc, err := c.Consume(func(m jetstream.Msg) {
			_ = m.Ack()
			if acked.Add(1) == int64(n) {
				close(all)
			}
		}, jetstream.PullMaxMessages(500))
		if err != nil {
			return failed(r, err)
		}
		stops = append(stops, cc.Stop)
	}
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	payload := callPayload("call_0", "run_0", 0)
	cpu0 := takeCPU()
	start := time.Now()
	var stalls, retries atomic.Int64
	futures := make(chan jetstream.PubAckFuture, 8192)
	var settled sync.WaitGroup
	var settleErr atomic.Value
	settled.Go(func() {
		for f := range futures {
			again, err := settle(ctx, pjs, f)
			if again {
				retries.Add(1)
			}
			if err != nil {
				settleErr.Store(err)
			}
		}
	})
	for i := range n {
		f, s, err := publishAsync(ctx, pjs, &nats.Msg{Subject: "bench.wq.call", Data: payload})
		stalls.Add(int64(s))
		if err != nil {
			close(futures)
			return failed(r, fmt.Errorf("publishing message %d: %w", i, err))
		}
		futures <- f
	}
	close(futures)
	settled.Wait()
	select {
	case <-all:
	case <-time.After(2 * time.Minute):
		return failed(r, fmt.Errorf("only %d of %d messages consumed", acked.Load(), n))
	}
	r.rate(n, time.Since(start))
	r.cpu(cpu0, takeCPU())
	if err, ok := settleErr.Load().(error); ok {
		return failed(r, err)
	}
	// Acks are fire-and-forget: the queue is empty once the server has them all.
	left := uint64(0)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		st, err := pjs.Stream(ctx, "BENCH_WQ")
		if err != nil {
			return failed(r, err)
		}
		if left = st.CachedInfo().State.Msgs; left == 0 {
			break
		}
		if _, err := st.Info(ctx); err != nil {
			return failed(r, err)
		}
	}
	r.CheckOK = left == 0
	r.Check = fmt.Sprintf("%d published, %d consumed and acked, %d left in the queue; %d publish stalls waited out, %d republished",
		n, acked.Load(), left, stalls.Load(), retries.Load())
	return r
}

// loopCall is what the hand-rolled loop reads from a call: the fields of a
// structured CloudEvent it needs, decoded with encoding/json.
type loopCall struct {
	ID    string `json:"id"`
	RunID string `json:"runid"`
	Data  struct {
		Arguments struct {
			Flight string `json:"flight"`
		} `json:"arguments"`
	} `json:"data"`
}

// runHandRolled measures the loop a Go team would write by hand on JetStream:
// a pull consumer shared by 64 workers; for each call a KV Create of its key,
// a no-op, a KV Update with the outcome, an asynchronous publish of the result
// and an ack once the result is stored. A duplicate (Create refused) reads the
// record and answers from it without waiting for a holder. A client keeps 64
// calls in flight, as emitter bench does for toolexec. On a cluster, the
// streams and the bucket have a replica on every node.
func (h *harness) runHandRolled(ctx context.Context, id string, syncAlways, cluster bool) Result {
	n, conc := h.cfg.calls, h.cfg.concurrency
	r := Result{ID: id, Group: groupBaseline, Name: "hand-rolled loop: pull → KV Create → no-op → KV Update → async publish → ack",
		Concurrency: conc, Duplicates: h.cfg.duplicates}
	if cluster {
		r.Group = groupCluster
	}
	env, err := h.startEnv(id, syncAlways, cluster)
	if err != nil {
		return failed(r, err)
	}
	defer env.stop()
	r.Durability = env.fsyncName()

	wnc, wjs, err := env.connect("bench-loop-worker")
	if err != nil {
		return failed(r, err)
	}
	defer wnc.Close()
	for _, sc := range []jetstream.StreamConfig{
		{Name: "LOOP_CALLS", Subjects: []string{"loop.call.>"}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage, Replicas: env.replicas},
		{Name: "LOOP_RESULTS", Subjects: []string{"loop.result.>"}, Storage: jetstream.FileStorage, Replicas: env.replicas},
	} {
		if _, err := wjs.CreateStream(ctx, sc); err != nil {
			return failed(r, err)
		}
	}
	kv, err := wjs.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "loop_claims", History: 1, Storage: jetstream.FileStorage, Replicas: env.replicas})
	if err != nil {
		return failed(r, err)
	}
	cons, err := wjs.CreateOrUpdateConsumer(ctx, "LOOP_CALLS", jetstream.ConsumerConfig{
		Durable: "loop", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Minute, MaxAckPending: 1000,
	})
	if err != nil {
		return failed(r, err)
	}

	var entered atomic.Int64
	var entriesMu sync.Mutex
	entries := map[string]int{} // bodies entered by key
	var workErr atomic.Value
	work := make(chan jetstream.Msg, conc)
	type pending struct {
		f jetstream.PubAckFuture
		m jetstream.Msg
	}
	toAck := make(chan pending, 4096)
	var workers, ackers sync.WaitGroup
	for range 2 {
		ackers.Go(func() {
			for p := range toAck {
				if _, err := settle(ctx, wjs, p.f); err != nil {
					workErr.Store(err)
					continue
				}
				_ = p.m.Ack()
			}
		})
	}
	handle := func(m jetstream.Msg) error {
		var c loopCall
		if err := json.Unmarshal(m.Data(), &c); err != nil {
			return err
		}
		sum := sha256.Sum256([]byte(c.RunID + "\x00" + c.Data.Arguments.Flight))
		key := hex.EncodeToString(sum[:])
		kind, outcome := "completed", "K7Q2ZD"
		rev, err := kv.Create(ctx, key, fmt.Appendf(nil, `{"state":"claimed","holder":"loop","call":%q}`, c.ID))
		switch {
		case err == nil:
			entered.Add(1) // the no-op body
			entriesMu.Lock()
			entries[key]++
			entriesMu.Unlock()
			if _, err := kv.Update(ctx, key, fmt.Appendf(nil, `{"state":"completed","holder":"loop","call":%q,"outcome":%q}`, c.ID, outcome), rev); err != nil {
				return fmt.Errorf("update: %w", err)
			}
		case errors.Is(err, jetstream.ErrKeyExists):
			kind = "deduplicated"
			// On a cluster the read may be served by a follower that has not
			// seen the claim yet (direct gets): that is a first call still
			// running, answered with no outcome like one seen claimed.
			outcome = ""
			e, err := kv.Get(ctx, key)
			switch {
			case errors.Is(err, jetstream.ErrKeyNotFound):
			case err != nil:
				return fmt.Errorf("get: %w", err)
			default:
				var rec struct{ State, Outcome string }
				_ = json.Unmarshal(e.Value(), &rec)
				outcome = rec.Outcome // empty while the first call is still running
			}
		default:
			return fmt.Errorf("create: %w", err)
		}
		res := &nats.Msg{Subject: "loop.result." + c.RunID + "." + c.ID,
			Data: fmt.Appendf(nil, `{"kind":%q,"outcome":%q,"key":%q}`, kind, outcome, key)}
		f, _, err := publishAsync(ctx, wjs, res, jetstream.WithMsgID("r-"+c.ID))
		if err != nil {
			return err
		}
		toAck <- pending{f, m}
		return nil
	}
	stop := make(chan struct{})
	for range conc {
		workers.Go(func() {
			for {
				select {
				case m := <-work:
					if err := handle(m); err != nil {
						workErr.Store(err)
						_ = m.Nak()
					}
				case <-stop:
					return
				}
			}
		})
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case work <- m:
		case <-stop:
		}
	}, jetstream.PullMaxMessages(2*conc))
	if err != nil {
		close(stop)
		return failed(r, err)
	}
	defer func() {
		cc.Stop()
		close(stop)
		workers.Wait()
		close(toAck)
		ackers.Wait()
	}()

	// The client: its own connection, conc calls in flight.
	cnc, cjs, err := env.connect("bench-loop-client")
	if err != nil {
		return failed(r, err)
	}
	defer cnc.Close()
	client := &loopClient{nc: cnc, js: cjs}
	if _, err := client.run(ctx, "warm", h.cfg.warmup, 0, conc); err != nil {
		return failed(r, fmt.Errorf("warm-up: %w", err))
	}
	before := entered.Load()
	entriesMu.Lock()
	clear(entries)
	entriesMu.Unlock()
	cpu0 := takeCPU()
	out, err := client.run(ctx, "run", n, h.cfg.duplicates, conc)
	if err != nil {
		return failed(r, err)
	}
	r.rate(out.answered, out.elapsed)
	r.cpu(cpu0, takeCPU())
	out.lat.fill(&r)
	if err, ok := workErr.Load().(error); ok {
		return failed(r, fmt.Errorf("worker: %w", err))
	}
	got := entered.Load() - before
	twice := 0
	entriesMu.Lock()
	for _, c := range entries {
		if c > 1 {
			twice++
		}
	}
	entriesMu.Unlock()
	r.CheckOK = out.answered == n && int(got) == out.distinct && twice == 0
	r.Check = fmt.Sprintf("%d of %d answered; bodies entered %d, distinct keys %d, keys entered twice %d",
		out.answered, n, got, out.distinct, twice)
	return r
}

// loopClient is the hand-rolled loop's caller: it publishes calls and waits for
// their results on one subscription.
type loopClient struct {
	nc *nats.Conn
	js jetstream.JetStream
}

// loopOutcome is what a client run measured.
type loopOutcome struct {
	answered, distinct int
	elapsed            time.Duration
	lat                latencies
}

// run publishes n calls (with the duplicate share dup), conc at a time, and
// waits for every result.
func (c *loopClient) run(ctx context.Context, tag string, n int, dup float64, conc int) (*loopOutcome, error) {
	out := &loopOutcome{}
	if n == 0 {
		return out, nil
	}
	runID := tag + "_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	plan, distinct := planKeys(n, dup, uint64(time.Now().UnixNano()))
	out.distinct = distinct
	var mu sync.Mutex
	waiting := map[string]chan time.Time{}
	sub, err := c.nc.Subscribe("loop.result."+runID+".*", func(m *nats.Msg) {
		now := time.Now()
		id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		mu.Lock()
		ch, ok := waiting[id]
		delete(waiting, id)
		mu.Unlock()
		if ok {
			ch <- now
		}
	})
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	_ = sub.SetPendingLimits(-1, -1)
	if err := c.nc.FlushTimeout(10 * time.Second); err != nil {
		return nil, err
	}
	var next, answered atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				id := "c" + strconv.Itoa(i)
				ch := make(chan time.Time, 1)
				mu.Lock()
				waiting[id] = ch
				mu.Unlock()
				t0 := time.Now()
				m := &nats.Msg{Subject: "loop.call.bench", Data: callPayload(id, runID, plan[i])}
				if _, err := c.js.PublishMsg(ctx, m, jetstream.WithMsgID(runID+"-"+id)); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				select {
				case t := <-ch:
					out.lat.add(t.Sub(t0))
					answered.Add(1)
				case <-time.After(60 * time.Second):
					firstErr.CompareAndSwap(nil, fmt.Errorf("no result for call %s within 60s", id))
					return
				case <-ctx.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	out.elapsed = time.Since(start)
	out.answered = int(answered.Load())
	if err, ok := firstErr.Load().(error); ok {
		return out, err
	}
	return out, ctx.Err()
}

// runKVCycles measures the raw JetStream KV claim cycle: Create of a new key,
// then Update of it at the revision Create returned, from conc goroutines, until
// n cycles are done or the time cap passes.
func (h *harness) runKVCycles(ctx context.Context, id string, syncAlways bool, n int) Result {
	r := Result{ID: id, Group: groupRawStore, Name: "JetStream KV: Create + Update", Concurrency: h.cfg.concurrency}
	env, js, kv, err := h.startRawKV(ctx, id, syncAlways)
	if err != nil {
		return failed(r, err)
	}
	defer env.stop()
	defer js.Conn().Close()
	r.Durability = env.fsyncName()
	return h.cycles(ctx, r, n, func(ctx context.Context, i int) error {
		key := "bench." + strconv.Itoa(i)
		rev, err := kv.Create(ctx, key, rawClaimValue)
		if err != nil {
			return fmt.Errorf("create %s: %w", key, err)
		}
		if _, err := kv.Update(ctx, key, rawDoneValue, rev); err != nil {
			return fmt.Errorf("update %s: %w", key, err)
		}
		return nil
	})
}

// The raw KV cycles' values: a claim and a completed record the size of
// natsstore's.
var (
	rawClaimValue = []byte(`{"state":"claimed","holder":"bench-worker","claim":"c1f4a2","lease":15000000000,"tool":"book","run":"run_1","call":"call_6705c7fa0eed"}`)
	rawDoneValue  = []byte(`{"state":"completed","holder":"bench-worker","claim":"c1f4a2","tool":"book","run":"run_1","call":"call_6705c7fa0eed","outcome":"K7Q2ZD"}`)
)

// rawBucket is the raw KV cycles' bucket.
const rawBucket = "raw_claims"

// startRawKV starts a server for a raw KV row, connects to it and creates the
// bucket. The caller stops the server and closes the connection.
func (h *harness) startRawKV(ctx context.Context, id string, syncAlways bool) (*natsEnv, jetstream.JetStream, jetstream.KeyValue, error) {
	env, err := h.startNATS(id, syncAlways)
	if err != nil {
		return nil, nil, nil, err
	}
	nc, js, err := env.connect("bench-kv")
	if err != nil {
		env.stop()
		return nil, nil, nil, err
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: rawBucket, History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		nc.Close()
		env.stop()
		return nil, nil, nil, err
	}
	return env, js, kv, nil
}

// cycles runs cycle from r.Concurrency goroutines until n cycles are done or
// the time cap passes, and fills r with the rate and latencies.
func (h *harness) cycles(ctx context.Context, r Result, n int, cycle func(ctx context.Context, i int) error) Result {
	var next, done atomic.Int64
	var lat latencies
	var firstErr atomic.Value
	deadline := time.Now().Add(h.cfg.rawCap)
	cpu0 := takeCPU()
	start := time.Now()
	var wg sync.WaitGroup
	for range r.Concurrency {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				t0 := time.Now()
				if err := cycle(ctx, i); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				lat.add(time.Since(t0))
				done.Add(1)
			}
		})
	}
	wg.Wait()
	r.rate(int(done.Load()), time.Since(start))
	r.cpu(cpu0, takeCPU())
	lat.fill(&r)
	if err, ok := firstErr.Load().(error); ok {
		return failed(r, err)
	}
	r.CheckOK = true
	r.Check = fmt.Sprintf("%d cycles of new keys, none refused", done.Load())
	if int(done.Load()) < n {
		r.Check += fmt.Sprintf(" (stopped at the %v cap before %d)", h.cfg.rawCap, n)
	}
	return r
}

// failed marks r as not measured.
func failed(r Result, err error) Result {
	r.Err = err.Error()
	r.CheckOK = false
	return r
}
