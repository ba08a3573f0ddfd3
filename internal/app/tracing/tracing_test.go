package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/app/tracing"
	"github.com/tesserix/toolexec/internal/testkit/otlptest"
)

// clearEnv unsets every variable Setup or the exporters read, for the test's
// duration.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
		t.Setenv(k, "")
	}
}

func setEnv(t *testing.T, env map[string]string) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
}

// TestOffByDefault: without OTEL_* variables, or with tracing switched off,
// nothing is exported and spans do not record.
func TestOffByDefault(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
	}{
		{"nothing set", nil},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1"}},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			setEnv(t, tt.env)
			p, err := tracing.Setup(context.Background(), tracing.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Enabled() || p.Exporter() != "" {
				t.Errorf("Enabled = %t, exporter %q; want off", p.Enabled(), p.Exporter())
			}
			_, span := p.Tracer("t").Start(context.Background(), "s")
			if span.IsRecording() {
				t.Error("a span records with tracing off")
			}
			span.End()
			if err := p.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestOTLP: spans reach an OTLP receiver over each protocol the variables
// choose, named for the service and carrying the resource's attributes. An
// endpoint alone switches tracing on, over http/protobuf.
func TestOTLP(t *testing.T) {
	for _, tt := range []struct {
		name  string
		grpc  bool
		env   map[string]string
		wantX string // Exporter()
	}{
		{"endpoint alone: http/protobuf", false, nil, "otlp (http/protobuf)"},
		{"otlp http/protobuf", false, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, "otlp (http/protobuf)"},
		{"otlp grpc", true, map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "otlp (grpc)"},
		{"traces protocol wins", true, map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "otlp (grpc)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			var rcv *otlptest.Receiver
			if tt.grpc {
				rcv = otlptest.StartGRPC(t)
			} else {
				rcv = otlptest.StartHTTP(t)
			}
			setEnv(t, tt.env)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rcv.Endpoint)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
			p, err := tracing.Setup(context.Background(), tracing.Config{Version: "1.2.3"})
			if err != nil {
				t.Fatal(err)
			}
			if !p.Enabled() || p.Exporter() != tt.wantX {
				t.Fatalf("Enabled = %t, exporter %q; want %q", p.Enabled(), p.Exporter(), tt.wantX)
			}
			_, span := p.Tracer("t").Start(context.Background(), "toolexec.call")
			span.End()
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			got := rcv.WaitFor(t, "toolexec.call", 5*time.Second)
			if got.TraceID != span.SpanContext().TraceID().String() {
				t.Errorf("trace id %s, want %s", got.TraceID, span.SpanContext().TraceID())
			}
			r := got.Resource
			if r["service.name"] != tracing.DefaultServiceName || r["service.version"] != "1.2.3" || r["deployment.environment"] != "test" {
				t.Errorf("resource %v", r)
			}
			if bad := rcv.Bad(); len(bad) > 0 {
				t.Errorf("requests that were not trace exports: %q", bad)
			}
		})
	}
}

// TestConsoleGoesToStdout: the console exporter writes spans to standard
// output, and nothing to standard error, where the logs go; the environment
// names the service. The exporter takes os.Stdout when its package loads, so
// the test runs itself again as a child process with both streams captured.
func TestConsoleGoesToStdout(t *testing.T) {
	if os.Getenv("TRACING_CONSOLE_CHILD") == "1" {
		p, err := tracing.Setup(context.Background(), tracing.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Exporter() != "console" {
			t.Fatalf("exporter %q", p.Exporter())
		}
		_, span := p.Tracer("t").Start(context.Background(), "toolexec.body")
		span.End()
		if err := p.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		return
	}
	clearEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_SERVICE_NAME", "booking-executor")
	t.Setenv("TRACING_CONSOLE_CHILD", "1")
	cmd := exec.Command(os.Args[0], "-test.run=^TestConsoleGoesToStdout$", "-test.count=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), `"Name":"toolexec.body"`) || !strings.Contains(stdout.String(), "booking-executor") {
		t.Errorf("standard output lacks the span or the service name:\n%s", stdout.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("something went to standard error:\n%s", stderr.String())
	}
}

// TestUnsupported: exporters and protocols that are not built in are refused
// with an error naming the variable and what it may say.
func TestUnsupported(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, `OTEL_TRACES_EXPORTER="zipkin": the executor exports with otlp or console`},
		{"a list", map[string]string{"OTEL_TRACES_EXPORTER": "otlp,console"}, "one exporter at a time"},
		{"http/json", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, `OTEL_EXPORTER_OTLP_PROTOCOL="http/json"`},
		{"traces protocol", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=\"thrift\": the executor sends OTLP as grpc (collector port 4317) or http/protobuf (port 4318)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			setEnv(t, tt.env)
			p, err := tracing.Setup(context.Background(), tracing.Config{})
			if !errors.Is(err, tracing.ErrUnsupported) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want ErrUnsupported mentioning %q", err, tt.want)
			}
			if p == nil || p.Enabled() {
				t.Error("a refused configuration must leave a usable, disabled provider")
			}
		})
	}
}
