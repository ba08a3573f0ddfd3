// Package clienttest gives the tests of the executors' side a toolexec.Client
// that takes each call whole, as the events.Call value a worker decodes, and
// returns every answer with a nil error, whatever its kind: those tests build
// calls as values and look at answers of every kind.
//
// Only tests import this package; production code must not.
package clienttest

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// Client is a toolexec.Client whose Call, Publish, Attach and Find take and
// return calls and answers as values; its other methods are toolexec.Client's.
type Client struct{ *toolexec.Client }

// New returns a client on nc made with opts, logging to testenv.Logger unless
// opts say otherwise. It fails the test if the client cannot be made.
func New(t testing.TB, nc *nats.Conn, opts ...toolexec.ClientOption) Client {
	t.Helper()
	c, err := toolexec.NewClient(nc, append([]toolexec.ClientOption{toolexec.WithLogger(testenv.Logger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return Client{c}
}

// Options are the options that publish c: its run, its id (a possible repeat
// when c.Repeat says so, else fresh), its trace context and what it can
// answer. The source is the client's.
func Options(c events.Call) []toolexec.CallOption {
	id := toolexec.WithFreshCallID(c.CallID)
	if c.Repeat {
		id = toolexec.WithCallID(c.CallID)
	}
	return []toolexec.CallOption{id, toolexec.WithRunID(c.RunID), toolexec.WithTraceParent(c.TraceParent, c.TraceState),
		toolexec.WithInteractions(c.Interactions...)}
}

// Call makes call and returns its answer, whatever its kind; the error is that
// of a call without an answer.
func (c Client) Call(ctx context.Context, call events.Call) (events.Answer, error) {
	return answerOrError(c.Client.Call(ctx, call.Tenant, call.Tool, call.Arguments, Options(call)...))
}

// Publish publishes call without waiting for its answer.
func (c Client) Publish(ctx context.Context, call events.Call) (*toolexec.Receipt, error) {
	return c.Client.Publish(ctx, call.Tenant, call.Tool, call.Arguments, Options(call)...)
}

// Attach waits for the answer to the call named, and returns it whatever its
// kind; the error is that of an attach without an answer.
func (c Client) Attach(ctx context.Context, tenant, tool, runID, callID string) (events.Answer, error) {
	return answerOrError(c.Client.Attach(ctx, tenant, tool, runID, callID))
}

// Find looks once for the answer to tenant's call callID, whatever its kind;
// found is false when none is stored.
func (c Client) Find(ctx context.Context, tenant, callID string) (a events.Answer, found bool, err error) {
	p, err := c.Client.Find(ctx, tenant, callID)
	if p == nil {
		return events.Answer{}, false, err
	}
	return *p, true, nil
}

// answerOrError returns the answer a with a nil error, or, without an answer,
// err.
func answerOrError(a *events.Answer, err error) (events.Answer, error) {
	if a == nil {
		return events.Answer{}, err
	}
	return *a, nil
}
