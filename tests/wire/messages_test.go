package wire_test

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// msgName is the golden of a message of kind in mode: "calls/call.structured.msg".
func msgName(dir, kind string, mode wire.Mode) string {
	return fmt.Sprintf("%s/%s.%s.msg", dir, kind, mode)
}

// TestCallGoldens: wire.CallMsg writes the golden call in each mode, byte for
// byte, and the readers (wire.Decode, wire.CallFromEvent, the subject and
// header readers) read each golden back to the call it was written from.
func TestCallGoldens(t *testing.T) {
	c := goldenCall()
	for _, mode := range modes {
		name := msgName("calls", "call", mode)
		t.Run("writes "+name, func(t *testing.T) {
			m, err := wire.CallMsg(c, mode)
			if err != nil {
				t.Fatalf("the code refuses the golden call in %s mode: %v\n%s", mode, err, ruleText())
			}
			checkMsg(t, name, m)
		})
		t.Run("reads "+name, func(t *testing.T) {
			if *update {
				t.Skip("-update writes the goldens")
			}
			m := readMsg(t, name)
			if got := wire.ModeOf(m.Header); got != mode {
				t.Errorf("golden %s is read in %s mode, was written in %s mode", name, got, mode)
			}
			parts, err := wire.ParseCallSubject(m.Subject)
			if err != nil {
				t.Fatalf("the code refuses golden %s's subject: %v\n%s", name, err, ruleText())
			}
			e, err := wire.Decode(m.Header, m.Data)
			if err != nil {
				t.Fatalf("the code refuses golden %s: %v\n%s", name, err, ruleText())
			}
			got, err := wire.CallFromEvent(e, parts.Tenant, parts.Tool)
			if err != nil {
				t.Fatalf("the code rejects golden %s: %v\n%s", name, err, ruleText())
			}
			if err := wire.CheckSubjectCallID(got, parts.CallID); err != nil {
				t.Fatalf("the code rejects golden %s: %v\n%s", name, err, ruleText())
			}
			got.Repeat = wire.IsRepeat(m.Header)
			got.Interactions = wire.Interactions(m.Header)
			if v, _ := wire.Get(m.Header, wire.TraceParentHeader); v != c.TraceParent {
				t.Errorf("golden %s: header %s reads %q, want %q", name, wire.TraceParentHeader, v, c.TraceParent)
			}
			if diffs := callDiffs(c, got); len(diffs) > 0 {
				t.Errorf("the code reads golden %s otherwise than the call it was written from:\n  %v\n%s", name, diffs, ruleText())
			}
		})
	}
}

// callDiffs lists the fields in which got, a call read back, differs from
// want.
func callDiffs(want, got events.Call) []string {
	var out []string
	add := func(field string, w, g any) {
		if !reflect.DeepEqual(w, g) {
			out = append(out, fmt.Sprintf("%s: want %v, read %v", field, w, g))
		}
	}
	add("Tenant", want.Tenant, got.Tenant)
	add("RunID", want.RunID, got.RunID)
	add("CallID", want.CallID, got.CallID)
	add("Tool", want.Tool, got.Tool)
	add("Source", want.Source, got.Source)
	add("Arguments", string(want.Arguments), string(got.Arguments))
	add("TraceParent", want.TraceParent, got.TraceParent)
	add("TraceState", want.TraceState, got.TraceState)
	if !want.Time.Equal(got.Time) {
		out = append(out, fmt.Sprintf("Time: want %v, read %v", want.Time, got.Time))
	}
	add("Repeat", want.Repeat, got.Repeat)
	add("Interactions", want.Interactions, got.Interactions)
	return out
}

// TestAnswerGoldens: wire.AnswerMsg writes each golden answer in each mode,
// byte for byte, and wire.DecodeAnswer reads each golden back to the answer
// it was written from. The readers of the release the goldens record read
// them too (this test, at that release): so they read what the code writes
// now.
func TestAnswerGoldens(t *testing.T) {
	for _, ac := range goldenAnswers(t) {
		for _, mode := range modes {
			name := msgName("answers", ac.name, mode)
			t.Run("writes "+name, func(t *testing.T) {
				m, err := wire.AnswerMsg(ac.answer, ac.source, mode)
				if err != nil {
					t.Fatalf("the code refuses the golden %s answer in %s mode: %v\n%s", ac.name, mode, err, ruleText())
				}
				checkMsg(t, name, m)
			})
			t.Run("reads "+name, func(t *testing.T) {
				if *update {
					t.Skip("-update writes the goldens")
				}
				m := readMsg(t, name)
				got, err := wire.DecodeAnswer(m.Header, m.Data)
				if err != nil {
					t.Fatalf("the code refuses golden %s: %v\n%s", name, err, ruleText())
				}
				if diffs := answerDiffs(ac.answer, got); len(diffs) > 0 {
					t.Errorf("the code reads golden %s otherwise than the answer it was written from:\n  %v\n%s", name, diffs, ruleText())
				}
				addr, err := wire.ParseEventSubject(m.Subject)
				if err != nil {
					t.Fatalf("the code refuses golden %s's subject: %v\n%s", name, err, ruleText())
				}
				want := wire.EventAddress{Tenant: got.Tenant, Kind: got.Kind, Tool: got.Tool, RunID: got.RunID, CallID: got.CallID}
				if addr != want {
					t.Errorf("golden %s: its subject reads %+v, its event %+v", name, addr, want)
				}
				if v, _ := wire.Get(m.Header, "Nats-Msg-Id"); v != wire.MsgID(got) {
					t.Errorf("golden %s: Nats-Msg-Id %q, but the code derives %q from the answer", name, v, wire.MsgID(got))
				}
			})
		}
	}
}

// answerDiffs lists the fields in which got, an answer read back, differs
// from want.
func answerDiffs(want, got events.Answer) []string {
	var out []string
	w, g := reflect.ValueOf(want), reflect.ValueOf(got)
	for i := range w.NumField() {
		f := w.Type().Field(i)
		if f.Name == "Time" {
			if !want.Time.Equal(got.Time) {
				out = append(out, fmt.Sprintf("Time: want %v, read %v", want.Time, got.Time))
			}
			continue
		}
		if wv, gv := w.Field(i).Interface(), g.Field(i).Interface(); !reflect.DeepEqual(wv, gv) {
			out = append(out, fmt.Sprintf("%s: want %q, read %q", f.Name, wv, gv))
		}
	}
	return out
}

// TestAnswerGoldensCoverKinds: the goldens hold an answer of every kind the
// code knows, so that a new kind comes with its golden (and a new wire
// version).
func TestAnswerGoldensCoverKinds(t *testing.T) {
	var have []events.Kind
	for _, ac := range goldenAnswers(t) {
		have = append(have, ac.answer.Kind)
	}
	for _, k := range events.Kinds() {
		if !slices.Contains(have, k) {
			t.Errorf("the code knows kind %s, but no golden answer is of it\n%s", k, ruleText())
		}
	}
}

// TestNoteGoldens: wire.NoteJSON and wire.NoteSubject write each golden
// note, and wire.DecodeNote reads it back. (The executor's relay adds the
// headers Nats-Msg-Id, the note's id, and Content-Type; they are not built
// by a public writer and are not held here.)
func TestNoteGoldens(t *testing.T) {
	for _, n := range goldenNotes() {
		name := "notes/" + n.Kind + ".msg"
		t.Run("writes "+name, func(t *testing.T) {
			data, err := wire.NoteJSON(n)
			if err != nil {
				t.Fatalf("the code refuses the golden %s note: %v\n%s", n.Kind, err, ruleText())
			}
			m := natsMsg(wire.NoteSubject(n.Kind, n.Tenant, n.Tool, n.RunID, n.CallID, n.Seq), data)
			checkMsg(t, name, m)
		})
		t.Run("reads "+name, func(t *testing.T) {
			if *update {
				t.Skip("-update writes the goldens")
			}
			m := readMsg(t, name)
			got, err := wire.DecodeNote(m.Subject, m.Data)
			if err != nil {
				t.Fatalf("the code refuses golden %s: %v\n%s", name, err, ruleText())
			}
			if !got.Time.Equal(n.Time) {
				t.Errorf("golden %s: Time reads %v, want %v", name, got.Time, n.Time)
			}
			got.Time = n.Time
			if !reflect.DeepEqual(got, n) {
				t.Errorf("the code reads golden %s otherwise than the note it was written from:\n  read %+v\n  want %+v\n%s", name, got, n, ruleText())
			}
			if _, err := wire.DecodeAnswer(m.Header, m.Data); err == nil {
				t.Errorf("golden %s reads as an answer: an answer reader must skip notes", name)
			}
		})
	}
}
