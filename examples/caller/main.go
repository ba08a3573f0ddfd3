// Command caller is the smallest complete toolexec caller: it books a seat
// through a running executor (bin/executor --demo, as the README's "Run it
// yourself" starts it) and tells an outcome nobody knows apart from an answer.
// It connects to NATS_URL, or to nats://127.0.0.1:4222 when that is unset.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/events"
)

func main() {
	nc, err := nats.Connect(os.Getenv("NATS_URL")) // "": nats://127.0.0.1:4222
	if err != nil {
		log.Fatal(err)
	}
	c, err := toolexec.NewClient(nc, toolexec.WithDefaultRunID("run_1"))
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Call(context.Background(), "acme", "book", map[string]any{"flight": "BA117", "seats": 1, "request_id": "a"})
	var unknown *events.IndeterminateOutcomeError
	if errors.As(err, &unknown) {
		fmt.Println("nobody knows whether it booked; an operator settles key", unknown.Key)
		os.Exit(4)
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Kind, res.Outcome)
}
