package main

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/workflow"
)

// effects counts the activity's executions, by key: the row's check.
type effects struct {
	mu      sync.Mutex // protects entered
	entered map[string]int
	total   atomic.Int64
}

// Effect is the activity: a no-op that counts itself and answers.
func (e *effects) Effect(_ context.Context, key string) (string, error) {
	e.mu.Lock()
	e.entered[key]++
	e.mu.Unlock()
	e.total.Add(1)
	return answerFor(key), nil
}

// reset forgets the counts of the warm-up.
func (e *effects) reset() {
	e.mu.Lock()
	clear(e.entered)
	e.mu.Unlock()
	e.total.Store(0)
}

// twice is the number of keys whose effect ran more than once.
func (e *effects) twice() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.entered {
		if c > 1 {
			n++
		}
	}
	return n
}

// answerFor is the answer a call with key expects.
func answerFor(key string) string { return "done " + key }

// activityName is the name the effect activity is registered under.
const activityName = "Effect"

// CallWorkflow runs the effect once as an activity and returns its answer.
func CallWorkflow(ctx workflow.Context, key string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
	var answer string
	err := workflow.ExecuteActivity(ctx, activityName, key).Get(ctx, &answer)
	return answer, err
}
