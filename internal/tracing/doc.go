// Package tracing sets up OpenTelemetry tracing for the executor from the
// standard OTEL_* environment variables, and is off unless they ask for it.
//
// Tracing is on when OTEL_TRACES_EXPORTER names an exporter (otlp, console, or
// both, comma-separated), or when it is unset and an OTLP endpoint is given
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). It is
// off when nothing is set, with OTEL_TRACES_EXPORTER=none, and with
// OTEL_SDK_DISABLED=true. The OTLP exporter speaks HTTP/protobuf
// (OTEL_EXPORTER_OTLP_PROTOCOL http/protobuf, the default; grpc and http/json
// are refused with an error naming the fix), and reads the other standard
// variables itself: endpoint, headers, timeout, compression, certificates.
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES describe the process;
// OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG choose the sampler (default
// parentbased_always_on: a call whose traceparent is sampled is traced);
// OTEL_BSP_* tune the batch processor.
//
// The spans themselves are made by package dispatch (one per call, a child per
// store operation and body entry); [Setup] returns the provider to give it.
package tracing
