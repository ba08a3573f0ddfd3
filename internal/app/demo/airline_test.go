package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/tool"
)

// lookup returns the airline's tool called name.
func lookup(t *testing.T, a *demo.Airline, name string) *tool.Tool {
	t.Helper()
	for _, tl := range a.Tools() {
		if tl.Name() == name {
			return tl
		}
	}
	t.Fatalf("no tool %q", name)
	return nil
}

// call runs a tool's body once, as the dispatcher would after validating.
func call(t *testing.T, tl *tool.Tool, args string) (string, error) {
	t.Helper()
	if err := tl.Validate(json.RawMessage(args)); err != nil {
		t.Fatalf("arguments %s do not validate: %v", args, err)
	}
	return tl.Call(context.Background(), tool.Context{Tenant: "acme", RunID: "run_1", CallID: "c1", Tool: tl.Name(), Attempt: 1},
		json.RawMessage(args))
}

func TestToolDeclarations(t *testing.T) {
	a := demo.New()
	tools := a.Tools()
	want := []struct {
		name   string
		kind   tool.Kind
		keys   []string
		checks []string
		params []string
	}{
		{"lookup_fare", tool.ReadOnly, nil, nil, []string{"flight"}},
		{"book", tool.Effectful, []string{"flight"}, []string{"seats"}, []string{"fail_after_effect", "flight", "request_id", "seats"}},
		{"update_profile", tool.Idempotent, []string{"passenger"}, []string{"seat", "email"}, []string{"email", "passenger", "seat"}},
	}
	if len(tools) != len(want) {
		t.Fatalf("%d tools; want %d", len(tools), len(want))
	}
	for i, w := range want {
		tl := tools[i]
		p := tl.Policy()
		if tl.Name() != w.name || p == nil || p.Kind != w.kind || !reflect.DeepEqual(p.KeyArguments, w.keys) ||
			!reflect.DeepEqual(p.CheckArguments, w.checks) || !reflect.DeepEqual(tl.Parameters(), w.params) {
			t.Errorf("tool %d: %s policy %+v parameters %v; want %+v", i, tl.Name(), p, tl.Parameters(), w)
		}
		if tl.Spec().Timeout <= 0 || tl.Spec().Description == "" {
			t.Errorf("%s: no timeout or description", tl.Name())
		}
	}
	if lookup(t, a, "book").Spec().Retry.Attempts() != 1 {
		t.Errorf("book declares retries")
	}
	if again := a.Tools(); &again[0] != &tools[0] {
		t.Errorf("Tools built a second set")
	}
	if _, err := tool.NewRegistry(tools...); err != nil {
		t.Errorf("the tools do not register together: %v", err)
	}
}

func TestSchemasRefuseBadInput(t *testing.T) {
	a := demo.New()
	tests := []struct {
		tool string
		args string
		ok   bool
	}{
		{"lookup_fare", `{"flight":"BA117"}`, true},
		{"lookup_fare", `{}`, false},
		{"lookup_fare", `{"flight":"ba117"}`, false},
		{"lookup_fare", `{"flight":"BA12345"}`, false},
		{"lookup_fare", `{"flight":117}`, false},
		{"lookup_fare", `{"flight":"BA117","date":"today"}`, false},
		{"book", `{"flight":"BA117","seats":2,"request_id":"r1"}`, true},
		{"book", `{"flight":"BA117","seats":2,"request_id":"r1","fail_after_effect":true}`, true},
		{"book", `{"flight":"BA117","seats":2}`, false},
		{"book", `{"flight":"BA117","request_id":"r1"}`, false},
		{"book", `{"seats":2,"request_id":"r1"}`, false},
		{"book", `{"flight":"BA117","seats":0,"request_id":"r1"}`, false},
		{"book", `{"flight":"BA117","seats":10,"request_id":"r1"}`, false},
		{"book", `{"flight":"BA117","seats":"2","request_id":"r1"}`, false},
		{"book", `{"flight":"BA117","seats":1.5,"request_id":"r1"}`, false},
		{"book", `{"flight":"BA117","seats":2,"request_id":""}`, false},
		{"book", `{"flight":"BA117","seats":2,"request_id":"r1","fail_after_effect":"yes"}`, false},
		{"book", `{"flight":"BA117","seats":2,"request_id":"r1","class":"first"}`, false},
		{"update_profile", `{"passenger":"ada","seat":"window"}`, true},
		{"update_profile", `{"passenger":"ada","seat":"aisle","email":"ada@example.com"}`, true},
		{"update_profile", `{"passenger":"ada","seat":"floor"}`, false},
		{"update_profile", `{"passenger":"","seat":"window"}`, false},
		{"update_profile", `{"seat":"window"}`, false},
		{"update_profile", `[]`, false},
	}
	for _, tt := range tests {
		err := lookup(t, a, tt.tool).Validate(json.RawMessage(tt.args))
		if (err == nil) != tt.ok {
			t.Errorf("%s %s: err = %v; want accepted: %v", tt.tool, tt.args, err, tt.ok)
		}
		var ae *tool.ArgumentsError
		if err != nil && !errors.As(err, &ae) {
			t.Errorf("%s %s: err %v is not an ArgumentsError", tt.tool, tt.args, err)
		}
	}
}

func TestLookupFare(t *testing.T) {
	a := demo.New()
	lf := lookup(t, a, "lookup_fare")
	for flight, want := range map[string]string{"BA117": "GBP 612.40", "LH400": "EUR 489.00"} {
		if got, err := call(t, lf, fmt.Sprintf(`{"flight":%q}`, flight)); err != nil || got != want {
			t.Errorf("fare of %s = %q, %v; want %q", flight, got, err, want)
		}
	}
	first, _ := call(t, lf, `{"flight":"AF1234"}`)
	again, _ := call(t, lf, `{"flight":"AF1234"}`)
	if first != again || !strings.HasPrefix(first, "EUR ") {
		t.Errorf("derived fares %q and %q; want one stable EUR fare", first, again)
	}
	if a.Bookings("AF1234") != 0 {
		t.Error("looking up a fare booked a seat")
	}
}

func TestBookCountsEveryBooking(t *testing.T) {
	a := demo.New()
	book := lookup(t, a, "book")
	p1, err := call(t, book, `{"flight":"BA117","seats":2,"request_id":"r1"}`)
	if err != nil {
		t.Fatal(err)
	}
	// The airline does not deduplicate: the same call again is a second booking.
	p2, err := call(t, book, `{"flight":"BA117","seats":2,"request_id":"r2"}`)
	if err != nil {
		t.Fatal(err)
	}
	if p1 == p2 || len(p1) != 6 || len(p2) != 6 {
		t.Errorf("PNRs %q and %q; want two distinct six-character PNRs", p1, p2)
	}
	if n := a.Bookings("BA117"); n != 2 {
		t.Errorf("Bookings(BA117) = %d; want 2", n)
	}
	if n := a.Bookings("LH400"); n != 0 {
		t.Errorf("Bookings(LH400) = %d; want 0", n)
	}
	got := a.BookingsOf("BA117")
	want := []demo.Booking{{PNR: p1, Flight: "BA117", Seats: 2, RequestID: "r1"}, {PNR: p2, Flight: "BA117", Seats: 2, RequestID: "r2"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("BookingsOf = %+v; want %+v", got, want)
	}
}

func TestFailAfterEffectBooksThenFails(t *testing.T) {
	a := demo.New()
	out, err := call(t, lookup(t, a, "book"), `{"flight":"BA117","seats":1,"request_id":"r1","fail_after_effect":true}`)
	if err == nil {
		t.Fatalf("no error (outcome %q)", out)
	}
	if !errors.Is(err, demo.ErrAnswerLost) {
		t.Errorf("err = %v; want ErrAnswerLost", err)
	}
	if tool.IsNoEffect(err) {
		t.Errorf("err = %v says no effect, but the booking landed", err)
	}
	if n := a.Bookings("BA117"); n != 1 {
		t.Errorf("Bookings = %d; want 1: the effect lands before the answer is lost", n)
	}
}

func TestCancelledFlightIsNoEffect(t *testing.T) {
	a := demo.New()
	a.Cancel("BA117")
	_, err := call(t, lookup(t, a, "book"), `{"flight":"BA117","seats":1,"request_id":"r1"}`)
	if !tool.IsNoEffect(err) || !errors.Is(err, demo.ErrFlightCancelled) {
		t.Errorf("err = %v; want a no-effect ErrFlightCancelled", err)
	}
	if n := a.Bookings("BA117"); n != 0 {
		t.Errorf("Bookings = %d; want 0", n)
	}
}

func TestCanceledContextBooksNothing(t *testing.T) {
	a := demo.New()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := lookup(t, a, "book").Call(ctx, tool.Context{Tool: "book"}, json.RawMessage(`{"flight":"BA117","seats":1,"request_id":"r1"}`))
	if !tool.IsNoEffect(err) || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v; want no effect, canceled", err)
	}
	if a.Bookings("BA117") != 0 {
		t.Error("booked under a canceled context")
	}
}

func TestUpdateProfile(t *testing.T) {
	a := demo.New()
	up := lookup(t, a, "update_profile")
	for range 2 {
		if _, err := call(t, up, `{"passenger":"ada","seat":"window","email":"ada@example.com"}`); err != nil {
			t.Fatal(err)
		}
	}
	p, ok := a.Profile("ada")
	if !ok || p != (demo.Profile{Seat: "window", Email: "ada@example.com"}) {
		t.Errorf("Profile = %+v, %v", p, ok)
	}
	if n := a.ProfileWrites("ada"); n != 2 {
		t.Errorf("ProfileWrites = %d; want 2 (the airline itself does not deduplicate)", n)
	}
	if _, ok := a.Profile("bob"); ok {
		t.Error("bob has a profile")
	}
}

func TestZeroValueAirline(t *testing.T) {
	var a demo.Airline
	if a.Bookings("BA117") != 0 || a.ProfileWrites("ada") != 0 {
		t.Error("a new airline has history")
	}
	if _, err := call(t, lookup(t, &a, "book"), `{"flight":"BA117","seats":1,"request_id":"r1"}`); err != nil {
		t.Fatal(err)
	}
	if a.Bookings("BA117") != 1 {
		t.Error("the booking was not counted")
	}
}

func TestConcurrentBookings(t *testing.T) {
	a := demo.New()
	book := lookup(t, a, "book")
	const n = 64
	pnrs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			out, err := book.Call(context.Background(), tool.Context{Tool: "book"},
				json.RawMessage(fmt.Sprintf(`{"flight":"BA117","seats":1,"request_id":"r%d"}`, i)))
			if err != nil {
				t.Error(err)
			}
			pnrs[i] = out
		})
	}
	wg.Wait()
	if got := a.Bookings("BA117"); got != n {
		t.Errorf("Bookings = %d; want %d", got, n)
	}
	seen := map[string]bool{}
	for _, p := range pnrs {
		if seen[p] {
			t.Errorf("PNR %q issued twice", p)
		}
		seen[p] = true
	}
}
