package console_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/app/console"
)

// TestStreamSearcher: searching TOOLEXEC_EVENTS across tenants by a subject
// filter (a run, a call) and by key (a check on every event), within the
// window of the latest events, and the admin's view over it end to end.
func TestStreamSearcher(t *testing.T) {
	s := startSystem(t)
	acme := s.lose(t, "acme", "BA117")
	globex := s.lose(t, "globex", "LH400")
	done := s.call(t, "globex", globex.RunID, realCallID(t), `{"flight":"AF1","seats":1,"request_id":"r-done"}`)
	if done.Kind != events.KindCompleted {
		t.Fatalf("booking: %+v", done)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A caller hears an answer as soon as the server routes it, which can be
	// before the events stream has stored it: wait for the three.
	for {
		st, err := s.js.Stream(ctx, wire.EventStream)
		if err != nil {
			t.Fatal(err)
		}
		if st.CachedInfo().State.Msgs == 3 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the events stream holds %d events, want 3", st.CachedInfo().State.Msgs)
		case <-time.After(20 * time.Millisecond):
		}
	}
	search := console.StreamSearcher{JS: s.js}
	byRun, err := search.Search(ctx, wire.EventPrefix+"*.*.*."+globex.RunID+".*", nil, 10)
	if err != nil || len(byRun) != 2 || byRun[0].CallID != globex.CallID || byRun[1].CallID != done.CallID {
		t.Fatalf("by run: %+v, %v; want globex's two calls, oldest first", byRun, err)
	}
	byKey, err := search.Search(ctx, wire.EventPrefix+">", func(a events.Answer) bool { return a.Key == acme.Key }, 10)
	if err != nil || len(byKey) != 1 || byKey[0].Tenant != "acme" {
		t.Fatalf("by key: %+v, %v", byKey, err)
	}
	if got, err := search.Search(ctx, wire.EventPrefix+">", nil, 1); err != nil || len(got) != 1 || got[0].CallID != done.CallID {
		t.Fatalf("limit 1: %+v, %v; want the latest event", got, err)
	}
	narrow := console.StreamSearcher{JS: s.js, Window: 1}
	if got, err := narrow.Search(ctx, wire.EventPrefix+">", func(a events.Answer) bool { return a.Key == acme.Key }, 10); err != nil || len(got) != 0 {
		t.Fatalf("a window of the last event found acme's first: %+v, %v", got, err)
	}

	for _, tc := range []struct{ by, q, want string }{{"key", acme.Key, acme.CallID}, {"call", globex.CallID, globex.Key}, {"run", globex.RunID, done.CallID}} {
		req := httptest.NewRequest(http.MethodGet, s.url+"/all?by="+tc.by+"&q="+tc.q, nil)
		req.RequestURI = ""
		req.Header.Set("Authorization", "Bearer "+adaToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page := body(t, resp)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(page, tc.want) || !strings.Contains(page, `id="found"`) {
			t.Errorf("ada's search by %s: %d, want %s on the page", tc.by, resp.StatusCode, tc.want)
		}
	}
}
