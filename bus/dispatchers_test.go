package bus_test

import (
	"context"
	"fmt"

	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
)

// runnerFunc answers every call with fn.
type runnerFunc func(ctx context.Context) (dispatch.Result, error)

func (f runnerFunc) Run(ctx context.Context, _ events.Call) (dispatch.Result, error) {
	return f(ctx)
}

// callRunnerFunc is a dispatch.Runner made of a function.
type callRunnerFunc func(ctx context.Context, c events.Call) (dispatch.Result, error)

func (f callRunnerFunc) Run(ctx context.Context, c events.Call) (dispatch.Result, error) {
	return f(ctx, c)
}

var errNoAnswer = fmt.Errorf("%w: test", dispatch.ErrHandBack)
