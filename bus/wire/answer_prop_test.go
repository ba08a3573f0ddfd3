package wire_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// TestAnswerEventDataMeetsSchema: for every kind but resolved, Event does not
// run the schema over the data it writes; this holds it to the promise that
// whatever answer Event accepts has data the kind's schema accepts.
func TestAnswerEventDataMeetsSchema(t *testing.T) {
	valid := rapid.StringMatching(`[A-Za-z0-9_-]{1,8}`)
	token := rapid.OneOf(valid, valid, valid, valid, valid, valid, valid, valid, valid, valid, valid, valid,
		rapid.StringMatching(`[A-Za-z0-9_-]{127,129}`), rapid.Just(""), rapid.String())
	text := rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringN(500, 600, -1))
	var codes []events.Code
	codes = append(codes, events.RejectionCodes()...)
	codes = append(codes, events.FailureCodes()...)
	codes = append(codes, "", "oops")
	reasons := append(events.Reasons(), "", "oops")
	kinds := []events.Kind{events.KindCompleted, events.KindDeduplicated, events.KindIndeterminate,
		events.KindFailed, events.KindRejected}
	for _, kind := range kinds {
		t.Run(string(kind), func(t *testing.T) { checkAnswerData(t, kind, token, text, codes, reasons) })
	}
}

func checkAnswerData(tt *testing.T, kind events.Kind, token, text *rapid.Generator[string], codes []events.Code, reasons []events.Reason) {
	accepted := 0
	rapid.Check(tt, func(t *rapid.T) {
		a := events.Answer{
			Kind:   kind,
			Tenant: rapid.SampledFrom([]string{"acme", "acme", "acme", "acme", "acme", "acme", "", "a.b"}).Draw(t, "tenant"),
			Tool:   token.Draw(t, "tool"),
			RunID:  token.Draw(t, "run"),
			CallID: token.Draw(t, "call"),
			Key:    rapid.SampledFrom([]string{"", "", "", strings.Repeat("ab", 32), strings.Repeat("ab", 32), "nothex"}).Draw(t, "key"),
		}
		// The fields each kind carries, and now and then one it does not.
		switch a.Kind {
		case events.KindCompleted, events.KindDeduplicated:
			a.Outcome = text.Draw(t, "outcome")
			if a.Kind == events.KindDeduplicated {
				a.Key = rapid.SampledFrom([]string{strings.Repeat("cd", 32), strings.Repeat("cd", 32), ""}).Draw(t, "dedup key")
			}
		case events.KindIndeterminate:
			a.Reason = rapid.SampledFrom(reasons).Draw(t, "reason")
			a.BodyEntered = rapid.Bool().Draw(t, "entered")
			a.Error = text.Draw(t, "error")
		case events.KindFailed, events.KindRejected:
			a.Error = text.Draw(t, "error")
			own := events.FailureCodes()
			if a.Kind == events.KindRejected {
				own = events.RejectionCodes()
			}
			a.Code = rapid.OneOf(rapid.SampledFrom(own), rapid.SampledFrom(codes)).Draw(t, "code")
			if a.Kind == events.KindRejected {
				a.Field = rapid.OneOf(rapid.Just(""), rapid.StringN(0, 20, -1), rapid.StringN(505, 600, -1)).Draw(t, "field")
			}
		}
		if rapid.IntRange(0, 9).Draw(t, "stray") == 0 {
			a.Outcome, a.Code = text.Draw(t, "stray outcome"), rapid.SampledFrom(codes).Draw(t, "stray code")
		}
		e, err := wire.AnswerEvent(a, source)
		if err != nil {
			return
		}
		accepted++
		if err := wire.Validate(a.Kind, e.Data()); err != nil {
			t.Fatalf("Event accepted %+v but its data %s fails the %s schema: %v", a, e.Data(), a.Kind, err)
		}
	})
	if accepted == 0 {
		tt.Errorf("no %s answer was accepted: the generator does not reach that kind", kind)
	}
}

// TestAnswerJSONMatchesSDK holds AnswerJSON to the path it replaces on the
// hot path: for any answer, source and time, it fails exactly when AnswerEvent
// (or the structured encoding of AnswerEvent's event) fails, and otherwise
// writes the same bytes.
func TestAnswerJSONMatchesSDK(tt *testing.T) {
	accepted := 0
	rapid.Check(tt, func(t *rapid.T) {
		a, source := drawAnswer(t)
		got, gotErr := wire.AnswerJSON(a, source)
		var want []byte
		e, wantErr := wire.AnswerEvent(a, source)
		if wantErr == nil {
			_, want, wantErr = wire.Encode(e, wire.Structured)
		}
		switch {
		case (gotErr == nil) != (wantErr == nil):
			t.Fatalf("AnswerJSON error %v, AnswerEvent's path %v, for %+v from %q", gotErr, wantErr, a, source)
		case gotErr != nil:
			if !errors.Is(gotErr, events.ErrInvalidAnswer) && !errors.Is(gotErr, wire.ErrInvalidData) {
				t.Fatalf("AnswerJSON error %v matches neither ErrInvalidAnswer nor ErrInvalidData", gotErr)
			}
		case !bytes.Equal(shortEscapes(got), shortEscapes(want)):
			t.Fatalf("for %+v from %q:\nAnswerJSON %s\nSDK        %s", a, source, got, want)
		default:
			accepted++
		}
	})
	if accepted == 0 {
		tt.Error("no answer was accepted: the generator does not reach the bytes compared")
	}
}
