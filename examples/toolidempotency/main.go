// Command toolidempotency runs the three signals tool idempotency exists for: a
// booking that completes, its retry answered from the record (deduplicated), and a
// booking whose downstream timed out after acting (indeterminate).
//
// Everything runs over NATS JetStream, in one process: an embedded server (its
// data in a temporary directory), the JetStream KV store, an executor's worker,
// and a client that publishes each call as a CloudEvent and waits for its answer
// on the events stream.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/embedded"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/tool"
)

// bookArgs are the arguments of the book tool. request_id is fresh on every
// attempt, which is why it is not a key argument.
type bookArgs struct {
	Flight    string `json:"flight"`
	RequestID string `json:"request_id,omitempty"`
}

// airline is the downstream: it counts seats taken per flight.
type airline struct {
	mu    sync.Mutex // protects seats
	seats map[string]int
}

func (a *airline) book(flight string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seats[flight]++
	return a.seats[flight]
}

func (a *airline) taken(flight string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seats[flight]
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "toolidempotency:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	air := &airline{seats: map[string]int{}}
	book, err := tool.Typed(tool.Spec{
		Name:        "book",
		Description: "Take a seat.",
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}},
	}, func(_ context.Context, tc tool.Context, a bookArgs) (string, error) {
		n := air.book(a.Flight)
		if a.Flight == "BA999" {
			// The seat is taken, then the answer is lost: the caller cannot know.
			return "", errors.New("downstream timed out after the request was sent")
		}
		return fmt.Sprintf("PNR-%s-%d (key %s…)", a.Flight, n, tc.IdempotencyKey[:12]), nil
	})
	if err != nil {
		return err
	}
	tools, err := tool.NewRegistry(book)
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// NATS with JetStream, inside this process.
	dir, err := os.MkdirTemp("", "toolidempotency-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := embedded.Start(embedded.Config{StoreDir: dir, InProcess: true})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	nc, err := bus.Connect(bus.ConnectConfig{InProcess: srv, Logger: quiet})
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		return err
	}

	// The executor: the JetStream KV store, the dispatcher and a worker.
	store, err := natsstore.New(ctx, js, natsstore.Config{})
	if err != nil {
		return err
	}
	defer store.Close()
	d, err := dispatch.New(dispatch.Config{Tools: tools, Store: store, Holder: "example", Logger: quiet})
	if err != nil {
		return err
	}
	worker, err := bus.NewWorker(js, d, bus.WorkerConfig{Logger: quiet})
	if err != nil {
		return err
	}
	go func() { _ = worker.Run(ctx) }()
	defer func() { _ = worker.Shutdown(ctx) }()

	// The agent's side: publish each call and wait for its answer.
	client, err := bus.NewClient(js, bus.ClientConfig{Source: "/agents/example", Logger: quiet})
	if err != nil {
		return err
	}
	args := func(s string) []byte { return []byte(s) }
	calls := []struct {
		what string
		call events.Call
	}{
		{"book BA117", events.Call{Tenant: "acme", RunID: "run_1", CallID: "call_1", Tool: "book",
			Arguments: args(`{"flight":"BA117","request_id":"a"}`)}},
		{"retry with a new request_id", events.Call{Tenant: "acme", RunID: "run_1", CallID: "call_2", Tool: "book",
			Arguments: args(`{"flight":"BA117","request_id":"b"}`)}},
		{"book BA999 (answer lost)", events.Call{Tenant: "acme", RunID: "run_1", CallID: "call_3", Tool: "book",
			Arguments: args(`{"flight":"BA999","request_id":"c"}`)}},
		{"retry BA999", events.Call{Tenant: "acme", RunID: "run_1", CallID: "call_4", Tool: "book",
			Arguments: args(`{"flight":"BA999","request_id":"d"}`)}},
	}
	for _, c := range calls {
		a, err := client.Call(ctx, c.call)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-30s → %s\n", c.what, describe(a))
		var ie *dispatch.IndeterminateOutcomeError
		if errors.As(dispatch.AnswerError(a), &ie) {
			fmt.Fprintf(w, "%-30s   IndeterminateOutcomeError: tool=%s reason=%s body_entered=%t\n", "", ie.Tool, ie.Reason, ie.BodyEntered)
		}
	}
	fmt.Fprintf(w, "seats taken: BA117=%d BA999=%d\n", air.taken("BA117"), air.taken("BA999"))
	return nil
}

func describe(a events.Answer) string {
	switch a.Kind {
	case events.KindCompleted:
		return "completed: " + a.Outcome
	case events.KindDeduplicated:
		return "TOOL_DEDUPLICATED: " + a.Outcome
	case events.KindIndeterminate:
		return "TOOL_INDETERMINATE (" + string(a.Reason) + ")"
	}
	return string(a.Kind) + ": " + a.Error
}
