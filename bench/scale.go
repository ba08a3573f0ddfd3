package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// scaleExecutors are the executor counts of the scale-out rows.
var scaleExecutors = []int{1, 2, 4}

// scaleID names the scale-out row with n executors.
func scaleID(n int) string { return "scale-" + strconv.Itoa(n) }

// runScale measures toolexec with n executor processes (the cmd/executor
// binary, JetStream KV store) sharing one NATS server, embedded in this
// process with lazy fsync: a warm-up, then a run of emitter bench. The check
// adds up the executors' own counts of bodies entered.
func (h *harness) runScale(ctx context.Context, n int) Result {
	id := scaleID(n)
	r := Result{ID: id, Group: groupScale, Name: fmt.Sprintf("toolexec, %d executor processes, JetStream KV store", n),
		Concurrency: h.cfg.concurrency, Duplicates: h.cfg.duplicates}
	env, err := h.startNATS(id, false)
	if err != nil {
		return failed(r, err)
	}
	defer env.stop()
	r.Durability = env.fsyncName()
	var procs []*execProc
	defer func() { stopAll(procs) }()
	for i := range n {
		p, err := h.startExecutorProc(ctx, fmt.Sprintf("%s-%d", id, i+1), "--nats-url", env.url, "--store", "jetstream")
		if err != nil {
			return failed(r, fmt.Errorf("executor %d: %w", i+1, err))
		}
		procs = append(procs, p)
	}
	if h.cfg.warmup > 0 {
		if _, err := h.emit(ctx, env.url, benchTool, h.cfg.warmup, h.cfg.concurrency, 0); err != nil {
			return failed(r, fmt.Errorf("warm-up: %w", err))
		}
	}
	before, err := bodiesByExecutor(ctx, procs)
	if err != nil {
		return failed(r, err)
	}
	rep, err := h.emit(ctx, env.url, benchTool, h.cfg.calls, h.cfg.concurrency, h.cfg.duplicates)
	if err != nil {
		return failed(r, err)
	}
	after, err := bodiesByExecutor(ctx, procs)
	if err != nil {
		return failed(r, err)
	}
	var own int64
	counts := make([]string, n)
	for i := range after {
		d := after[i] - before[i]
		own += d
		counts[i] = strconv.FormatInt(d, 10)
	}
	r.rate(rep.Answered, time.Duration(rep.ElapsedSeconds*float64(time.Second)))
	r.P50, r.P99, r.Max = rep.Latency.P50, rep.Latency.P99, rep.Latency.Max
	r.CheckOK = rep.Check.OK && own == int64(rep.DistinctKeys) && rep.Answered == h.cfg.calls
	r.Check = fmt.Sprintf("%d of %d answered (%s); emitter: %s; executors' own counts of bodies entered: %s = %d",
		rep.Answered, h.cfg.calls, kinds(rep.Answers), rep.Check.Verdict, strings.Join(counts, " + "), own)
	return r
}

// bodiesByExecutor reads each executor's own count of bodies entered.
func bodiesByExecutor(ctx context.Context, procs []*execProc) ([]int64, error) {
	out := make([]int64, len(procs))
	for i, p := range procs {
		m, err := p.metrics(ctx)
		if err != nil {
			return nil, fmt.Errorf("executor %d: %w", i+1, err)
		}
		out[i] = m.bodiesEntered()
	}
	return out, nil
}

// stopAll stops the executors at once.
func stopAll(procs []*execProc) {
	done := make(chan struct{}, len(procs))
	for _, p := range procs {
		go func() { p.stop(); done <- struct{}{} }()
	}
	for range procs {
		<-done
	}
}
