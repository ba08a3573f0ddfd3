package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore/natsstore"
)

// Row ids of the production-shape rows.
const (
	clusterKVLazy   = "cluster-kv-lazy"
	clusterLoopLazy = "cluster-b-lazy"
	clusterKVSync   = "cluster-kv-sync"
	clusterLoopSync = "cluster-b-sync"
	clusterFailover = "cluster-failover"
	// clusterCrash is the failover measurement with crashes for kills.
	clusterCrash = "cluster-failover-crash"
)

// The failover measurement's shape: how many times the KV stream's leader is
// killed, how long the load runs steadily before each kill, and how long a
// kill may go without an answer before the measurement gives up.
const (
	failoverKills  = 5
	failoverSteady = 3 * time.Second
	failoverWait   = time.Minute
	// failoverCallTimeout bounds one call's wait for its answer.
	failoverCallTimeout = time.Minute
)

// clusterSteps are the production-shape rows: toolexec's KV store and the
// hand-rolled loop on a three-node cluster, lazy fsync and sync always, then
// the failover pause.
func clusterSteps(c config) []step {
	kv := func(id string, syncAlways bool) func(ctx context.Context, h *harness) []Result {
		return func(ctx context.Context, h *harness) []Result {
			return h.runToolexec(ctx, toolexecConfig{id: id, name: "JetStream KV store", store: "jetstream", syncAlways: syncAlways, cluster: true})
		}
	}
	loop := func(id string, syncAlways bool) func(ctx context.Context, h *harness) Result {
		return func(ctx context.Context, h *harness) Result { return h.runHandRolled(ctx, id, syncAlways, true) }
	}
	return []step{
		{ids: []string{clusterLoopLazy}, fn: one(loop(clusterLoopLazy, false))},
		{ids: []string{clusterKVLazy}, fn: kv(clusterKVLazy, false)},
		{ids: []string{clusterLoopSync}, fn: one(func(ctx context.Context, h *harness) Result {
			return withCalls(h, c.syncCalls, func() Result { return loop(clusterLoopSync, true)(ctx, h) })
		})},
		{ids: []string{clusterKVSync}, fn: func(ctx context.Context, h *harness) []Result {
			return withCalls(h, c.syncCalls, func() []Result { return kv(clusterKVSync, true)(ctx, h) })
		}},
		{ids: []string{clusterFailover}, fn: one(func(ctx context.Context, h *harness) Result { return h.runFailover(ctx, false) })},
		{ids: []string{clusterCrash}, fn: one(func(ctx context.Context, h *harness) Result { return h.runFailover(ctx, true) })},
	}
}

// failoverRun is what the failover measurement saw: each kill, and every call
// of the load that ran through them.
type failoverRun struct {
	Kills []failoverKill `json:"kills"`
	// Calls made, by how they ended: an answer's kind, "no answer" (none within
	// failoverCallTimeout) or "error" (the call could not be published).
	Calls    int            `json:"calls"`
	Outcomes map[string]int `json:"outcomes"`
	// The check of effects: distinct keys called, bookings the demo airline
	// took, the dispatcher's own count of bodies entered, keys booked twice.
	DistinctKeys    int   `json:"distinct_keys"`
	Bookings        int   `json:"bookings"`
	BodiesEntered   int64 `json:"bodies_entered"`
	KeysBookedTwice int   `json:"keys_booked_twice"`
	// Errors is the first error of each kind of call that ended without an
	// answer.
	Errors map[string]string `json:"errors,omitempty"`
}

// failoverKill is one kill of the KV stream's leader.
type failoverKill struct {
	Node string `json:"node"`
	// AlsoHeld lists what else the node led or served when it was killed: the
	// calls and events streams, the executors' consumer, the executor's or the
	// client's connection.
	AlsoHeld []string `json:"also_held,omitempty"`
	// PauseMs is from the kill to the first answer to a call made after it;
	// CompletedMs to the first such answer that completed a new key (its claim
	// and record written through the new leader). Zero: none came in time.
	PauseMs     float64 `json:"pause_ms"`
	CompletedMs float64 `json:"completed_ms"`
	NewLeader   string  `json:"new_leader"`
	// KVLeaderMs and ConsumerLeaderMs are from the kill until another node
	// led the KV stream and the executors' consumer, as the nodes themselves
	// say (polled every 2 ms); zero: not measured.
	KVLeaderMs       float64 `json:"kv_leader_ms"`
	ConsumerLeaderMs float64 `json:"consumer_leader_ms"`
	// LedAgainMs is from the kill until every raft group the node led (the KV
	// stream, and any of the calls and events streams and the consumer) had a
	// leader on another node; zero: one had none in time.
	LedAgainMs float64 `json:"led_again_ms"`
	// Warnings counts the executor's warnings, by message, from the kill
	// until the cluster was current again.
	Warnings map[string]int `json:"warnings,omitempty"`
	// CatchUpMs is from restarting the node until every node was current again.
	CatchUpMs float64 `json:"catch_up_ms"`
	// Outcomes counts the calls that ended from the kill until the cluster was
	// current again, by how they ended.
	Outcomes map[string]int `json:"outcomes"`
	Err      string         `json:"error,omitempty"`
}

// pauses returns the kills' pauses in milliseconds, those measured only.
func (f *failoverRun) pauses() []float64 {
	var ps []float64
	for _, k := range f.Kills {
		if k.PauseMs > 0 {
			ps = append(ps, k.PauseMs)
		}
	}
	return ps
}

// runFailover measures the failover pause: toolexec with the JetStream KV
// store on a three-node cluster (lazy fsync) serves a steady closed-loop load;
// the KV stream's leader is killed (stopped gracefully, or crashed: see
// natsCluster.crash), the pause is the time from the kill to the first answer
// to a call made after it; the node is then restarted on its ports with its
// store directory, the cluster waited for until every node is current, and
// the load let run steadily again before the next kill.
func (h *harness) runFailover(ctx context.Context, crash bool) Result {
	r := Result{ID: clusterFailover, Group: groupCluster, Name: "failover: stop the KV stream's leader under load",
		Concurrency: h.cfg.concurrency, Duplicates: h.cfg.duplicates}
	if crash {
		r.ID, r.Name = clusterCrash, "failover: crash the KV stream's leader under load"
	}
	warnings := &warnRecorder{}
	ex, durability, err := h.startExecutor(ctx, toolexecConfig{id: r.ID, store: "jetstream", cluster: true, linked: crash, logger: slog.New(warnings)})
	if err != nil {
		return failed(r, err)
	}
	defer ex.close()
	r.Durability = durability
	nc, err := nats.Connect(ex.env.url, nats.Name("bench-failover-client"), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		return failed(r, err)
	}
	defer nc.Close()
	client, err := toolexec.NewClient(nc)
	if err != nil {
		return failed(r, err)
	}
	load := &failoverLoad{client: client, dup: h.cfg.duplicates, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))}
	bodies0 := ex.d.Stats().BodiesEntered.Load()
	began := time.Now()
	loadCtx, stopLoad := context.WithCancel(ctx)
	var callers sync.WaitGroup
	for range h.cfg.concurrency {
		callers.Go(func() { load.caller(loadCtx) })
	}
	run := &failoverRun{}
	killErr := func() error {
		for range failoverKills {
			if err := load.waitFlowing(ctx, failoverSteady); err != nil {
				return err
			}
			k := killKVLeader(ctx, ex, nc, load, warnings, crash)
			run.Kills = append(run.Kills, k)
			if k.Err != "" {
				return errors.New(k.Err)
			}
		}
		return nil
	}()
	stopLoad()
	callers.Wait()
	r.rate(load.calls(), time.Since(began))
	load.fill(run, ex)
	run.BodiesEntered = ex.d.Stats().BodiesEntered.Load() - bodies0
	r.Failover = run
	if ps := run.pauses(); len(ps) > 0 {
		r.P50, r.Max = percentile(durations(ps), 0.5), percentile(durations(ps), 1)
	}
	r.CheckOK = killErr == nil && run.KeysBookedTwice == 0 && int64(run.Bookings) == run.BodiesEntered
	r.Check = fmt.Sprintf("%d kills; %d calls (%s); bookings %d, distinct keys %d, keys booked twice %d; executor's own count of bodies entered: %d",
		len(run.Kills), run.Calls, outcomeList(run.Outcomes), run.Bookings, run.DistinctKeys, run.KeysBookedTwice, run.BodiesEntered)
	if killErr != nil {
		return failed(r, killErr)
	}
	return r
}

// durations turns milliseconds back into durations, for percentile.
func durations(ms []float64) []time.Duration {
	ds := make([]time.Duration, len(ms))
	for i, m := range ms {
		ds[i] = time.Duration(m * float64(time.Millisecond))
	}
	return ds
}

// killKVLeader kills the node leading the KV bucket's stream (crashes it when
// crash is set), waits for the first answers after the kill, restarts the node
// and waits until the cluster is current again.
func killKVLeader(ctx context.Context, ex *executor, client *nats.Conn, load *failoverLoad, warnings *warnRecorder, crash bool) (k failoverKill) {
	leaders, err := clusterLeaders(ctx, ex.js)
	if err != nil {
		k.Err = err.Error()
		return k
	}
	k.Node = leaders[kvStream]
	node := ex.env.cluster.node(k.Node)
	if node == nil {
		k.Err = fmt.Sprintf("the KV stream's leader %q is not a node of the cluster", k.Node)
		return k
	}
	k.AlsoHeld = alsoHeld(k.Node, leaders, ex.js.Conn(), client)
	before := load.outcomeCounts()
	killed := time.Now()
	defer func() {
		k.Outcomes = diffCounts(load.outcomeCounts(), before)
		k.Warnings = warnings.since(killed)
	}()
	anyAnswer, completed := load.watchFrom(killed)
	consumerLeader := ex.env.cluster.leaderOf(wire.CallStream, bus.DefaultDurable)
	if crash {
		ex.env.cluster.crash(node)
	} else {
		node.kill()
	}
	var (
		elections sync.WaitGroup
		mu        sync.Mutex // protects k's leader times while the elections run
	)
	elect := func(stream, consumer string, into *float64) {
		elections.Go(func() {
			d := ms(ex.env.cluster.timeToLeader(killed, k.Node, stream, consumer, failoverWait))
			mu.Lock()
			defer mu.Unlock()
			if into != nil {
				*into = d
			}
			if d == 0 || k.LedAgainMs < 0 {
				k.LedAgainMs = -1 // one group found no leader in time
			} else {
				k.LedAgainMs = max(k.LedAgainMs, d)
			}
		})
	}
	elect(kvStream, "", &k.KVLeaderMs)
	for _, stream := range []string{wire.CallStream, wire.EventStream} {
		if leaders[stream] == k.Node {
			elect(stream, "", nil)
		}
	}
	if consumerLeader == k.Node {
		elect(wire.CallStream, bus.DefaultDurable, &k.ConsumerLeaderMs)
	}
	defer func() {
		elections.Wait()
		if k.LedAgainMs < 0 {
			k.LedAgainMs = 0
		}
	}()
	for anyAnswer != nil || completed != nil {
		select {
		case t := <-anyAnswer:
			k.PauseMs, anyAnswer = ms(t.Sub(killed)), nil
		case t := <-completed:
			k.CompletedMs, completed = ms(t.Sub(killed)), nil
		case <-time.After(failoverWait - time.Since(killed)):
			k.Err = fmt.Sprintf("no answer within %v of killing %s", failoverWait, k.Node)
			anyAnswer, completed = nil, nil
		case <-ctx.Done():
			k.Err = ctx.Err().Error()
			return k
		}
	}
	if now, err := clusterLeaders(ctx, ex.js); err == nil {
		k.NewLeader = now[kvStream]
	}
	restarted := time.Now()
	ex.env.cluster.heal()
	if err := node.start(); err != nil {
		k.Err = fmt.Sprintf("restarting %s: %v", k.Node, err)
		return k
	}
	if err := ex.env.cluster.waitCurrent(clusterCurrentMax); err != nil && k.Err == "" {
		k.Err = fmt.Sprintf("after restarting %s: %v", k.Node, err)
	}
	k.CatchUpMs = ms(time.Since(restarted))
	return k
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// kvStream is the stream of natsstore's bucket.
const kvStream = "KV_" + natsstore.DefaultBucket

// clusterLeaders returns the leaders of the KV stream, the calls and events
// streams and the executors' consumer, by what it leads.
func clusterLeaders(ctx context.Context, js jetstream.JetStream) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out := map[string]string{}
	for _, name := range []string{kvStream, wire.CallStream, wire.EventStream} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, err)
		}
		if ci := s.CachedInfo().Cluster; ci != nil {
			out[name] = ci.Leader
		}
	}
	c, err := js.Consumer(ctx, wire.CallStream, bus.DefaultDurable)
	if err != nil {
		return nil, fmt.Errorf("consumer %s: %w", bus.DefaultDurable, err)
	}
	if ci := c.CachedInfo().Cluster; ci != nil {
		out["consumer"] = ci.Leader
	}
	if out[kvStream] == "" {
		return nil, fmt.Errorf("stream %s has no leader", kvStream)
	}
	return out, nil
}

// alsoHeld lists what node led besides the KV stream, and the connections it
// served.
func alsoHeld(node string, leaders map[string]string, executor, client *nats.Conn) []string {
	var held []string
	for _, what := range []string{wire.CallStream, wire.EventStream, "consumer"} {
		if leaders[what] == node {
			held = append(held, what)
		}
	}
	if executor.ConnectedServerName() == node {
		held = append(held, "executor's connection")
	}
	if client.ConnectedServerName() == node {
		held = append(held, "client's connection")
	}
	return held
}

// failoverLoad is the closed loop that runs through the kills: callers each
// call book and wait for its answer before the next call, a share of the calls
// repeating an earlier call's key.
type failoverLoad struct {
	client *toolexec.Client
	dup    float64

	mu       sync.Mutex // protects rng, keys, outcomes, firstErr, done
	rng      *rand.Rand
	keys     int               // distinct key numbers handed out: 0..keys-1
	outcomes map[string]int    // how calls ended
	firstErr map[string]string // the first error of each kind without an answer
	done     int               // calls ended

	answers atomic.Int64
	watch   atomic.Pointer[answerWatch]
}

// answerWatch wants the time of the first answer to a call made after after,
// and of the first such answer that completed.
type answerWatch struct {
	after     time.Time
	anyAnswer chan time.Time
	completed chan time.Time
}

// watchFrom starts watching for the first answers to calls made from t on.
func (l *failoverLoad) watchFrom(t time.Time) (anyAnswer, completed <-chan time.Time) {
	w := &answerWatch{after: t, anyAnswer: make(chan time.Time, 1), completed: make(chan time.Time, 1)}
	l.watch.Store(w)
	return w.anyAnswer, w.completed
}

// nextKey returns the key number of the next call: an earlier one with
// probability dup, else a new one.
func (l *failoverLoad) nextKey() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys > 0 && l.rng.Float64() < l.dup {
		return l.rng.IntN(l.keys)
	}
	l.keys++
	return l.keys - 1
}

// caller makes calls one after another until ctx ends.
func (l *failoverLoad) caller(ctx context.Context) {
	var n int
	for ctx.Err() == nil {
		key := l.nextKey()
		n++
		args := fmt.Appendf(nil, `{"flight":%q,"seats":1,"request_id":"r%d-%d"}`, flightOf(key), key, n)
		start := time.Now()
		// The call's own deadline, not ctx: a call made is waited for.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failoverCallTimeout)
		res, err := l.client.Call(cctx, "bench", benchTool, json.RawMessage(args))
		cancel()
		l.ended(start, time.Now(), res, err)
	}
}

// ended files how a call ended and tells the watch, if any.
func (l *failoverLoad) ended(start, end time.Time, res *events.Answer, err error) {
	how := "error"
	switch {
	case res != nil:
		how = string(res.Kind)
	case errors.Is(err, events.ErrNoAnswer):
		how = "no answer"
	}
	l.mu.Lock()
	if l.outcomes == nil {
		l.outcomes, l.firstErr = map[string]int{}, map[string]string{}
	}
	l.outcomes[how]++
	if _, seen := l.firstErr[how]; res == nil && !seen {
		l.firstErr[how] = err.Error()
	}
	l.done++
	l.mu.Unlock()
	if res == nil {
		return
	}
	l.answers.Add(1)
	if w := l.watch.Load(); w != nil && !start.Before(w.after) {
		notify(w.anyAnswer, end)
		if res.Kind == events.KindCompleted {
			notify(w.completed, end)
		}
	}
}

// notify sends t on ch unless it already holds a time.
func notify(ch chan time.Time, t time.Time) {
	select {
	case ch <- t:
	default:
	}
}

// outcomeCounts returns how the calls ended so far.
func (l *failoverLoad) outcomeCounts() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.outcomes)
}

// diffCounts returns b's counts less a's, those that grew only.
func diffCounts(b, a map[string]int) map[string]int {
	out := map[string]int{}
	for k, n := range b {
		if d := n - a[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// calls is how many calls have ended.
func (l *failoverLoad) calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// waitFlowing lets the load run for d and checks that answers came during it.
func (l *failoverLoad) waitFlowing(ctx context.Context, d time.Duration) error {
	before := l.answers.Load()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return ctx.Err()
	}
	if l.answers.Load() == before {
		return fmt.Errorf("no answers for %v before a kill", d)
	}
	return nil
}

// fill counts the calls and checks the airline's bookings by key: one per key
// whose body ran, never two.
func (l *failoverLoad) fill(run *failoverRun, ex *executor) {
	l.mu.Lock()
	defer l.mu.Unlock()
	run.Calls, run.DistinctKeys = l.done, l.keys
	run.Outcomes, run.Errors = maps.Clone(l.outcomes), maps.Clone(l.firstErr)
	for k := range l.keys {
		n := ex.airline.Bookings(flightOf(k))
		run.Bookings += n
		if n > 1 {
			run.KeysBookedTwice++
		}
	}
}

// outcomeList prints how calls ended, answers first, in a fixed order.
func outcomeList(m map[string]int) string {
	order := []string{"completed", "deduplicated", "indeterminate", "failed", "rejected", "no answer", "error"}
	var parts []string
	for _, k := range order {
		if n := m[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	for k, n := range m {
		if !slices.Contains(order, k) {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}

// flightAlphabet makes the two leading characters of the failover's flight
// numbers, as the demo's schema allows them.
const flightAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// flightOf is the flight number of key number k: two characters and one to
// four digits, distinct for every k below 36 × 36 × 9999.
func flightOf(k int) string {
	const digits = 9999
	hi := k / digits
	return string(flightAlphabet[hi/len(flightAlphabet)%len(flightAlphabet)]) + string(flightAlphabet[hi%len(flightAlphabet)]) +
		strconv.Itoa(k%digits+1)
}

// warnRecorder is a slog.Handler that keeps the time and message of every
// warning and error, so that the failover can say what the executor reported
// during each kill.
type warnRecorder struct {
	mu   sync.Mutex // protects logs
	logs []loggedWarning
}

// loggedWarning is one warning kept by warnRecorder.
type loggedWarning struct {
	at  time.Time
	msg string
}

// Enabled keeps warnings and errors only.
func (w *warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

// Handle keeps the record's time and message.
func (w *warnRecorder) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	w.logs = append(w.logs, loggedWarning{at: r.Time, msg: r.Message})
	w.mu.Unlock()
	return nil
}

// WithAttrs drops the attributes: only messages are counted.
func (w *warnRecorder) WithAttrs([]slog.Attr) slog.Handler { return w }

// WithGroup drops the group: only messages are counted.
func (w *warnRecorder) WithGroup(string) slog.Handler { return w }

// since counts the messages kept from t on.
func (w *warnRecorder) since(t time.Time) map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out map[string]int
	for _, l := range w.logs {
		if l.at.Before(t) {
			continue
		}
		if out == nil {
			out = map[string]int{}
		}
		out[l.msg]++
	}
	return out
}
