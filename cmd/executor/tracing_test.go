package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/otlptest"
)

// otelVars are the variables these tests set; each test starts with all of
// them empty, so that the machine's environment does not leak in.
var otelVars = []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_BSP_SCHEDULE_DELAY"}

// jsonLines parses the executor's JSON log lines.
func jsonLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		out = append(out, m)
	}
	return out
}

// linesOfCall returns the log lines that name call id.
func linesOfCall(lines []map[string]any, id string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["call_id"] == id {
			out = append(out, l)
		}
	}
	return out
}

// TestTracesOverOTLP: an executor configured by OTEL_* variables alone sends
// its calls' spans to an OTLP receiver over gRPC and over HTTP/protobuf, in
// the caller's trace, named for the service, without the arguments; and every
// log line about a traced call carries the trace_id and span_id of its
// toolexec.call span, a call without a traceparent (a trace the executor
// starts) included.
func TestTracesOverOTLP(t *testing.T) {
	for _, tt := range []struct {
		name string
		grpc bool
		env  map[string]string
	}{
		{"grpc", true, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}},
		{"http/protobuf", false, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, k := range otelVars {
				t.Setenv(k, "")
			}
			var rcv *otlptest.Receiver
			if tt.grpc {
				rcv = otlptest.StartGRPC(t)
			} else {
				rcv = otlptest.StartHTTP(t)
			}
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint)
			t.Setenv("OTEL_SERVICE_NAME", "booking-executor")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
			var logs syncBuffer
			url, stop := startExecutorLogging(t, &logs, "--demo", "--log-format", "json", "--log-level", "debug")
			c := client(t, url)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
			for _, cl := range []events.Call{
				{CallID: "c1", TraceParent: "00-" + trace + "-00f067aa0ba902b7-01",
					Arguments: json.RawMessage(`{"flight":"BA117","seats":1,"request_id":"` + argSentinel + `"}`)},
				{CallID: "c2", Arguments: json.RawMessage(`{"flight":"BA999","seats":1,"request_id":"r","fail_after_effect":true}`)},
			} {
				a, err := c.Call(ctx, "acme", "book", cl.Arguments, toolexec.WithFreshCallID(cl.CallID),
					toolexec.WithTraceParent(cl.TraceParent, ""))
				if a == nil {
					t.Fatalf("call %s: %v", cl.CallID, err)
				}
			}
			if err := stop(); err != nil { // shutting down sends the spans still buffered
				t.Fatal(err)
			}
			rcv.WaitFor(t, "toolexec.call", 5*time.Second)
			calls := map[string]otlptest.Span{}
			for _, s := range rcv.Spans() {
				for _, v := range s.Attrs {
					if strings.Contains(v, argSentinel) {
						t.Errorf("span %s holds the arguments: %v", s.Name, s.Attrs)
					}
				}
				if s.Name == "toolexec.call" {
					calls[s.Attrs["toolexec.call_id"]] = s
				}
			}
			if len(calls) != 2 {
				t.Fatalf("call spans %v; want c1 and c2", calls)
			}
			c1, c2 := calls["c1"], calls["c2"]
			if c1.TraceID != trace || c1.ParentID != "00f067aa0ba902b7" || c1.Attrs["toolexec.kind"] != "completed" {
				t.Errorf("c1's span %+v: want it in the caller's trace, under its span, completed", c1)
			}
			if c2.TraceID == trace || c2.ParentID != "" || c2.Attrs["toolexec.kind"] != "indeterminate" {
				t.Errorf("c2's span %+v: want a trace of its own, indeterminate", c2)
			}
			if c1.Resource["service.name"] != "booking-executor" {
				t.Errorf("resource %v", c1.Resource)
			}
			if bad := rcv.Bad(); len(bad) > 0 {
				t.Errorf("requests that were not trace exports: %q", bad)
			}

			lines := jsonLines(t, logs.String())
			for id, span := range calls {
				mine := linesOfCall(lines, id)
				if len(mine) == 0 {
					t.Errorf("no log line names call %s", id)
				}
				for _, l := range mine {
					if l["trace_id"] != span.TraceID || l["span_id"] != span.SpanID {
						t.Errorf("call %s logged %v; want trace_id %s span_id %s", id, l, span.TraceID, span.SpanID)
					}
				}
			}
			if !strings.Contains(logs.String(), `"exporter":"otlp (`+tt.name+`)"`) {
				t.Errorf("the start-up log does not name the exporter:\n%s", logs.String())
			}
		})
	}
}

// TestLogsNameTheCallersTraceWithoutTracing: with the executor's tracing off,
// the lines about a call that came with a traceparent still carry its trace
// and span ids, the caller's, so that they can be found from the caller's
// trace; a call without one gets none.
func TestLogsNameTheCallersTraceWithoutTracing(t *testing.T) {
	for _, k := range otelVars {
		t.Setenv(k, "")
	}
	var logs syncBuffer
	url, stop := startExecutorLogging(t, &logs, "--demo", "--log-format", "json", "--log-level", "debug")
	c := client(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const trace, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	for _, cl := range []events.Call{
		{CallID: "c1", TraceParent: "00-" + trace + "-" + parent + "-01"},
		{CallID: "c2"},
	} {
		args := json.RawMessage(`{"flight":"BA117","seats":1,"request_id":"r"}`)
		if a, err := c.Call(ctx, "acme", "book", args, toolexec.WithFreshCallID(cl.CallID), toolexec.WithTraceParent(cl.TraceParent, "")); a == nil {
			t.Fatalf("call %s: %v", cl.CallID, err)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	lines := jsonLines(t, logs.String())
	c1, c2 := linesOfCall(lines, "c1"), linesOfCall(lines, "c2")
	if len(c1) == 0 || len(c2) == 0 {
		t.Fatalf("lines of c1 %v, of c2 %v", c1, c2)
	}
	for _, l := range c1 {
		if l["trace_id"] != trace || l["span_id"] != parent {
			t.Errorf("c1 logged %v; want the caller's trace %s and span %s", l, trace, parent)
		}
	}
	for _, l := range c2 {
		if _, ok := l["trace_id"]; ok {
			t.Errorf("c2, untraced, logged %v", l)
		}
	}
}
