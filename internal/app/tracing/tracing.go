package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel/attribute"
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

// The variables Setup reads itself; the exporter reads the others.
const (
	envExporter       = "OTEL_TRACES_EXPORTER"
	envSDKDisabled    = "OTEL_SDK_DISABLED"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// Config configures [Setup]. The zero value is usable.
type Config struct {
	// ServiceName is the default service.name; default DefaultServiceName.
	ServiceName string
	// Version is the service.version, when known.
	Version string
}

// Provider is the tracer provider the environment asked for: a no-op one when
// tracing is off. Give it to dispatch.Config.TracerProvider when it is Enabled
// (without a provider the dispatcher makes no spans at all, which costs less
// than no-op ones), and call Shutdown before the process exits, so that
// buffered spans are sent.
type Provider struct {
	trace.TracerProvider
	exporter string
	sdk      *sdktrace.TracerProvider
}

// Enabled reports whether spans are exported.
func (p *Provider) Enabled() bool { return p.sdk != nil }

// Exporter names the exporter in use with its protocol ("otlp (grpc)",
// "otlp (http/protobuf)", "console"); "" when tracing is off.
func (p *Provider) Exporter() string { return p.exporter }

// Shutdown sends the spans still buffered and stops the exporter. It is a
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
// exporter's or resource's error if one cannot be made. On error the provider
// returned is a usable, disabled one.
func Setup(ctx context.Context, cfg Config) (*Provider, error) {
	off := &Provider{TracerProvider: noop.NewTracerProvider()}
	if strings.EqualFold(strings.TrimSpace(os.Getenv(envSDKDisabled)), "true") {
		return off, nil
	}
	name, err := exporterName()
	if err != nil || name == "" {
		return off, err
	}
	// With OTEL_TRACES_EXPORTER unset (an OTLP endpoint was given), autoexport
	// makes its default, otlp.
	exp, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return off, fmt.Errorf("tracing: %s exporter: %w", name, err)
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
		_ = exp.Shutdown(ctx)
		return off, fmt.Errorf("tracing: resource: %w", err)
	}
	sdk := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Provider{TracerProvider: sdk, exporter: name, sdk: sdk}, nil
}

// exporterName returns the exporter asked for, with its protocol for otlp; ""
// when tracing is off. It refuses what autoexport would not make, with an
// error naming the variable and what it may say.
func exporterName() (string, error) {
	v := os.Getenv(envExporter)
	if v == "" {
		if os.Getenv(envEndpoint) == "" && os.Getenv(envTracesEndpoint) == "" {
			return "", nil
		}
		v = "otlp"
	}
	switch v {
	case "none":
		return "", nil
	case "console":
		return v, nil
	case "otlp":
		proto, from := os.Getenv(envTracesProtocol), envTracesProtocol
		if proto == "" {
			proto, from = os.Getenv(envProtocol), envProtocol
		}
		switch proto {
		case "":
			return "otlp (http/protobuf)", nil
		case "grpc", "http/protobuf":
			return "otlp (" + proto + ")", nil
		}
		return "", fmt.Errorf("%w: %s=%q: the executor sends OTLP as grpc (collector port 4317) or http/protobuf (port 4318)", ErrUnsupported,
			from, proto)
	}
	if strings.Contains(v, ",") {
		return "", fmt.Errorf(
			"%w: %s=%q: one exporter at a time (otlp, console or none); to send spans to several places, send them to a collector", ErrUnsupported,
			envExporter, v)
	}
	return "", fmt.Errorf("%w: %s=%q: the executor exports with otlp or console, or none", ErrUnsupported, envExporter, v)
}
