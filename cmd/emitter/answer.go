package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// Exit statuses of commands that print an answer, beside exitOK, exitFailure
// and exitUsage.
const (
	// exitFailed: the call failed definitely or was rejected; nothing happened
	// that a retry would repeat. Admin commands use it for a definite "no" (no
	// such record, not indeterminate).
	exitFailed = 3
	// exitIndeterminate: nobody can say whether the call's effect landed.
	exitIndeterminate = 4
	// exitTaken: the call was not stored, because a call of the same tenant,
	// tool and call id waits in the calls stream, not yet answered.
	exitTaken = 5
)

// answerJSON is an answer as --json prints it: one flat object, with the
// fields its kind uses.
type answerJSON struct {
	Kind        events.Kind `json:"kind"`
	Type        string      `json:"type"`
	ID          string      `json:"id"`
	Subject     string      `json:"subject"`
	Time        *time.Time  `json:"time,omitempty"`
	Tenant      string      `json:"tenant"`
	Tool        string      `json:"tool,omitempty"`
	RunID       string      `json:"run_id,omitempty"`
	CallID      string      `json:"call_id,omitempty"`
	Key         string      `json:"key,omitempty"`
	Outcome     *string     `json:"outcome,omitempty"`
	Error       string      `json:"error,omitempty"`
	Code        events.Code `json:"code,omitempty"`
	Field       string      `json:"field,omitempty"`
	Reason      string      `json:"reason,omitempty"`
	BodyEntered *bool       `json:"body_entered,omitempty"`
	Action      string      `json:"action,omitempty"`
	Operator    string      `json:"operator,omitempty"`
	TraceParent string      `json:"traceparent,omitempty"`
	TraceState  string      `json:"tracestate,omitempty"`
}

func newAnswerJSON(a events.Answer) answerJSON {
	j := answerJSON{
		Kind: a.Kind, Type: wire.EventType(a.Kind), ID: wire.AnswerID(a), Subject: wire.AnswerSubject(a),
		Tenant: a.Tenant, Tool: a.Tool, RunID: a.RunID, CallID: a.CallID, Key: a.Key,
		Error: a.Error, Code: a.Code, Field: a.Field, Reason: string(a.Reason),
		Action: string(a.Action), Operator: a.Operator, TraceParent: a.TraceParent, TraceState: a.TraceState,
	}
	if !a.Time.IsZero() {
		t := a.Time
		j.Time = &t
	}
	switch a.Kind {
	case events.KindCompleted, events.KindDeduplicated:
		o := a.Outcome
		j.Outcome = &o
	case events.KindResolved:
		if a.Action == events.ActionComplete {
			o := a.Outcome
			j.Outcome = &o
		}
	case events.KindIndeterminate:
		b := a.BodyEntered
		j.BodyEntered = &b
	}
	return j
}

// writeAnswerJSON writes a as one line of JSON.
func writeAnswerJSON(w io.Writer, a events.Answer) error {
	b, err := json.Marshal(newAnswerJSON(a))
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// answerLabel is how the text output names a's kind: the two kinds an agent
// must tell apart from an ordinary result by the names the agent kit's run
// events use.
func answerLabel(k events.Kind) string {
	switch k {
	case events.KindDeduplicated:
		return "TOOL_DEDUPLICATED"
	case events.KindIndeterminate:
		return "TOOL_INDETERMINATE"
	}
	return string(k)
}

// writeAnswerText writes a for people: a line naming the kind, the tool, the run,
// the call and the key, then the outcome or the error on a line of its own.
func writeAnswerText(w io.Writer, a events.Answer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s  run=%s call=%s", answerLabel(a.Kind), orDash(a.Tool), orDash(a.RunID), orDash(a.CallID))
	if a.Key != "" {
		fmt.Fprintf(&b, "  key=%s", a.Key)
	}
	switch a.Kind {
	case events.KindIndeterminate:
		fmt.Fprintf(&b, "  reason=%s body_entered=%t", a.Reason, a.BodyEntered)
	case events.KindFailed, events.KindRejected:
		fmt.Fprintf(&b, "  code=%s", a.Code)
		if a.Field != "" {
			fmt.Fprintf(&b, " field=%s", display(a.Field))
		}
	case events.KindResolved:
		fmt.Fprintf(&b, "  action=%s", a.Action)
		if a.Operator != "" {
			fmt.Fprintf(&b, " operator=%s", display(a.Operator))
		}
	}
	b.WriteByte('\n')
	switch {
	case a.Kind == events.KindCompleted || a.Kind == events.KindDeduplicated ||
		(a.Kind == events.KindResolved && a.Action == events.ActionComplete):
		fmt.Fprintf(&b, "  outcome: %s\n", display(a.Outcome))
	case a.Error != "":
		fmt.Fprintf(&b, "  error: %s\n", display(a.Error))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// printAnswer writes a as --json asks and returns the error that gives the
// command its exit status: nil for completed and deduplicated, exitFailed for
// failed and rejected, exitIndeterminate for indeterminate. The error explains
// the answer on stderr, with what to do next, in commands that repeat g's
// connection options.
func printAnswer(w io.Writer, g *globalOptions, a events.Answer) error {
	write := writeAnswerText
	if g.json {
		write = writeAnswerJSON
	}
	if err := write(w, a); err != nil {
		return fmt.Errorf("writing the answer: %w", err)
	}
	return answerStatus(g, a)
}

// answerStatus returns the error carrying a's exit status (nil for success).
func answerStatus(g *globalOptions, a events.Answer) error {
	if a.Kind == events.KindResolved {
		return nil
	}
	err := a.Err()
	if err == nil {
		return nil
	}
	var ind *events.IndeterminateOutcomeError
	if !errors.As(err, &ind) {
		return &exitError{code: exitFailed, err: err}
	}
	switch {
	case !a.BodyEntered && a.Reason == events.ReasonStoreUnavailable:
		// The executor could not reach its store before the tool started, and
		// this was the call's first delivery: nothing ran, and the key has no
		// record to settle.
		return &exitError{code: exitIndeterminate, err: fmt.Errorf("%w\n"+
			"  nothing ran: the executor could not reach its idempotency store before the tool started.\n"+
			"  Retrying is safe (the key still guards it): run the same call again once the store is back", err)}
	case !a.BodyEntered && a.Reason == events.ReasonKeyUnderivable:
		return &exitError{code: exitIndeterminate, err: fmt.Errorf("%w\n"+
			"  nothing ran: a key argument is missing, so the call cannot be told apart from its repeats; call it again with every key argument",
			err)}
	case a.Key == "":
		return &exitError{code: exitIndeterminate, err: err}
	}
	conn, note := g.hint()
	return &exitError{code: exitIndeterminate, err: fmt.Errorf("%w\n"+
		"  the effect may or may not have landed; the key stays indeterminate until an operator settles it:\n"+
		"  emitter%s inspect --tenant %s --key %s\n"+
		"  emitter%s resolve --tenant %s --key %s --complete --outcome TEXT   (or --release)%s",
		err, conn, a.Tenant, a.Key, conn, a.Tenant, a.Key, note)}
}

// orDash stands "-" in for an empty token.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// display returns s as it is if it is safe on a terminal (printable, spaces and
// newlines allowed), else quoted as a Go string, so that an outcome cannot
// drive the terminal with control characters.
func display(s string) string {
	for _, r := range s {
		if r == '\n' || r == '\t' || r == ' ' {
			continue
		}
		if r == unicode.ReplacementChar || !unicode.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}
