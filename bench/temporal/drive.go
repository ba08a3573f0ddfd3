package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
)

// taskQueue is the task queue the worker polls.
const taskQueue = "toolexec-bench"

// caller makes the calls: one workflow per call, its id the idempotency key.
type caller struct {
	c          client.Client
	eagerStart bool
	refused    atomic.Int64 // duplicates whose first run had finished
}

// call starts the workflow of key, or finds the one already started, and
// waits for its answer. A running workflow with the same id is attached to
// (conflict policy use-existing); a finished one is not started again (reuse
// policy reject-duplicate) and its answer is read from that first run.
func (cl *caller) call(ctx context.Context, key string) (string, error) {
	opts := client.StartWorkflowOptions{
		ID:                                       key,
		TaskQueue:                                taskQueue,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		EnableEagerStart:                         cl.eagerStart,
	}
	run, err := cl.c.ExecuteWorkflow(ctx, opts, CallWorkflow, key)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	switch {
	case errors.As(err, &started):
		cl.refused.Add(1)
		run = cl.c.GetWorkflow(ctx, key, "")
	case err != nil:
		return "", fmt.Errorf("starting workflow %s: %w", key, err)
	}
	var answer string
	if err := run.Get(ctx, &answer); err != nil {
		return "", fmt.Errorf("waiting for workflow %s: %w", key, err)
	}
	return answer, nil
}

// outcome is what one closed-loop run measured.
type outcome struct {
	answered, wrong int
	elapsed         time.Duration
	lat             []time.Duration
}

// drive makes the calls of plan (key numbers) with conc callers, each waiting
// for its call's answer before the next (closed loop).
func (cl *caller) drive(ctx context.Context, tag string, plan []int, conc int) (outcome, error) {
	var next, answered, wrong atomic.Int64
	var firstErr atomic.Value
	var mu sync.Mutex // protects lat
	lat := make([]time.Duration, 0, len(plan))
	start := time.Now()
	var wg sync.WaitGroup
	for range min(conc, len(plan)) {
		wg.Go(func() {
			for ctx.Err() == nil && firstErr.Load() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(plan) {
					return
				}
				key := tag + "-" + strconv.Itoa(plan[i])
				t0 := time.Now()
				answer, err := cl.call(ctx, key)
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
				answered.Add(1)
				if answer != answerFor(key) {
					wrong.Add(1)
				}
			}
		})
	}
	wg.Wait()
	o := outcome{answered: int(answered.Load()), wrong: int(wrong.Load()), elapsed: time.Since(start), lat: lat}
	if err, ok := firstErr.Load().(error); ok {
		return o, err
	}
	return o, ctx.Err()
}
