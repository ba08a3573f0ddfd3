package toolsfile_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/toolsfile"
)

func TestExampleFileLoads(t *testing.T) {
	t.Setenv("AIRLINE_URL", "http://127.0.0.1:8080")
	t.Setenv("AIRLINE_TOKEN", "example-token")
	ts, err := toolsfile.Load(testenv.Context(t, time.Minute), filepath.Join("..", "..", "examples", "tools.yaml"), toolsfile.Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	defer ts.Close()
	tools := ts.Tools()
	want := []struct {
		name      string
		kind      tool.Kind
		keys      []string
		checks    []string
		params    []string
		attempts  int
		hasTimout bool
	}{
		{"lookup_fare", tool.ReadOnly, nil, nil, []string{"flight"}, 3, true},
		{"book", tool.Effectful, []string{"flight"}, []string{"seats"}, []string{"flight", "request_id", "seats"}, 1, true},
		{"update_profile", tool.Idempotent, []string{"passenger"}, []string{"seat", "email"}, []string{"email", "passenger", "seat"}, 4, true},
	}
	if len(tools) != len(want) {
		t.Fatalf("%d tools; want %d", len(tools), len(want))
	}
	for i, w := range want {
		tl := tools[i]
		p := tl.Policy()
		if tl.Name() != w.name || p == nil || p.Kind != w.kind || !reflect.DeepEqual(p.KeyArguments, w.keys) ||
			!reflect.DeepEqual(p.CheckArguments, w.checks) || !reflect.DeepEqual(tl.Parameters(), w.params) ||
			tl.Spec().Retry.Attempts() != w.attempts || (tl.Spec().Timeout > 0) != w.hasTimout {
			t.Errorf("tool %d: %s %+v params %v spec %+v; want %+v", i, tl.Name(), p, tl.Parameters(), tl.Spec(), w)
		}
	}
	// The schemas say what the airline accepts.
	book := tools[1]
	if err := book.Validate(json.RawMessage(`{"flight":"BA117","seats":2,"request_id":"r1"}`)); err != nil {
		t.Errorf("a good booking is refused: %v", err)
	}
	for _, bad := range []string{`{"flight":"BA117","seats":0,"request_id":"r1"}`, `{"flight":"BA117","seats":2}`, `{"flight":"ba 117","seats":1,"request_id":"r"}`} {
		if err := book.Validate(json.RawMessage(bad)); err == nil {
			t.Errorf("booking %s is accepted", bad)
		}
	}
}

func TestExampleFileNamesUnsetVariables(t *testing.T) {
	_, err := toolsfile.Load(testenv.Context(t, time.Minute), filepath.Join("..", "..", "examples", "tools.yaml"), toolsfile.Options{Env: envOf(nil)})
	for _, name := range []string{"${AIRLINE_URL}", "${AIRLINE_TOKEN}"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("err = %v; want it to name %s", err, name)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := toolsfile.Load(testenv.Context(t, time.Minute), filepath.Join(t.TempDir(), "nope.yaml"), toolsfile.Options{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v; want ErrNotExist", err)
	}
}

// countingTransport counts the requests it carries to the default transport.
type countingTransport struct{ n atomic.Int32 }

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return http.DefaultTransport.RoundTrip(r)
}

func TestLoadedToolCallsTheEndpoint(t *testing.T) {
	type seen struct {
		method, path, auth, key, body string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), string(b)}
		io.WriteString(w, "PNR K7Q2ZD")
	}))
	t.Cleanup(srv.Close)
	path := filepath.Join(t.TempDir(), "tools.yaml")
	src := `tools:
  - name: book
    idempotency: {kind: effectful, key_arguments: [flight]}
    parameters: {type: object, properties: {flight: {type: string}}}
    http:
      url: ${BASE}/bookings
      headers: {Authorization: "Bearer ${TOKEN}"}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := &countingTransport{}
	ts, err := toolsfile.Load(testenv.Context(t, time.Minute), path, toolsfile.Options{
		Env:    envOf(map[string]string{"BASE": srv.URL, "TOKEN": "t0k"}),
		Client: &http.Client{Transport: rt},
	})
	if err != nil {
		t.Fatal(err)
	}
	tools := ts.Tools()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := tools[0].Call(ctx, tool.Context{IdempotencyKey: "k1", Tenant: "acme", RunID: "r", CallID: "c", Tool: "book", Attempt: 1},
		json.RawMessage(`{"flight":"BA117"}`))
	if err != nil || out != "PNR K7Q2ZD" {
		t.Fatalf("Call = %q, %v", out, err)
	}
	s := <-got
	want := seen{"POST", "/bookings", "Bearer t0k", "k1", `{"flight":"BA117"}`}
	if s != want {
		t.Errorf("request %+v; want %+v", s, want)
	}
	if rt.n.Load() != 1 {
		t.Errorf("the configured client carried %d requests; want 1", rt.n.Load())
	}
}
