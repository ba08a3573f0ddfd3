package mcpgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/mcpgate"
	"github.com/tesserix/toolexec/tool"
)

// BenchmarkCallLatency measures what the MCP gateway adds to a call, at one
// call in flight: the same effectful tool (a fresh key each call, so every
// call claims, runs and records) called directly with toolexec.Client, and
// through the gateway over Streamable HTTP and over stdio, on one embedded
// server and executor. Each reports its p50 and p99 in microseconds; compare
// them within one run:
//
//	go test -run '^$' -bench CallLatency -benchtime 2000x ./mcpgate
func BenchmarkCallLatency(b *testing.B) {
	srv := natstest.Start(b)
	note, err := tool.New(tool.Spec{
		Name: "note", Parameters: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"n"}},
	}, func(context.Context, tool.Context, json.RawMessage) (string, error) { return "noted", nil })
	if err != nil {
		b.Fatal(err)
	}
	ctx := testenv.Context(b, time.Hour)
	ex, err := toolexec.NewExecutor(ctx, natstest.Connect(b, srv), toolexec.ExecutorConfig{Tools: []*tool.Tool{note}, Logger: testenv.Logger()})
	if err != nil {
		b.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ex.Run(runCtx) }()
	b.Cleanup(func() { stop(); <-done; ex.Close() })

	direct, err := toolexec.NewClient(natstest.Connect(b, srv))
	if err != nil {
		b.Fatal(err)
	}
	gw, err := mcpgate.New(natstest.Connect(b, srv), mcpgate.Config{Logger: testenv.Logger()})
	if err != nil {
		b.Fatal(err)
	}
	overHTTP := connectHTTP(b, serveHTTP(b, gw, mcpgate.HTTPConfig{Tenant: "acme"}).URL, "", nil)
	overStdio := connectStdio(b, gw, "acme", nil)

	n := 0
	mcpCall := func(cs *mcp.ClientSession) func() error {
		return func() error {
			n++
			r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "note", Arguments: map[string]any{"n": n}})
			if err == nil && (r.IsError || r.Meta[mcpgate.MetaKind] != "completed") {
				err = fmt.Errorf("answer %v", r.Meta)
			}
			return err
		}
	}
	for _, mode := range []struct {
		name string
		call func() error
	}{
		{"direct", func() error {
			n++
			_, err := direct.Call(ctx, "acme", "note", map[string]any{"n": n})
			return err
		}},
		{"mcp-http", mcpCall(overHTTP)},
		{"mcp-stdio", mcpCall(overStdio)},
	} {
		b.Run(mode.name, func(b *testing.B) {
			took := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if err := mode.call(); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(took[len(took)*99/100].Microseconds()), "p99-µs")
		})
	}
}
