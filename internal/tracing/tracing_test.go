package tracing_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/tesserix/toolexec/internal/tracing"
)

// clearEnv unsets every variable Setup reads, for the test's duration.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"} {
		t.Setenv(k, "")
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
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			p, err := tracing.Setup(context.Background(), tracing.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Enabled() || len(p.Exporters()) != 0 {
				t.Errorf("Enabled = %t, exporters %v; want off", p.Enabled(), p.Exporters())
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

// collector is an OTLP/HTTP trace receiver.
type collector struct {
	mu       sync.Mutex // protects requests
	requests []*coltrace.ExportTraceServiceRequest
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req coltrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &req) != nil {
		http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	c.requests = append(c.requests, &req)
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
	_, _ = w.Write(b)
}

// TestOTLPEndpoint: an OTLP endpoint alone switches tracing on; spans reach
// the collector over HTTP/protobuf, named for the service.
func TestOTLPEndpoint(t *testing.T) {
	clearEnv(t)
	col := &collector{}
	srv := httptest.NewServer(col)
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	p, err := tracing.Setup(context.Background(), tracing.Config{Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled() || strings.Join(p.Exporters(), ",") != "otlp" {
		t.Fatalf("Enabled = %t, exporters %v; want otlp", p.Enabled(), p.Exporters())
	}
	_, span := p.Tracer("t").Start(context.Background(), "toolexec.call")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.requests) == 0 {
		t.Fatal("the collector received nothing")
	}
	rs := col.requests[0].GetResourceSpans()[0]
	attrs := map[string]string{}
	for _, a := range rs.GetResource().GetAttributes() {
		attrs[a.GetKey()] = a.GetValue().GetStringValue()
	}
	if attrs["service.name"] != tracing.DefaultServiceName || attrs["service.version"] != "1.2.3" || attrs["deployment.environment"] != "test" {
		t.Errorf("resource %v", attrs)
	}
	if name := rs.GetScopeSpans()[0].GetSpans()[0].GetName(); name != "toolexec.call" {
		t.Errorf("span %q", name)
	}
}

// TestConsoleAndServiceName: the console exporter writes spans; the
// environment names the service.
func TestConsoleAndServiceName(t *testing.T) {
	clearEnv(t)
	t.Setenv("OTEL_TRACES_EXPORTER", "console")
	t.Setenv("OTEL_SERVICE_NAME", "booking-executor")
	var out bytes.Buffer
	p, err := tracing.Setup(context.Background(), tracing.Config{Console: &out})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer("t").Start(context.Background(), "toolexec.body")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "toolexec.body") || !strings.Contains(out.String(), "booking-executor") {
		t.Errorf("console output lacks the span or the service name:\n%s", out.String())
	}
}

// TestUnsupported: exporters and protocols that are not built in are refused
// with an error naming what is.
func TestUnsupported(t *testing.T) {
	for _, tt := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, "otlp"},
		{"grpc", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "http/protobuf"},
		{"traces grpc", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, "4318"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
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
