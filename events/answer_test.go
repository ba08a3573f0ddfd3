package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/events"
)

const key = "dcaca72c477ec402dd504f145eb9fa54d2964d52f26edc7cd656608baca21496"

// TestAnswerCheck holds the field rules of each kind: every base answer passes,
// and each case breaks one rule. (bus/wire's TestAnswerEventRefuses holds the
// writers of answer events to the same rules, and to theirs.)
func TestAnswerCheck(t *testing.T) {
	mod := func(kind events.Kind, f func(*events.Answer)) events.Answer {
		a := events.Answer{Kind: kind, Tenant: "acme", RunID: "run_1", CallID: "call-7", Tool: "book"}
		switch kind {
		case events.KindCompleted:
			a.Outcome = "x"
		case events.KindDeduplicated:
			a.Key, a.Outcome = key, "x"
		case events.KindIndeterminate:
			a.Key, a.Reason = key, events.ReasonBodyFailed
		case events.KindFailed:
			a.Error, a.Code = "boom", events.CodeToolError
		case events.KindRejected:
			a.Error, a.Code = "bad", events.CodeBadToken
		case events.KindResolved:
			a.Key, a.Action = key, events.ActionRelease
		}
		f(&a)
		return a
	}
	for _, k := range events.Kinds() {
		if err := mod(k, func(*events.Answer) {}).Check(); err != nil {
			t.Fatalf("base %s answer refused: %v", k, err)
		}
	}
	tests := []struct {
		name    string
		a       events.Answer
		alsoErr error // another sentinel the error must match, if any
	}{
		{"unknown kind", mod("done", func(*events.Answer) {}), events.ErrUnknownKind},
		{"no kind", mod("", func(*events.Answer) {}), events.ErrUnknownKind},
		{"bad tenant", mod(events.KindCompleted, func(a *events.Answer) { a.Tenant = "a.b" }), events.ErrInvalidToken},
		{"no tenant", mod(events.KindRejected, func(a *events.Answer) { a.Tenant = "" }), events.ErrInvalidToken},
		{"completed bad tool", mod(events.KindCompleted, func(a *events.Answer) { a.Tool = "*" }), events.ErrInvalidToken},
		{"completed no run", mod(events.KindCompleted, func(a *events.Answer) { a.RunID = "" }), events.ErrInvalidToken},
		{"failed bad call id", mod(events.KindFailed, func(a *events.Answer) { a.CallID = "c 1" }), events.ErrInvalidToken},
		{"bad key", mod(events.KindCompleted, func(a *events.Answer) { a.Key = strings.ToUpper(key) }), nil},
		{"short key", mod(events.KindCompleted, func(a *events.Answer) { a.Key = key[:63] }), nil},
		{"completed with error", mod(events.KindCompleted, func(a *events.Answer) { a.Error = "x" }), nil},
		{"deduplicated without key", mod(events.KindDeduplicated, func(a *events.Answer) { a.Key = "" }), nil},
		{"indeterminate unknown reason", mod(events.KindIndeterminate, func(a *events.Answer) { a.Reason = "crashed" }), nil},
		{"key underivable with key", mod(events.KindIndeterminate, func(a *events.Answer) { a.Reason = events.ReasonKeyUnderivable }), nil},
		{"failed no error", mod(events.KindFailed, func(a *events.Answer) { a.Error = "" }), nil},
		{"failed rejection code", mod(events.KindFailed, func(a *events.Answer) { a.Code = events.CodeBadToken }), nil},
		{"rejected failure code", mod(events.KindRejected, func(a *events.Answer) { a.Code = events.CodeTimeout }), nil},
		{"rejected no error", mod(events.KindRejected, func(a *events.Answer) { a.Error = "" }), nil},
		{"rejected with operator", mod(events.KindRejected, func(a *events.Answer) { a.Operator = "bob" }), nil},
		{"resolved no key", mod(events.KindResolved, func(a *events.Answer) { a.Key = "" }), nil},
		{"resolved bad action", mod(events.KindResolved, func(a *events.Answer) { a.Action = "undo" }), nil},
		{"release with outcome", mod(events.KindResolved, func(a *events.Answer) { a.Outcome = "x" }), nil},
		{"action on an answer", mod(events.KindCompleted, func(a *events.Answer) { a.Action = events.ActionComplete }), nil},
		{"field on failed", mod(events.KindFailed, func(a *events.Answer) { a.Field = "x" }), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.a.Check()
			if !errors.Is(err, events.ErrInvalidAnswer) {
				t.Fatalf("Check() = %v, want ErrInvalidAnswer", err)
			}
			if tt.alsoErr != nil && !errors.Is(err, tt.alsoErr) {
				t.Errorf("Check() = %v, want it to match %v too", err, tt.alsoErr)
			}
		})
	}
	// A rejected answer may name a tool, run and call that are not tokens: the
	// wire leaves them out.
	if err := mod(events.KindRejected, func(a *events.Answer) { a.Tool, a.RunID, a.CallID = "bo ok", "r.1", "c*1" }).Check(); err != nil {
		t.Errorf("rejected answer with malformed ids refused: %v", err)
	}
}
