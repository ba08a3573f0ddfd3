// Command caller is the smallest complete toolexec caller: it books a seat
// through a running executor (go run ./cmd/executor --demo) and tells an
// outcome nobody knows apart from an answer.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
)

func main() {
	nc, err := nats.Connect(os.Getenv("NATS_URL")) // "": nats://127.0.0.1:4222
	if err != nil {
		log.Fatal(err)
	}
	c, _ := toolexec.NewClient(nc, toolexec.WithDefaultRunID("run_1"))
	res, err := c.Call(context.Background(), "acme", "book", map[string]any{"flight": "BA117", "seats": 1, "request_id": "a"})
	var unknown *toolexec.IndeterminateOutcomeError
	if errors.As(err, &unknown) {
		fmt.Println("nobody knows whether it booked; an operator settles key", unknown.Key)
		os.Exit(4)
	} else if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Kind, res.Outcome)
}
