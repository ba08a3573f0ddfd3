package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tesserix/toolexec/internal/app/tracing"
)

// logLines parses JSON log lines.
func logLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// TestLogHandler: a record logged with a span's context carries that span's
// trace and span ids, at the top level even below groups; one logged without
// carries none.
func TestLogHandler(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("t").Start(context.Background(), "call")
	defer span.End()
	sc := span.SpanContext()

	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil)))
	log.InfoContext(ctx, "traced", "tool", "book")
	log.Info("untraced")
	log.With("component", "x").WithGroup("g").With("inner", 1).InfoContext(ctx, "grouped", "k", "v")
	log.InfoContext(trace.ContextWithRemoteSpanContext(context.Background(), sc), "remote parent")

	lines := logLines(t, &buf)
	if len(lines) != 4 {
		t.Fatalf("%d lines", len(lines))
	}
	for _, i := range []int{0, 2, 3} {
		if lines[i][tracing.LogTraceID] != sc.TraceID().String() || lines[i][tracing.LogSpanID] != sc.SpanID().String() {
			t.Errorf("line %d %v: want trace_id %s span_id %s", i, lines[i], sc.TraceID(), sc.SpanID())
		}
	}
	if _, ok := lines[1][tracing.LogTraceID]; ok {
		t.Errorf("an untraced line has a trace id: %v", lines[1])
	}
	g, _ := lines[2]["g"].(map[string]any)
	if lines[2]["component"] != "x" || g["inner"] != float64(1) || g["k"] != "v" || g[tracing.LogTraceID] != nil {
		t.Errorf("grouped line %v: attributes moved", lines[2])
	}
	if tracing.LogHandler(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))) == nil {
		t.Error("wrapping twice")
	}
}
