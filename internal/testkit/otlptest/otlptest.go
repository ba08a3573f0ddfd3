// Package otlptest runs OTLP trace receivers in process, over gRPC and over
// HTTP/protobuf, for tests that check what an exporter sends.
package otlptest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened with its resource's attributes.
type Span struct {
	Name     string
	TraceID  string // lower-case hex
	SpanID   string // lower-case hex
	ParentID string // lower-case hex; "" for a root span
	// Attrs are the span's string, bool and int attributes, as text.
	Attrs map[string]string
	// Resource are the resource's string attributes.
	Resource map[string]string
}

// Receiver collects the spans exported to it.
type Receiver struct {
	// Endpoint is the URL to give OTEL_EXPORTER_OTLP_ENDPOINT: http://host:port.
	Endpoint string

	mu    sync.Mutex // protects spans and bad
	spans []Span
	bad   []string // requests that were not OTLP trace exports
}

// Spans returns the spans received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Bad returns a description of each request that was not an OTLP trace
// export.
func (r *Receiver) Bad() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bad...)
}

// WaitFor waits until a span named name arrived, for up to timeout, and
// returns it; it fails the test otherwise.
func (r *Receiver) WaitFor(t testing.TB, name string, timeout time.Duration) Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, s := range r.Spans() {
			if s.Name == name {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no span %q within %v; received %d spans, bad requests %q", name, timeout, len(r.Spans()), r.Bad())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *Receiver) add(req *coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		res := map[string]string{}
		for _, a := range rs.GetResource().GetAttributes() {
			res[a.GetKey()] = a.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				r.spans = append(r.spans, flatten(s, res))
			}
		}
	}
}

func flatten(s *tracepb.Span, res map[string]string) Span {
	attrs := map[string]string{}
	for _, a := range s.GetAttributes() {
		attrs[a.GetKey()] = valueText(a.GetValue())
	}
	out := Span{Name: s.GetName(), TraceID: hex.EncodeToString(s.GetTraceId()), SpanID: hex.EncodeToString(s.GetSpanId()),
		Attrs: attrs, Resource: res}
	if len(s.GetParentSpanId()) > 0 {
		out.ParentID = hex.EncodeToString(s.GetParentSpanId())
	}
	return out
}

// valueText returns an attribute's value as text: strings as themselves,
// booleans and integers as Go prints them, anything else as its proto text.
func valueText(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	}
	return v.String()
}

// StartHTTP starts an OTLP/HTTP receiver (protobuf, POST /v1/traces), stopped
// when the test ends.
func StartHTTP(t testing.TB) *Receiver {
	t.Helper()
	r := &Receiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var msg coltrace.ExportTraceServiceRequest
		if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" ||
			req.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, &msg) != nil {
			r.mu.Lock()
			r.bad = append(r.bad, req.Method+" "+req.URL.Path+" "+req.Header.Get("Content-Type"))
			r.mu.Unlock()
			http.Error(w, "not an OTLP/HTTP protobuf trace export", http.StatusBadRequest)
			return
		}
		r.add(&msg)
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	r.Endpoint = srv.URL
	return r
}

// traceService is the OTLP gRPC trace service, adding what it receives to r.
type traceService struct {
	coltrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(_ context.Context, req *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	s.r.add(req)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

// StartGRPC starts an OTLP/gRPC receiver without TLS (give the exporter an
// http:// endpoint, which makes it connect in plain text), stopped when the
// test ends.
func StartGRPC(t testing.TB) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &Receiver{Endpoint: "http://" + ln.Addr().String()}
	srv := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(srv, traceService{r: r})
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r
}
