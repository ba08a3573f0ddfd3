package httptool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/httptool"
)

func Example() {
	airline := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Idempotency-Key") == "" {
			http.Error(w, "an Idempotency-Key is required", http.StatusPreconditionRequired)
			return
		}
		fmt.Fprintf(w, "booked %s", body)
	}))
	defer airline.Close()

	book, err := httptool.New(tool.Spec{
		Name:        "book",
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}},
		Parameters:  json.RawMessage(`{"type":"object","properties":{"flight":{"type":"string"}}}`),
	}, httptool.Endpoint{URL: airline.URL + "/bookings"})
	if err != nil {
		panic(err)
	}
	args := json.RawMessage(`{"flight":"BA117"}`)

	out, err := book.Call(context.Background(), tool.Context{IdempotencyKey: "4f1c…", Tool: "book", Attempt: 1}, args)
	fmt.Println(out, err)

	// Without a key the downstream refuses before acting: a failure without effect.
	_, err = book.Call(context.Background(), tool.Context{Tool: "book", Attempt: 1}, args)
	fmt.Println(tool.IsNoEffect(err))
	// Output:
	// booked {"flight":"BA117"} <nil>
	// true
}
