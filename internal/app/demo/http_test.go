package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/httptool"
	"github.com/tesserix/toolexec/tool/toolsfile"
)

// TestExampleToolsAgainstTheHandler loads examples/tools.yaml, points it at the
// airline's HTTP handler and checks each answer class end to end: the outcome
// of a 2xx, no effect for a refusal, and an unknown effect for an answer lost
// after the booking landed.
func TestExampleToolsAgainstTheHandler(t *testing.T) {
	a := demo.New()
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	env := map[string]string{"AIRLINE_URL": srv.URL, "AIRLINE_TOKEN": "t"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ts, err := toolsfile.Load(ctx, filepath.Join("..", "..", "..", "examples", "tools.yaml"), toolsfile.Options{
		Env: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	byName := map[string]*tool.Tool{}
	for _, tl := range ts.Tools() {
		byName[tl.Name()] = tl
	}
	run := func(name, args string) (string, error) {
		t.Helper()
		return byName[name].Call(ctx, tool.Context{IdempotencyKey: strings.Repeat("0", 64), Tenant: "acme", RunID: "run_1",
			CallID: "c1", Tool: name, Attempt: 1}, json.RawMessage(args))
	}

	if fare, err := run("lookup_fare", `{"flight":"BA117"}`); err != nil || fare != "GBP 612.40" {
		t.Errorf("lookup_fare = %q, %v", fare, err)
	}
	ref, err := run("book", `{"flight":"BA117","seats":2,"request_id":"r1"}`)
	if err != nil || len(ref) != 6 || a.Bookings("BA117") != 1 || a.BookingsOf("BA117")[0].PNR != ref {
		t.Errorf("book = %q, %v; bookings %+v", ref, err, a.BookingsOf("BA117"))
	}

	// fail_after_effect is the demo airline's own switch (the example's schema does
	// not list it; Call does not validate): the booking lands, the connection closes.
	_, err = run("book", `{"flight":"LH400","seats":1,"request_id":"r1","fail_after_effect":true}`)
	if err == nil || tool.IsNoEffect(err) {
		t.Errorf("lost answer: err = %v; want a failure with unknown effect", err)
	}
	if a.Bookings("LH400") != 1 {
		t.Errorf("Bookings(LH400) = %d; want 1", a.Bookings("LH400"))
	}

	a.Cancel("UA901")
	_, err = run("book", `{"flight":"UA901","seats":1,"request_id":"r1"}`)
	var se *httptool.StatusError
	if !tool.IsNoEffect(err) || !errors.As(err, &se) || se.StatusCode != http.StatusConflict {
		t.Errorf("cancelled flight: err = %v; want a no-effect 409", err)
	}

	_, err = run("book", `{"flight":"BA117","seats":0,"request_id":"r1"}`)
	if !errors.As(err, &se) || se.StatusCode != http.StatusUnprocessableEntity || !tool.IsNoEffect(err) {
		t.Errorf("seats 0: err = %v; want a no-effect 422", err)
	}
	_, err = run("book", `{"flight":"BA117","seats":1,"request_id":"r1","class":"first"}`)
	if !errors.As(err, &se) || se.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown member: err = %v; want 400", err)
	}
	if a.Bookings("BA117") != 1 {
		t.Errorf("refused requests booked: Bookings(BA117) = %d", a.Bookings("BA117"))
	}

	if out, err := run("update_profile", `{"passenger":"ada","seat":"aisle","email":"ada@example.com"}`); err != nil || !strings.Contains(out, "aisle") {
		t.Errorf("update_profile = %q, %v", out, err)
	}
	if p, _ := a.Profile("ada"); p.Seat != "aisle" {
		t.Errorf("profile %+v", p)
	}
}

func TestHandlerRefusesOtherMethods(t *testing.T) {
	srv := httptest.NewServer(demo.New().Handler())
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/bookings")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /bookings: %s; want 405", resp.Status)
	}
}
