package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/tool"
)

func serveCatalog(t *testing.T, nc *nats.Conn, reg *tool.Registry) *bus.CatalogService {
	t.Helper()
	s, err := bus.ServeCatalog(nc, reg, bus.CatalogConfig{Logger: testLogger()})
	if err != nil {
		t.Fatalf("ServeCatalog: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func noop(context.Context, tool.Context, json.RawMessage) (string, error) { return "ok", nil }

// TestCatalogDeclares: every field of a declaration arrives as declared,
// including the difference between "every argument is a key argument" (no
// list) and "none is" (an empty list), and a tool with no schema is listed
// with an object schema.
func TestCatalogDeclares(t *testing.T) {
	h := newHarness(t)
	every, err := tool.New(tool.Spec{
		Name: "book", Description: "Take a seat.", Timeout: 30 * time.Second,
		Parameters:  json.RawMessage(bookSchema),
		Idempotency: &tool.Policy{Kind: tool.Effectful, CheckArguments: []string{"request_id"}},
	}, noop)
	if err != nil {
		t.Fatal(err)
	}
	none, err := tool.New(tool.Spec{
		Name: "reset", Parameters: json.RawMessage(`{"type":"object"}`),
		Idempotency: &tool.Policy{Kind: tool.Idempotent, KeyArguments: []string{}},
	}, noop)
	if err != nil {
		t.Fatal(err)
	}
	bare, err := tool.New(tool.Spec{Name: "echo"}, noop)
	if err != nil {
		t.Fatal(err)
	}
	serveCatalog(t, natstest.Connect(t, h.srv), registry(t, every, none, bare))

	got, err := h.client.Tools(ctxT(t), "acme")
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	if len(got) != 3 || got[0].Name != "book" || got[1].Name != "echo" || got[2].Name != "reset" {
		t.Fatalf("Tools = %+v, want book, echo, reset", got)
	}
	book, echo, reset := got[0], got[1], got[2]
	if book.Description != "Take a seat." || book.Kind != tool.Effectful || book.TimeoutMillis != 30000 {
		t.Errorf("book = %+v", book)
	}
	if book.KeyArguments != nil {
		t.Errorf("book.KeyArguments = %#v, want nil (every argument)", book.KeyArguments)
	}
	if fmt.Sprint(book.CheckArguments) != "[request_id]" {
		t.Errorf("book.CheckArguments = %v", book.CheckArguments)
	}
	var schema map[string]any
	if err := json.Unmarshal(book.Parameters, &schema); err != nil || schema["required"] == nil {
		t.Errorf("book.Parameters = %s (%v), want the declared schema", book.Parameters, err)
	}
	if reset.KeyArguments == nil || len(reset.KeyArguments) != 0 || reset.Kind != tool.Idempotent {
		t.Errorf("reset = %+v (KeyArguments %#v), want idempotent with an empty, non-nil key list", reset, reset.KeyArguments)
	}
	if echo.Kind != "" || string(echo.Parameters) != `{"type":"object"}` {
		t.Errorf("echo = %+v, want no kind and an object schema", echo)
	}
}

// TestCatalogPages: a catalog larger than one reply comes in pages, and the
// client reads them all in order.
func TestCatalogPages(t *testing.T) {
	h := newHarness(t, natstest.WithMaxPayload(8<<10))
	desc := strings.Repeat("d", 900)
	var tools []*tool.Tool
	for i := range 40 {
		tl, err := tool.New(tool.Spec{Name: fmt.Sprintf("t%02d", i), Description: desc}, noop)
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tl)
	}
	serveCatalog(t, natstest.Connect(t, h.srv), registry(t, tools...))

	// One raw request: a first page that says more follow.
	m, err := h.nc.Request(wire.CatalogSubject("acme"), nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var first bus.CatalogResponse
	if err := json.Unmarshal(m.Data, &first); err != nil {
		t.Fatal(err)
	}
	if !first.More || len(first.Tools) == 0 || len(first.Tools) >= 40 || len(m.Data) > 8<<10 {
		t.Fatalf("first page: %d tools, more=%v, %d bytes; want a partial page within the payload", len(first.Tools), first.More, len(m.Data))
	}

	got, err := h.client.Tools(ctxT(t), "acme")
	if err != nil {
		t.Fatalf("Tools: %v", err)
	}
	if len(got) != 40 {
		t.Fatalf("Tools returned %d declarations, want 40", len(got))
	}
	for i, d := range got {
		if d.Name != fmt.Sprintf("t%02d", i) {
			t.Fatalf("tool %d is %q", i, d.Name)
		}
	}
}

// TestCatalogRefuses: bad requests get a clear error, and a client with no
// catalog to ask says so.
func TestCatalogRefuses(t *testing.T) {
	h := newHarness(t)
	if _, err := h.client.Tools(ctxT(t), "acme"); !errors.Is(err, toolexec.ErrNoCatalogService) {
		t.Fatalf("Tools with no executor: %v, want ErrNoCatalogService", err)
	}
	if _, err := h.client.Tools(ctxT(t), "acme.globex"); !errors.Is(err, events.ErrInvalidToken) {
		t.Fatalf("Tools with a bad tenant: %v, want ErrInvalidToken", err)
	}
	bare, err := tool.New(tool.Spec{Name: "echo"}, noop)
	if err != nil {
		t.Fatal(err)
	}
	serveCatalog(t, natstest.Connect(t, h.srv), registry(t, bare))
	for _, tc := range []struct{ name, data string }{
		{"not JSON", `{"after":`},
		{"unknown member", `{"before":"x"}`},
		{"not an object", `["x"]`},
		{"too long", `{"after":"` + strings.Repeat("x", bus.MaxCatalogRequestBytes) + `"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := h.nc.Request(wire.CatalogSubject("acme"), []byte(tc.data), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var resp bus.CatalogResponse
			if err := json.Unmarshal(m.Data, &resp); err != nil {
				t.Fatal(err)
			}
			if resp.Error == nil || resp.Error.Code != bus.CatalogBadRequest || len(resp.Tools) != 0 {
				t.Fatalf("reply %s, want a bad_request error and no tools", m.Data)
			}
		})
	}
}

// TestCatalogClientBounded: a responder that answers every page with the same
// tool and "more" cannot keep the client reading for ever: a page that does
// not move past the last tool read is an error.
func TestCatalogClientBounded(t *testing.T) {
	h := newHarness(t)
	data, err := json.Marshal(bus.CatalogResponse{Tools: []bus.ToolDecl{{Name: "loop", Parameters: []byte(`{"type":"object"}`)}}, More: true})
	if err != nil {
		t.Fatal(err)
	}
	sub, err := h.nc.Subscribe(wire.CatalogSubjects, func(m *nats.Msg) { _ = m.Respond(data) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if got, err := h.client.Tools(ctxT(t), "acme"); err == nil || !strings.Contains(err.Error(), "out of order") {
		t.Fatalf("Tools = %v, %v; want an out-of-order error", got, err)
	}
}

// TestCatalogFollowsTheRegistry: the catalog lists the registry as it stands
// at each request: a tool put after the service started is listed, a tool in
// conflict is not, a tool removed is gone, and a tool unavailable is listed
// as such.
func TestCatalogFollowsTheRegistry(t *testing.T) {
	h := newHarness(t)
	book, err := tool.New(tool.Spec{Name: "book"}, noop)
	if err != nil {
		t.Fatal(err)
	}
	echo, err := tool.New(tool.Spec{Name: "echo", Description: "Say it back."}, noop)
	if err != nil {
		t.Fatal(err)
	}
	reg := registry(t, book)
	serveCatalog(t, natstest.Connect(t, h.srv), reg)
	listed := func() string {
		t.Helper()
		got, err := h.client.Tools(ctxT(t), "acme")
		if err != nil {
			t.Fatalf("Tools: %v", err)
		}
		var names []string
		for _, d := range got {
			n := d.Name + ":" + d.Description
			if d.Unavailable {
				n += "(unavailable)"
			}
			names = append(names, n)
		}
		return strings.Join(names, ",")
	}
	steps := []struct {
		name   string
		change func()
		want   string
	}{
		{"as started", func() {}, "book:"},
		{"echo put", func() { reg.Put(echo) }, "book:,echo:Say it back."},
		{"book in conflict", func() { reg.SetConflict("book", "two workers differ") }, "echo:Say it back."},
		{"echo removed, book's conflict over", func() { reg.Remove("echo"); reg.ClearConflict("book") }, "book:"},
		{"book unavailable", func() { reg.SetUnavailable("book", "mcp server x is down") }, "book:(unavailable)"},
		{"book available again", func() { reg.ClearUnavailable("book") }, "book:"},
	}
	for _, st := range steps {
		st.change()
		if got := listed(); got != st.want {
			t.Errorf("%s: the catalog lists %q, want %q", st.name, got, st.want)
		}
	}
}
