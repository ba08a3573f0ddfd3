// Package tracing sets up OpenTelemetry tracing for the executor from the
// standard OTEL_* environment variables, and puts the trace and span ids of a
// traced call on the log lines written about it.
//
// # Exporters
//
// Tracing is on when OTEL_TRACES_EXPORTER names an exporter, or when it is
// unset and an OTLP endpoint is given (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). It is off when nothing is set, with
// OTEL_TRACES_EXPORTER=none, and with OTEL_SDK_DISABLED=true.
//
// The exporter itself is made by the OpenTelemetry contrib module
// go.opentelemetry.io/contrib/exporters/autoexport, which reads the rest of
// the standard variables:
//
//   - otlp: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
//     picks grpc (port 4317) or http/protobuf (port 4318, the default); the
//     exporter reads the endpoint, headers, timeout, compression and
//     certificates from their OTEL_EXPORTER_OTLP_* variables.
//   - console: spans as JSON on standard output, never on standard error,
//     where the executor's logs go.
//
// One exporter at a time: a comma-separated list is refused (run a collector
// to send spans to several places). OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES describe the process; OTEL_TRACES_SAMPLER and
// OTEL_TRACES_SAMPLER_ARG choose the sampler (default parentbased_always_on: a
// call whose traceparent is sampled is traced); OTEL_BSP_* tune the batch
// processor.
//
// The spans themselves are made by package dispatch (one per call, a child per
// store operation and body entry); [Setup] returns the provider to give it.
//
// # Logs
//
// [LogHandler] wraps a log/slog handler so that every record logged with a
// context that carries a span (logger.InfoContext(ctx, ...)) gets trace_id and
// span_id attributes, the ids a tracing backend shows for that span.
package tracing
