package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// TestCallJSONMatchesSDK holds CallJSON to the path it replaces: for any
// call it fails exactly when CallEvent (or the structured encoding of its
// event) fails, with the same rejection code and
// field, and otherwise writes the same bytes.
func TestCallJSONMatchesSDK(tt *testing.T) {
	valid := rapid.StringMatching(`[A-Za-z0-9_-]{1,8}`)
	token := rapid.OneOf(valid, valid, valid, valid, valid, valid, valid, valid, rapid.Just(""), rapid.String())
	text := rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringMatching(`[a-z"\\<>&\x00-\x1f\x{2028}]{0,12}`))
	args := rapid.OneOf(rapid.Just(`{"flight":"LH1","seats":2}`), rapid.Just(`{ "a" : "<b>\u00e9" }`), rapid.Just(""),
		rapid.Just(`[1]`), rapid.Just(`{"a":`), rapid.Just(` {}`), rapid.String())
	accepted := 0
	rapid.Check(tt, func(t *rapid.T) {
		c := events.Call{
			Tenant: rapid.SampledFrom([]string{"acme", "acme", "acme", "", "a.b"}).Draw(t, "tenant"),
			RunID:  token.Draw(t, "run"), CallID: token.Draw(t, "call"), Tool: token.Draw(t, "tool"),
			Source: rapid.OneOf(rapid.Just("/agents/planner"), rapid.Just("/agents/planner"),
				rapid.SampledFrom([]string{"urn:x", "https://a.example/b?c=d#e", "", "#", "%zz", "a b", `/"q"`}), rapid.String()).Draw(t, "source"),
			TraceParent: rapid.SampledFrom([]string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}).Draw(t, "traceparent"),
			TraceState:  text.Draw(t, "tracestate"),
		}
		if a := args.Draw(t, "arguments"); a != "" {
			c.Arguments = json.RawMessage(a)
		}
		if rapid.Bool().Draw(t, "timed") {
			c.Time = time.Unix(rapid.Int64Range(-1e10, 1e11).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "nsec"))
		}
		got, gotErr := wire.CallJSON(c)
		var want []byte
		e, wantErr := wire.CallEvent(c)
		if wantErr == nil {
			_, want, wantErr = wire.Encode(e, wire.Structured)
		}
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("CallJSON error %v, CallEvent's path %v, for %+v", gotErr, wantErr, c)
		}
		if gotErr != nil {
			var g, w *events.RejectedError
			if !errors.As(gotErr, &g) || !errors.As(wantErr, &w) || g.Code != w.Code || g.Field != w.Field {
				t.Fatalf("CallJSON error %v, CallEvent's %v: want the same code and field", gotErr, wantErr)
			}
			return
		}
		if !bytes.Equal(shortEscapes(got), shortEscapes(want)) {
			t.Fatalf("for %+v:\nCallJSON %s\nSDK      %s", c, got, want)
		}
		accepted++
	})
	if accepted == 0 {
		tt.Error("no call was accepted: the generator does not reach the bytes compared")
	}
}
