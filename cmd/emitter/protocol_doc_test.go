package main

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/protodoc"
)

// TestProtocolDocExitStatus holds the emitter exit status column of
// docs/PROTOCOL.md §5's kind table to answerStatus: every answer of a kind,
// whatever its reason, code, key or body_entered, gives the status its row
// says, and a row that gives none ("—") is of a kind that answers no call.
func TestProtocolDocExitStatus(t *testing.T) {
	sec := protodoc.Read(t, "../../docs/PROTOCOL.md").Section(t, 5)
	tb := protodoc.FindTable(t, sec, "kind", "means", "data", "emitter exit status")
	kindCol, statusCol := tb.Column(t, "kind"), tb.Column(t, "emitter exit status")
	var rows []events.Kind
	for _, row := range tb.Rows {
		if len(row) != len(tb.Header) {
			t.Fatalf("§5: the kind table's row %q has %d cells, want %d", row, len(row), len(tb.Header))
		}
		names := protodoc.Names(row[kindCol])
		if len(names) != 1 {
			t.Fatalf("§5: the kind cell %q names %q, want one kind", row[kindCol], names)
		}
		kind := events.Kind(names[0])
		rows = append(rows, kind)
		cell := row[statusCol]
		if cell == "—" {
			if kind.IsAnswer() {
				t.Errorf("§5: %s answers calls, but the page gives it no exit status", kind)
			}
			continue
		}
		want, err := strconv.Atoi(cell)
		if err != nil {
			t.Errorf("§5: the exit status of %s is %q, want a number or —", kind, cell)
			continue
		}
		samples := answersOfKind(kind)
		if len(samples) == 0 {
			t.Errorf("§5: %s has an exit status, %d, but it is not a kind the emitter prints as an answer", kind, want)
		}
		for _, a := range samples {
			if got := exitStatusOf(answerStatus(&globalOptions{}, a)); got != want {
				t.Errorf("§5: the emitter exits %d on %s (reason %q, code %q, a key %t, body_entered %t), the page says %d",
					got, a.Kind, a.Reason, a.Code, a.Key != "", a.BodyEntered, want)
			}
		}
	}
	for _, k := range events.Kinds() {
		if !slices.Contains(rows, k) {
			t.Errorf("§5: the kind table has no row for %s", k)
		}
	}
}

// answersOfKind returns answers of kind k, one for each reason, code, key
// or none, and body entered or not that the kind has; none for a kind that
// is not an answer.
func answersOfKind(k events.Kind) []events.Answer {
	base := events.Answer{Kind: k, Tenant: "acme", Tool: "book", RunID: "run_1", CallID: "call_1"}
	var out []events.Answer
	for _, key := range []string{"", strings.Repeat("ab", 32)} {
		a := base
		a.Key = key
		switch k {
		case events.KindCompleted, events.KindDeduplicated:
			a.Outcome = "PNR-1"
			out = append(out, a)
		case events.KindIndeterminate:
			for _, r := range events.Reasons() {
				for _, entered := range []bool{false, true} {
					a.Reason, a.BodyEntered = r, entered
					out = append(out, a)
				}
			}
		case events.KindFailed, events.KindRejected:
			codes := events.FailureCodes()
			if k == events.KindRejected {
				codes = events.RejectionCodes()
			}
			for _, c := range codes {
				a.Code, a.Error = c, "it went wrong"
				out = append(out, a)
			}
		}
	}
	return out
}

// exitStatusOf returns the exit status run gives err when a command returns
// it.
func exitStatusOf(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	}
	return exitFailure
}
