package tracing

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// DefaultServiceName names the process in its spans unless OTEL_SERVICE_NAME
// says otherwise.
const DefaultServiceName = "toolexec-executor"

// ErrUnsupported is returned by [Setup] for an exporter or protocol the
// executor does not include.
var ErrUnsupported = errors.New("tracing: unsupported")

// Config configures [Setup]. The zero value is usable.
type Config struct {
	// ServiceName is the default service.name; default DefaultServiceName.
	ServiceName string
	// Version is the service.version, when known.
	Version string
	// Console is where the console exporter writes; default os.Stderr.
	Console io.Writer
}

// Provider is the tracer provider the environment asked for: a no-op one when
// tracing is off. Give it to dispatch.Config.TracerProvider when it is Enabled
// (without a provider the dispatcher makes no spans at all, which costs less
// than no-op ones), and call Shutdown before the process exits, so that
// buffered spans are sent.
type Provider struct {
	trace.TracerProvider
	exporters []string
	sdk       *sdktrace.TracerProvider
}

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p.sdk != nil }

// Exporters names the exporters in use ("otlp", "console"); none when off.
func (p *Provider) Exporters() []string { return p.exporters }

// Shutdown sends the spans still buffered and stops the exporters. It is a
// no-op when tracing is off.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.sdk == nil {
		return nil
	}
	return p.sdk.Shutdown(ctx)
}

// Setup reads the OTEL_* variables (see the package documentation) and
// returns the provider they describe. It returns an error wrapping
// ErrUnsupported for an exporter or an OTLP protocol not built in, and the
// exporter's or resource's error if one cannot be made.
func Setup(ctx context.Context, cfg Config) (*Provider, error) {
	off := &Provider{TracerProvider: noop.NewTracerProvider()}
	if strings.EqualFold(strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")), "true") {
		return off, nil
	}
	names, err := exporterNames()
	if err != nil || len(names) == 0 {
		return off, err
	}
	var opts []sdktrace.TracerProviderOption
	for _, name := range names {
		exp, err := newExporter(ctx, name, cfg)
		if err != nil {
			return off, err
		}
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	if cfg.ServiceName == "" {
		cfg.ServiceName = DefaultServiceName
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", cfg.ServiceName)}
	if cfg.Version != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.Version))
	}
	// Later options win: the environment overrides the defaults.
	res, err := resource.New(ctx, resource.WithAttributes(attrs...), resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		return off, fmt.Errorf("tracing: resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(append(opts, sdktrace.WithResource(res))...)
	return &Provider{TracerProvider: sdk, exporters: names, sdk: sdk}, nil
}

// exporterNames returns the exporters asked for, none when tracing is off.
func exporterNames() ([]string, error) {
	v := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))
	if v == "" {
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "" {
			return []string{"otlp"}, nil
		}
		return nil, nil
	}
	var names []string
	for _, n := range strings.Split(v, ",") {
		switch n = strings.ToLower(strings.TrimSpace(n)); n {
		case "none":
			return nil, nil
		case "otlp", "console":
			names = append(names, n)
		default:
			return nil, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: this executor exports with otlp (HTTP) or console, or none", ErrUnsupported, n)
		}
	}
	return names, nil
}

func newExporter(ctx context.Context, name string, cfg Config) (sdktrace.SpanExporter, error) {
	if name == "console" {
		w := cfg.Console
		if w == nil {
			w = os.Stderr
		}
		return stdouttrace.New(stdouttrace.WithWriter(w))
	}
	proto := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, fmt.Errorf("%w: OTLP protocol %q: this executor sends traces over http/protobuf (point OTEL_EXPORTER_OTLP_ENDPOINT at the collector's HTTP port, usually 4318)", ErrUnsupported, proto)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: otlp exporter: %w", err)
	}
	return exp, nil
}
