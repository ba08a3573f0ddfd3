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

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus/embedded"
	"github.com/tesserix/toolexec/events"
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
	nc, err := nats.Connect("", nats.InProcessServer(srv))
	if err != nil {
		return err
	}
	defer nc.Close()

	// The executor: the streams, the JetStream KV store, the dispatcher and a
	// worker, with the defaults cmd/executor uses.
	ex, err := toolexec.NewExecutor(ctx, nc, toolexec.ExecutorConfig{Tools: []*tool.Tool{book}, Holder: "example", Logger: quiet})
	if err != nil {
		return err
	}
	defer ex.Close()
	runCtx, stop := context.WithCancel(ctx)
	stopped := make(chan error, 1)
	go func() { stopped <- ex.Run(runCtx) }()
	defer func() { stop(); <-stopped }()

	// The agent's side: publish each call and wait for its answer.
	client, err := toolexec.NewClient(nc, toolexec.WithSource("/agents/example"), toolexec.WithDefaultRunID("run_1"))
	if err != nil {
		return err
	}
	calls := []struct {
		what, callID, args string
	}{
		{"book BA117", "call_1", `{"flight":"BA117","request_id":"a"}`},
		{"retry with a new request_id", "call_2", `{"flight":"BA117","request_id":"b"}`},
		{"book BA999 (answer lost)", "call_3", `{"flight":"BA999","request_id":"c"}`},
		{"retry BA999", "call_4", `{"flight":"BA999","request_id":"d"}`},
	}
	for _, c := range calls {
		res, err := client.Call(ctx, "acme", "book", []byte(c.args), toolexec.WithCallID(c.callID))
		var ie *events.IndeterminateOutcomeError
		switch {
		case errors.As(err, &ie):
			fmt.Fprintf(w, "%-30s → TOOL_INDETERMINATE (%s)\n", c.what, ie.Reason)
			fmt.Fprintf(w, "%-30s   IndeterminateOutcomeError: tool=%s reason=%s body_entered=%t\n", "", ie.Tool, ie.Reason, ie.BodyEntered)
		case err != nil:
			return err
		default:
			fmt.Fprintf(w, "%-30s → %s\n", c.what, describe(res))
		}
	}
	fmt.Fprintf(w, "seats taken: BA117=%d BA999=%d\n", air.taken("BA117"), air.taken("BA999"))
	return nil
}

func describe(r *events.Answer) string {
	if r.Kind == events.KindDeduplicated {
		return "TOOL_DEDUPLICATED: " + r.Outcome
	}
	return "completed: " + r.Outcome
}
