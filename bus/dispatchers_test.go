package bus_test

import (
	"context"
	"fmt"

	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
)

// dispatcherFunc answers every call with fn.
type dispatcherFunc func(ctx context.Context) (events.Answer, error)

func (f dispatcherFunc) Dispatch(ctx context.Context, _ events.Call) (events.Answer, error) {
	return f(ctx)
}

// dispatcherFuncCall is a Dispatcher made of a function.
type dispatcherFuncCall func(ctx context.Context, c events.Call) (events.Answer, error)

func (f dispatcherFuncCall) Dispatch(ctx context.Context, c events.Call) (events.Answer, error) {
	return f(ctx, c)
}

var errNoAnswer = fmt.Errorf("%w: test", dispatch.ErrHandBack)
