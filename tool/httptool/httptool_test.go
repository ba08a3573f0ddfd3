package httptool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/httptool"
)

const schema = `{"type":"object","properties":{"flight":{"type":"string"},"seats":{"type":"integer"},"request_id":{"type":"string"}},"required":["flight"]}`

var bookSpec = tool.Spec{
	Name:        "book",
	Parameters:  json.RawMessage(schema),
	Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}},
}

var callCtx = tool.Context{
	IdempotencyKey: strings.Repeat("ab", 32),
	Tenant:         "acme",
	RunID:          "run_1",
	CallID:         "call-7",
	Tool:           "book",
	Attempt:        2,
	TraceParent:    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}

// newTool builds the book tool against ep, failing the test on error.
func newTool(t *testing.T, ep httptool.Endpoint) *tool.Tool {
	t.Helper()
	tl, err := httptool.New(bookSpec, ep)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return tl
}

// serve starts a test server with handler h and returns its URL.
func serve(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// call runs the tool once with a generous deadline, so that a hang fails the test
// instead of stalling it.
func call(t *testing.T, tl *tool.Tool, tc tool.Context, args string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return tl.Call(ctx, tc, json.RawMessage(args))
}

func TestSuccessReturnsBody(t *testing.T) {
	tests := []struct {
		name   string
		status int
		body   string
	}{
		{"200 with JSON", http.StatusOK, `{"pnr":"K7Q2ZD"}`},
		{"201 with text", http.StatusCreated, "booked\n"},
		{"202 accepted", http.StatusAccepted, "queued"},
		{"204 empty", http.StatusNoContent, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url := serve(t, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			out, err := call(t, newTool(t, httptool.Endpoint{URL: url}), callCtx, `{"flight":"BA117"}`)
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if out != tt.body {
				t.Errorf("outcome = %q; want %q", out, tt.body)
			}
		})
	}
}

func TestRequestCarriesArgumentsAndHeaders(t *testing.T) {
	type seen struct {
		method, path, host string
		header             http.Header
		body               []byte
	}
	got := make(chan seen, 1)
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.RequestURI(), r.Host, r.Header.Clone(), b}
		io.WriteString(w, "ok")
	})
	tl := newTool(t, httptool.Endpoint{URL: url + "/book?v=1", Headers: map[string]string{
		"Authorization": "Bearer s3cret", "x-airline": "demo", "Host": "airline.example",
	}})
	// Arguments go out byte for byte: spacing, member order and number spelling kept.
	args := `{ "seats": 2.0, "flight":"BA117",  "request_id":"a" }`
	if _, err := call(t, tl, callCtx, args); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.method != http.MethodPost || s.path != "/book?v=1" || s.host != "airline.example" {
		t.Errorf("request line: %s %s Host %s", s.method, s.path, s.host)
	}
	if string(s.body) != args {
		t.Errorf("body = %q; want the arguments as sent, %q", s.body, args)
	}
	want := map[string]string{
		"Content-Type":     "application/json",
		"Idempotency-Key":  callCtx.IdempotencyKey,
		"Toolexec-Tenant":  "acme",
		"Toolexec-Run-Id":  "run_1",
		"Toolexec-Call-Id": "call-7",
		"Toolexec-Tool":    "book",
		"Toolexec-Attempt": "2",
		"Traceparent":      callCtx.TraceParent,
		"Authorization":    "Bearer s3cret",
		"X-Airline":        "demo",
	}
	for k, v := range want {
		if vs := s.header.Values(k); len(vs) != 1 || vs[0] != v {
			t.Errorf("header %s = %q; want exactly [%q]", k, vs, v)
		}
	}
}

func TestNoKeyNoIdempotencyHeader(t *testing.T) {
	got := make(chan http.Header, 1)
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
	})
	tc := callCtx
	tc.IdempotencyKey, tc.TraceParent = "", ""
	if _, err := call(t, newTool(t, httptool.Endpoint{URL: url}), tc, `{"flight":"BA117"}`); err != nil {
		t.Fatal(err)
	}
	h := <-got
	for _, k := range []string{"Idempotency-Key", "Traceparent"} {
		if _, ok := h[k]; ok {
			t.Errorf("header %s sent (%q) although the call had none", k, h.Values(k))
		}
	}
	if h.Get("Toolexec-Call-Id") != "call-7" {
		t.Errorf("call id header = %q", h.Get("Toolexec-Call-Id"))
	}
}

func TestMethod(t *testing.T) {
	for _, tt := range []struct{ give, want string }{{"", "POST"}, {"put", "PUT"}, {"PATCH", "PATCH"}} {
		got := make(chan string, 1)
		url := serve(t, func(w http.ResponseWriter, r *http.Request) { got <- r.Method })
		if _, err := call(t, newTool(t, httptool.Endpoint{URL: url, Method: tt.give}), callCtx, `{"flight":"BA117"}`); err != nil {
			t.Fatal(err)
		}
		if m := <-got; m != tt.want {
			t.Errorf("Method %q sent %s; want %s", tt.give, m, tt.want)
		}
	}
}

func TestStatusClassification(t *testing.T) {
	noEffect := []int{307, 308, 400, 401, 402, 403, 404, 405, 409, 410, 411, 412, 413, 414, 415, 417,
		421, 422, 423, 424, 425, 426, 428, 429, 431, 451}
	effectUnknown := []int{300, 301, 302, 303, 406, 408, 416, 418, 499, 500, 501, 502, 503, 504, 599}
	var hits atomic.Int32 // requests reaching a redirect target: must stay zero
	target := serve(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	run := func(t *testing.T, code int) error {
		t.Helper()
		url := serve(t, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			if code >= 300 && code < 400 {
				w.Header().Set("Location", target)
			}
			w.WriteHeader(code)
			fmt.Fprintf(w, "status %d body", code)
		})
		out, err := call(t, newTool(t, httptool.Endpoint{URL: url}), callCtx, `{"flight":"BA117"}`)
		if err == nil {
			t.Fatalf("%d: no error (outcome %q)", code, out)
		}
		var se *httptool.StatusError
		if !errors.As(err, &se) || se.StatusCode != code || se.Body != fmt.Sprintf("status %d body", code) {
			t.Fatalf("%d: err = %v; want a StatusError with the code and body", code, err)
		}
		if errors.Is(err, httptool.ErrNotSent) {
			t.Errorf("%d: a response came back, yet the error says not sent", code)
		}
		return err
	}
	for _, code := range noEffect {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			if err := run(t, code); !tool.IsNoEffect(err) {
				t.Errorf("%d: err = %v; want no effect", code, err)
			}
			if !httptool.RefusedStatus(code) {
				t.Errorf("RefusedStatus(%d) = false", code)
			}
		})
	}
	for _, code := range effectUnknown {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			if err := run(t, code); tool.IsNoEffect(err) {
				t.Errorf("%d: err = %v is no effect; the effect may have landed", code, err)
			}
			if httptool.RefusedStatus(code) {
				t.Errorf("RefusedStatus(%d) = true", code)
			}
		})
	}
	for _, code := range []int{200, 201, 204, 299} {
		if httptool.RefusedStatus(code) {
			t.Errorf("RefusedStatus(%d) = true", code)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("redirects were followed %d times", n)
	}
}

func TestStatusErrorBodyBounded(t *testing.T) {
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
		// 1 + 2000 bytes: the 256-byte cut falls inside the 128th "é".
		io.WriteString(w, "a"+strings.Repeat("é", 1000))
	})
	_, err := call(t, newTool(t, httptool.Endpoint{URL: url}), callCtx, `{"flight":"BA117"}`)
	var se *httptool.StatusError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v", err)
	}
	want := "a" + strings.Repeat("é", 127) + "\uFFFD"
	if se.Body != want {
		t.Errorf("kept body %q (%d bytes); want %q", se.Body, len(se.Body), want)
	}
	if !strings.HasSuffix(err.Error(), want) || !strings.Contains(err.Error(), "409 Conflict") {
		t.Errorf("message %q", err)
	}
}

func TestConnectionClosedAfterRequestIsNotNoEffect(t *testing.T) {
	var got atomic.Value
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body) // the whole request arrived: the downstream may act on it
		got.Store(string(b))
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
	})
	_, err := call(t, newTool(t, httptool.Endpoint{URL: url}), callCtx, `{"flight":"BA117"}`)
	if err == nil {
		t.Fatal("no error")
	}
	if tool.IsNoEffect(err) || errors.Is(err, httptool.ErrNotSent) {
		t.Errorf("err = %v; the request was received, so the effect is unknown", err)
	}
	if got.Load() != `{"flight":"BA117"}` {
		t.Errorf("server read %v", got.Load())
	}
}

func TestBodyCutShortIsNotNoEffect(t *testing.T) {
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"pnr":`)
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	_, err := call(t, newTool(t, httptool.Endpoint{URL: url}), callCtx, `{"flight":"BA117"}`)
	if err == nil || tool.IsNoEffect(err) {
		t.Errorf("err = %v; want a failure with unknown effect", err)
	}
}

func TestNotSentIsNoEffect(t *testing.T) {
	// A port nobody listens on: listen, note the address, close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/book"
	ln.Close()

	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran although the TLS handshake should have failed")
	}))
	t.Cleanup(tlsSrv.Close)
	tlsSrv.Config.ErrorLog = discardLog()

	tests := []struct {
		name string
		url  string
	}{
		{"connection refused", closed},
		{"DNS failure", "http://toolexec-test.invalid/book"},
		{"TLS handshake failure (untrusted certificate)", tlsSrv.URL + "/book"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, newTool(t, httptool.Endpoint{URL: tt.url}), callCtx, `{"flight":"BA117"}`)
			if !tool.IsNoEffect(err) || !errors.Is(err, httptool.ErrNotSent) {
				t.Errorf("err = %v; want no effect, not sent", err)
			}
		})
	}
}

func TestCanceledBeforeSendingIsNoEffect(t *testing.T) {
	var hits atomic.Int32
	url := serve(t, func(w http.ResponseWriter, r *http.Request) { hits.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newTool(t, httptool.Endpoint{URL: url}).Call(ctx, callCtx, json.RawMessage(`{"flight":"BA117"}`))
	if !tool.IsNoEffect(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v; want no effect matching context.Canceled", err)
	}
	if hits.Load() != 0 {
		t.Error("the request reached the server")
	}
}

func TestDeadlineAfterSendingIsNotNoEffect(t *testing.T) {
	arrived := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	url := serve(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		close(arrived)
		select { // answer only once the client has given up
		case <-r.Context().Done():
		case <-release:
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := newTool(t, httptool.Endpoint{URL: url}).Call(ctx, callCtx, json.RawMessage(`{"flight":"BA117"}`))
	<-arrived
	if err == nil || tool.IsNoEffect(err) || errors.Is(err, httptool.ErrNotSent) {
		t.Errorf("err = %v; want a failure with unknown effect", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v; want it to match context.DeadlineExceeded", err)
	}
}

func TestResponseSizeCap(t *testing.T) {
	body := func(n int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, strings.Repeat("x", n)) }
	}
	tests := []struct {
		name    string
		max     int64
		size    int
		tooMany bool
	}{
		{"at the configured cap", 1000, 1000, false},
		{"over the configured cap", 1000, 1001, true},
		{"at the default cap", 0, httptool.DefaultMaxResponseBytes, false},
		{"over the default cap", 0, httptool.DefaultMaxResponseBytes + 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTool(t, httptool.Endpoint{URL: serve(t, body(tt.size)), MaxResponseBytes: tt.max})
			out, err := call(t, tl, callCtx, `{"flight":"BA117"}`)
			if !tt.tooMany {
				if err != nil || len(out) != tt.size {
					t.Fatalf("got %d bytes, err %v; want %d bytes", len(out), err, tt.size)
				}
				return
			}
			if !errors.Is(err, httptool.ErrResponseTooLarge) {
				t.Fatalf("err = %v; want ErrResponseTooLarge", err)
			}
			if tool.IsNoEffect(err) {
				t.Error("a 2xx that was too long is reported as no effect; the downstream acted")
			}
		})
	}
}

func TestErrorsDoNotRepeatQueryOrPassword(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	urls := []string{
		"http://user:hunter2@" + addr + "/book?token=hunter2",
		serve(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }) + "/book?token=hunter2",
	}
	for _, u := range urls {
		_, err := call(t, newTool(t, httptool.Endpoint{URL: u}), callCtx, `{"flight":"BA117"}`)
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("err = %v; want an error without the secret", err)
		}
		if !strings.Contains(err.Error(), "/book") {
			t.Errorf("err = %v; want it to name the path", err)
		}
	}
}

func TestNewRefusesBadEndpoints(t *testing.T) {
	tests := []struct {
		name  string
		ep    httptool.Endpoint
		field string
	}{
		{"no URL", httptool.Endpoint{}, "http.url"},
		{"relative URL", httptool.Endpoint{URL: "/book"}, "http.url"},
		{"ftp URL", httptool.Endpoint{URL: "ftp://example.com/book"}, "http.url"},
		{"no host", httptool.Endpoint{URL: "http:///book"}, "http.url"},
		{"unparsable URL", httptool.Endpoint{URL: "http://[::1/book"}, "http.url"},
		{"GET", httptool.Endpoint{URL: "http://example.com", Method: "GET"}, "http.method"},
		{"bad header name", httptool.Endpoint{URL: "http://example.com", Headers: map[string]string{"X Bad": "1"}}, "http.headers"},
		{"header value with newline", httptool.Endpoint{URL: "http://example.com", Headers: map[string]string{"X-A": "1\r\nX-B: 2"}}, "http.headers"},
		{"reserved Idempotency-Key", httptool.Endpoint{URL: "http://example.com", Headers: map[string]string{"idempotency-key": "k"}}, "http.headers"},
		{"reserved Content-Type", httptool.Endpoint{URL: "http://example.com", Headers: map[string]string{"Content-Type": "text/plain"}}, "http.headers"},
		{"reserved Toolexec prefix", httptool.Endpoint{URL: "http://example.com", Headers: map[string]string{"Toolexec-Tenant": "other"}}, "http.headers"},
		{"reserved traceparent", httptool.Endpoint{URL: "http://example.com", Headers: map[string]string{"traceparent": "x"}}, "http.headers"},
		{"header twice in different case", httptool.Endpoint{URL: "http://example.com", Headers: map[string]string{"X-A": "1", "x-a": "2"}}, "http.headers"},
		{"negative size cap", httptool.Endpoint{URL: "http://example.com", MaxResponseBytes: -1}, "http.max_response_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := httptool.New(bookSpec, tt.ep)
			var se *tool.SpecError
			if !errors.Is(err, tool.ErrInvalidSpec) || !errors.As(err, &se) || se.Field != tt.field {
				t.Fatalf("err = %v; want a SpecError on %s", err, tt.field)
			}
			if se.Tool != "book" {
				t.Errorf("error names tool %q", se.Tool)
			}
		})
	}
	// The declaration itself is still checked by tool.New.
	spec := bookSpec
	spec.Idempotency = &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"date"}}
	if _, err := httptool.New(spec, httptool.Endpoint{URL: "http://example.com"}); !errors.Is(err, tool.ErrUnknownArgument) {
		t.Errorf("unknown key argument: err = %v", err)
	}
}
