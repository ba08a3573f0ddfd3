package wire_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

const (
	key    = "dcaca72c477ec402dd504f145eb9fa54d2964d52f26edc7cd656608baca21496"
	source = "toolexec/executor/w1"
)

var when = time.Date(2025, 3, 1, 12, 0, 1, 0, time.UTC)

// base is an answer's identity; each case adds what its kind says.
func base(kind events.Kind) events.Answer {
	return events.Answer{Kind: kind, Tenant: "acme", RunID: "run_1", CallID: "call-7", Tool: "book",
		TraceParent: traceParent, Time: when}
}

type answerCase struct {
	name string
	a    events.Answer
	// wantData is the event's data exactly.
	wantData string
	// wantExt lists the toolexec extensions the event carries, with values.
	wantExt map[string]any
	// wantSubject is the attribute (absent when "").
	wantSubject string
}

func answerCases() []answerCase {
	with := func(kind events.Kind, f func(*events.Answer)) events.Answer {
		a := base(kind)
		f(&a)
		return a
	}
	full := map[string]any{"tenant": "acme", "runid": "run_1", "callid": "call-7", "idempotencykey": key}
	noKey := map[string]any{"tenant": "acme", "runid": "run_1", "callid": "call-7"}
	return []answerCase{
		{"completed", with(events.KindCompleted, func(a *events.Answer) { a.Key, a.Outcome = key, `{"seat":"12A"}` }),
			`{"tool":"book","outcome":"{\"seat\":\"12A\"}"}`, full, "book"},
		{"completed without policy", with(events.KindCompleted, func(a *events.Answer) { a.Outcome = "fare: 120" }),
			`{"tool":"book","outcome":"fare: 120"}`, noKey, "book"},
		{"completed empty outcome", with(events.KindCompleted, func(a *events.Answer) { a.Key = key }),
			`{"tool":"book","outcome":""}`, full, "book"},
		{"deduplicated", with(events.KindDeduplicated, func(a *events.Answer) { a.Key, a.Outcome = key, "ok" }),
			`{"tool":"book","outcome":"ok"}`, full, "book"},
		{"indeterminate body failed", with(events.KindIndeterminate, func(a *events.Answer) {
			a.Key, a.Reason, a.BodyEntered, a.Error = key, events.ReasonBodyFailed, true, "reset after send"
		}), `{"tool":"book","error":"reset after send","reason":"body_failed","body_entered":true}`, full, "book"},
		{"indeterminate key underivable", with(events.KindIndeterminate, func(a *events.Answer) {
			a.Reason = events.ReasonKeyUnderivable
		}), `{"tool":"book","reason":"key_underivable","body_entered":false}`, noKey, "book"},
		{"failed", with(events.KindFailed, func(a *events.Answer) { a.Error, a.Code = "downstream said 409", events.CodeNoEffect }),
			`{"tool":"book","error":"downstream said 409","code":"no_effect"}`, noKey, "book"},
		{"rejected", with(events.KindRejected, func(a *events.Answer) {
			a.Error, a.Code, a.Field = "seats: want integer", events.CodeSchemaViolation, "/arguments/seats"
		}), `{"tool":"book","error":"seats: want integer","code":"schema_violation","field":"/arguments/seats"}`, noKey, "book"},
		{"rejected arguments mismatch", with(events.KindRejected, func(a *events.Answer) {
			a.Key, a.Error, a.Code = key, "seats changed", events.CodeArgumentsMismatch
		}), `{"tool":"book","error":"seats changed","code":"arguments_mismatch"}`, full, "book"},
		{"rejected unknown tool and run", with(events.KindRejected, func(a *events.Answer) {
			a.Tool, a.RunID, a.Error, a.Code = "", "", "no runid", events.CodeMissingAttribute
		}), `{"error":"no runid","code":"missing_attribute"}`, map[string]any{"tenant": "acme", "callid": "call-7"}, ""},
		{"resolved complete", with(events.KindResolved, func(a *events.Answer) {
			a.Key, a.Action, a.Outcome, a.Operator = key, events.ActionComplete, "booked by hand", "alice"
		}), `{"tool":"book","key":"` + key + `","action":"complete","outcome":"booked by hand","operator":"alice"}`, full, "book"},
		{"resolved release, record without call", with(events.KindResolved, func(a *events.Answer) {
			a.Tool, a.RunID, a.CallID, a.Key, a.Action = "", "", "", key, events.ActionRelease
		}), `{"key":"` + key + `","action":"release"}`, map[string]any{"tenant": "acme", "idempotencykey": key}, ""},
	}
}

// TestAnswerRoundTrip sends every kind through Event, the structured JSON format
// and back, checking each attribute and extension by name on the way.
func TestAnswerRoundTrip(t *testing.T) {
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	for _, tt := range answerCases() {
		t.Run(tt.name, func(t *testing.T) {
			e, err := wire.AnswerEvent(tt.a, source)
			if err != nil {
				t.Fatal(err)
			}
			if string(e.Data()) != tt.wantData {
				t.Errorf("data = %s\nwant   %s", e.Data(), tt.wantData)
			}
			back, m := roundTrip(t, e)
			want := map[string]any{
				"specversion":     "1.0",
				"type":            "io.tesserix.toolexec." + string(tt.a.Kind),
				"id":              wire.AnswerID(tt.a),
				"source":          source,
				"time":            "2025-03-01T12:00:01Z",
				"datacontenttype": "application/json",
				"traceparent":     traceParent,
				"data":            nil,
			}
			if tt.wantSubject != "" {
				want["subject"] = tt.wantSubject
			}
			for k, v := range tt.wantExt {
				want[k] = v
			}
			wantAttrs(t, m, want)
			if _, ok := m["data"].(map[string]any); !ok {
				t.Errorf("data is %T, want a JSON object (not base64)", m["data"])
			}
			if !hex32.MatchString(e.ID()) {
				t.Errorf("id %q is not 32 hex digits", e.ID())
			}

			got, err := wire.AnswerFromEvent(back)
			if err != nil {
				t.Fatal(err)
			}
			if !got.Time.Equal(tt.a.Time) {
				t.Errorf("time = %v, want %v", got.Time, tt.a.Time)
			}
			got.Time = tt.a.Time
			if got != tt.a {
				t.Errorf("AnswerFromEvent = %+v\nwant              %+v", got, tt.a)
			}
			if wire.AnswerID(got) != e.ID() || wire.AnswerSubject(got) != wire.AnswerSubject(tt.a) {
				t.Errorf("decoded answer has id %q subject %q, want %q %q", wire.AnswerID(got), wire.AnswerSubject(got), e.ID(), wire.AnswerSubject(tt.a))
			}
			if addr, err := wire.ParseEventSubject(wire.AnswerSubject(tt.a)); err != nil || addr.Kind != tt.a.Kind || addr.Tenant != "acme" {
				t.Errorf("ParseEventSubject(%q) = %+v, %v", wire.AnswerSubject(tt.a), addr, err)
			}
		})
	}
}

func TestAnswerWithoutTraceOrTime(t *testing.T) {
	a := base(events.KindCompleted)
	a.TraceParent, a.Time, a.Outcome = "", time.Time{}, "x"
	e, err := wire.AnswerEvent(a, source)
	if err != nil {
		t.Fatal(err)
	}
	back, m := roundTrip(t, e)
	for _, k := range []string{"traceparent", "tracestate", "time", "idempotencykey"} {
		if _, ok := m[k]; ok {
			t.Errorf("attribute %q present, want it left out", k)
		}
	}
	got, err := wire.AnswerFromEvent(back)
	if err != nil || got != a {
		t.Errorf("AnswerFromEvent = %+v, %v; want %+v", got, err, a)
	}
	a.TraceParent, a.TraceState = traceParent, "k=v"
	e, err = wire.AnswerEvent(a, source)
	if err != nil {
		t.Fatal(err)
	}
	if _, m = roundTrip(t, e); m["tracestate"] != "k=v" {
		t.Errorf("tracestate = %v, want k=v", m["tracestate"])
	}
}

func TestAnswerSubject(t *testing.T) {
	tests := []struct {
		name string
		a    events.Answer
		want string
	}{
		{"completed", events.Answer{Kind: events.KindCompleted, Tenant: "acme", Tool: "book", RunID: "r", CallID: "c"},
			"toolexec.event.acme.completed.book.r.c"},
		{"rejected, no tool", events.Answer{Kind: events.KindRejected, Tenant: "acme", RunID: "r", CallID: "c"},
			"toolexec.event.acme.rejected._.r.c"},
		{"rejected, malformed ids", events.Answer{Kind: events.KindRejected, Tenant: "acme", Tool: "a.b", RunID: "*", CallID: ">"},
			"toolexec.event.acme.rejected._._._"},
		{"resolved, record without call", events.Answer{Kind: events.KindResolved, Tenant: "acme", Key: key},
			"toolexec.event.acme.resolved._._._"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wire.AnswerSubject(tt.a); got != tt.want {
				t.Errorf("Subject() = %q, want %q", got, tt.want)
			}
			if _, err := wire.ParseEventSubject(wire.AnswerSubject(tt.a)); err != nil {
				t.Errorf("subject does not parse: %v", err)
			}
		})
	}
}

func TestRejectedWithMalformedIDs(t *testing.T) {
	a := events.Answer{Kind: events.KindRejected, Tenant: "acme", Tool: "bo ok", RunID: "r.1", CallID: "c*1",
		Error: "tool: not a token", Code: events.CodeBadToken, Field: "subject"}
	e, err := wire.AnswerEvent(a, source)
	if err != nil {
		t.Fatal(err)
	}
	_, m := roundTrip(t, e)
	for _, k := range []string{"subject", "runid", "callid"} {
		if _, ok := m[k]; ok {
			t.Errorf("malformed %s published as an attribute: %v", k, m[k])
		}
	}
	if strings.Contains(string(e.Data()), "bo ok") {
		t.Errorf("data %s repeats the malformed tool", e.Data())
	}
	if wire.AnswerSubject(a) != "toolexec.event.acme.rejected._._._" {
		t.Errorf("Subject() = %q", wire.AnswerSubject(a))
	}
	other := a
	other.CallID = "c*2"
	if wire.AnswerID(a) == wire.AnswerID(other) {
		t.Error("two rejected calls with different (malformed) call ids share an id")
	}
}

// TestAnswerIDs checks that the event id and Nats-Msg-Id depend on the tenant,
// tool and call id only, so that every answer to one call is one message, and a
// call id used again for another tool is another call.
func TestAnswerIDs(t *testing.T) {
	completed := base(events.KindCompleted)
	completed.Outcome = "a"
	dedup := base(events.KindDeduplicated)
	dedup.Key, dedup.Outcome, dedup.Time = key, "b", when.Add(time.Hour)
	indet := base(events.KindIndeterminate)
	indet.Reason, indet.RunID = events.ReasonHolderLost, "run_2"

	if wire.AnswerID(completed) != wire.AnswerID(dedup) || wire.AnswerID(completed) != wire.AnswerID(indet) {
		t.Errorf("answers to one call have ids %q, %q, %q; want one", wire.AnswerID(completed), wire.AnswerID(dedup), wire.AnswerID(indet))
	}
	if wire.MsgID(completed) != wire.AnswerID(completed) || wire.MsgID(dedup) != wire.MsgID(completed) {
		t.Errorf("MsgID %q / %q, want the id %q", wire.MsgID(completed), wire.MsgID(dedup), wire.AnswerID(completed))
	}
	e1, err := wire.AnswerEvent(completed, source)
	if err != nil {
		t.Fatal(err)
	}
	e2, err := wire.AnswerEvent(completed, "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	if e1.ID() != e2.ID() || e1.ID() != wire.MsgID(completed) {
		t.Errorf("republished answer has id %q then %q; want %q both times", e1.ID(), e2.ID(), wire.MsgID(completed))
	}

	otherCall := completed
	otherCall.CallID = "call-8"
	otherTenant := completed
	otherTenant.Tenant = "globex"
	otherTool := completed
	otherTool.Tool = "other"
	// Length-prefixed hashing: "ab"+"c" and "a"+"bc" must differ.
	split1 := events.Answer{Kind: events.KindCompleted, Tenant: "ab", Tool: "t", CallID: "c"}
	split2 := events.Answer{Kind: events.KindCompleted, Tenant: "a", Tool: "bt", CallID: "c"}
	resolved := events.Answer{Kind: events.KindResolved, Tenant: "acme", CallID: "call-7", Key: key, Action: events.ActionRelease, Time: when}
	resolvedLater := resolved
	resolvedLater.Time = when.Add(time.Minute)
	ids := map[string]string{}
	for name, id := range map[string]string{
		"call": wire.AnswerID(completed), "other call": wire.AnswerID(otherCall), "other tenant": wire.AnswerID(otherTenant),
		"other tool": wire.AnswerID(otherTool),
		"split1":     wire.AnswerID(split1), "split2": wire.AnswerID(split2), "resolved": wire.AnswerID(resolved), "resolved later": wire.AnswerID(resolvedLater),
	} {
		if prev, dup := ids[id]; dup {
			t.Errorf("%s and %s share id %s", name, prev, id)
		}
		ids[id] = name
	}
}

func TestAnswerEventRefuses(t *testing.T) {
	mod := func(kind events.Kind, f func(*events.Answer)) events.Answer {
		a := base(kind)
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
	// Each base answer is valid; the cases break one thing.
	for _, k := range events.Kinds() {
		if _, err := wire.AnswerEvent(mod(k, func(*events.Answer) {}), source); err != nil {
			t.Fatalf("base %s answer refused: %v", k, err)
		}
	}
	tests := []struct {
		name string
		a    events.Answer
	}{
		{"unknown kind", mod("done", func(*events.Answer) {})},
		{"no kind", mod("", func(*events.Answer) {})},
		{"bad tenant", mod(events.KindCompleted, func(a *events.Answer) { a.Tenant = "a.b" })},
		{"no tenant", mod(events.KindRejected, func(a *events.Answer) { a.Tenant = "" })},
		{"completed bad tool", mod(events.KindCompleted, func(a *events.Answer) { a.Tool = "*" })},
		{"completed no run", mod(events.KindCompleted, func(a *events.Answer) { a.RunID = "" })},
		{"failed bad call id", mod(events.KindFailed, func(a *events.Answer) { a.CallID = "c 1" })},
		{"bad key", mod(events.KindCompleted, func(a *events.Answer) { a.Key = strings.ToUpper(key) })},
		{"short key", mod(events.KindCompleted, func(a *events.Answer) { a.Key = key[:63] })},
		{"completed with error", mod(events.KindCompleted, func(a *events.Answer) { a.Error = "x" })},
		{"completed with reason", mod(events.KindCompleted, func(a *events.Answer) { a.Reason = events.ReasonTimeout })},
		{"deduplicated without key", mod(events.KindDeduplicated, func(a *events.Answer) { a.Key = "" })},
		{"deduplicated with code", mod(events.KindDeduplicated, func(a *events.Answer) { a.Code = events.CodeToolError })},
		{"indeterminate no reason", mod(events.KindIndeterminate, func(a *events.Answer) { a.Reason = "" })},
		{"indeterminate unknown reason", mod(events.KindIndeterminate, func(a *events.Answer) { a.Reason = "crashed" })},
		{"indeterminate with outcome", mod(events.KindIndeterminate, func(a *events.Answer) { a.Outcome = "x" })},
		{"key underivable with key", mod(events.KindIndeterminate, func(a *events.Answer) { a.Reason = events.ReasonKeyUnderivable })},
		{"failed no error", mod(events.KindFailed, func(a *events.Answer) { a.Error = "" })},
		{"failed rejection code", mod(events.KindFailed, func(a *events.Answer) { a.Code = events.CodeBadToken })},
		{"failed with body entered", mod(events.KindFailed, func(a *events.Answer) { a.BodyEntered = true })},
		{"rejected failure code", mod(events.KindRejected, func(a *events.Answer) { a.Code = events.CodeTimeout })},
		{"rejected no code", mod(events.KindRejected, func(a *events.Answer) { a.Code = "" })},
		{"rejected no error", mod(events.KindRejected, func(a *events.Answer) { a.Error = "" })},
		{"rejected no call id", mod(events.KindRejected, func(a *events.Answer) { a.CallID = "" })},
		{"rejected with operator", mod(events.KindRejected, func(a *events.Answer) { a.Operator = "bob" })},
		{"resolved no key", mod(events.KindResolved, func(a *events.Answer) { a.Key = "" })},
		{"resolved no action", mod(events.KindResolved, func(a *events.Answer) { a.Action = "" })},
		{"resolved bad action", mod(events.KindResolved, func(a *events.Answer) { a.Action = "undo" })},
		{"release with outcome", mod(events.KindResolved, func(a *events.Answer) { a.Outcome = "x" })},
		{"resolved with reason", mod(events.KindResolved, func(a *events.Answer) { a.Reason = events.ReasonTimeout })},
		{"action on an answer", mod(events.KindCompleted, func(a *events.Answer) { a.Action = events.ActionComplete })},
		{"field on failed", mod(events.KindFailed, func(a *events.Answer) { a.Field = "x" })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := wire.AnswerEvent(tt.a, source)
			if !errors.Is(err, events.ErrInvalidAnswer) {
				t.Fatalf("Event() = %v, %v; want ErrInvalidAnswer", e.ID(), err)
			}
		})
	}
	if _, err := wire.AnswerEvent(mod(events.KindCompleted, func(*events.Answer) {}), ""); !errors.Is(err, events.ErrInvalidAnswer) {
		t.Errorf("Event(\"\") error = %v, want ErrInvalidAnswer", err)
	}
	if _, err := wire.AnswerEvent(mod(events.KindCompleted, func(*events.Answer) {}), "%zz"); !errors.Is(err, events.ErrInvalidAnswer) {
		t.Errorf("Event(unparseable source) error = %v, want ErrInvalidAnswer", err)
	}
}

// answerEvent builds a valid completed answer event and lets f spoil it.
func answerEvent(t *testing.T, kind events.Kind, f func(*event.Event)) event.Event {
	t.Helper()
	a := base(kind)
	switch kind {
	case events.KindCompleted:
		a.Key, a.Outcome = key, "x"
	case events.KindResolved:
		a.Key, a.Action, a.Outcome = key, events.ActionComplete, "x"
	}
	e, err := wire.AnswerEvent(a, source)
	if err != nil {
		t.Fatal(err)
	}
	f(&e)
	back, _ := roundTrip(t, e)
	return back
}

func TestAnswerFromEventRefuses(t *testing.T) {
	tests := []struct {
		name     string
		e        func(t *testing.T) event.Event
		wantData bool // the error must match ErrInvalidData too
	}{
		{"no context", func(*testing.T) event.Event { return event.Event{} }, false},
		{"a call", func(t *testing.T) event.Event {
			e, err := wire.CallEvent(sampleCall())
			if err != nil {
				t.Fatal(err)
			}
			return e
		}, false},
		{"foreign type", func(t *testing.T) event.Event {
			return answerEvent(t, events.KindCompleted, func(e *event.Event) { e.SetType("com.example.completed") })
		}, false},
		{"spec 0.3", func(t *testing.T) event.Event {
			e := answerEvent(t, events.KindCompleted, func(*event.Event) {})
			e.SetSpecVersion("0.3")
			return e
		}, false},
		{"no tenant", func(t *testing.T) event.Event {
			return answerEvent(t, events.KindCompleted, func(e *event.Event) { e.SetExtension("tenant", nil) })
		}, false},
		{"no callid", func(t *testing.T) event.Event {
			return answerEvent(t, events.KindCompleted, func(e *event.Event) { e.SetExtension("callid", nil) })
		}, false},
		{"bad runid", func(t *testing.T) event.Event {
			return answerEvent(t, events.KindCompleted, func(e *event.Event) { e.SetExtension("runid", "r.1") })
		}, false},
		{"tenant not a string", func(t *testing.T) event.Event {
			return answerEvent(t, events.KindCompleted, func(e *event.Event) { e.SetExtension("tenant", 5) })
		}, false},
		{"bad key extension", func(t *testing.T) event.Event {
			return answerEvent(t, events.KindCompleted, func(e *event.Event) { e.SetExtension("idempotencykey", "abc") })
		}, false},
		{"subject and data disagree", func(t *testing.T) event.Event {
			return answerEvent(t, events.KindCompleted, func(e *event.Event) { e.SetSubject("cancel") })
		}, false},
		{"key extension and data disagree", func(t *testing.T) event.Event {
			return answerEvent(t, events.KindResolved, func(e *event.Event) { e.SetExtension("idempotencykey", strings.Repeat("0", 64)) })
		}, false},
		{"text/plain", func(t *testing.T) event.Event {
			e := answerEvent(t, events.KindCompleted, func(*event.Event) {})
			e.SetDataContentType("text/plain")
			return e
		}, false},
		{"data missing outcome", func(t *testing.T) event.Event {
			return answerEvent(t, events.KindCompleted, func(e *event.Event) { e.DataEncoded = []byte(`{"tool":"book"}`) })
		}, true},
		{"data with a stranger", func(t *testing.T) event.Event {
			return answerEvent(t, events.KindCompleted, func(e *event.Event) {
				e.DataEncoded = []byte(`{"tool":"book","outcome":"x","reason":"timeout"}`)
			})
		}, true},
		{"no data", func(t *testing.T) event.Event {
			return answerEvent(t, events.KindCompleted, func(e *event.Event) { e.DataEncoded = nil })
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := wire.AnswerFromEvent(tt.e(t))
			if !errors.Is(err, events.ErrInvalidAnswer) {
				t.Fatalf("AnswerFromEvent = %+v, %v; want ErrInvalidAnswer", a, err)
			}
			if tt.wantData && !errors.Is(err, wire.ErrInvalidData) {
				t.Errorf("error %v does not match ErrInvalidData", err)
			}
		})
	}
}

// TestAnswerEventValidatesData shows that Event checks its data against the
// schema, beyond the field checks: the schema bounds a resolution's operator, which
// nothing else does.
func TestAnswerEventValidatesData(t *testing.T) {
	resolved := events.Answer{Kind: events.KindResolved, Tenant: "acme", Key: key, Action: events.ActionRelease,
		Operator: strings.Repeat("o", 257)}
	if _, err := wire.AnswerEvent(resolved, source); !errors.Is(err, wire.ErrInvalidData) {
		t.Errorf("Event() error = %v, want ErrInvalidData", err)
	}
}

// TestRejectedFieldIsCut checks that an overlong field (a pointer deep into the
// arguments) cannot stop a call from being answered.
func TestRejectedFieldIsCut(t *testing.T) {
	a := events.Answer{Kind: events.KindRejected, Tenant: "acme", CallID: "c", Error: "e",
		Code: events.CodeTooDeep, Field: "/" + strings.Repeat("é", 600)}
	e, err := wire.AnswerEvent(a, source)
	if err != nil {
		t.Fatal(err)
	}
	got, err := wire.AnswerFromEvent(e)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Field) > events.MaxFieldLen || !strings.HasPrefix(a.Field, got.Field) || len(got.Field) < events.MaxFieldLen-1 {
		t.Errorf("field is %d bytes, want a prefix of at most %d", len(got.Field), events.MaxFieldLen)
	}
}

func TestAnswerDataIsNotHTMLEscaped(t *testing.T) {
	a := events.Answer{Kind: events.KindCompleted, Tenant: "acme", RunID: "r", CallID: "c", Tool: "t", Outcome: "<b>&</b>"}
	e, err := wire.AnswerEvent(a, source)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"tool":"t","outcome":"<b>&</b>"}`; string(e.Data()) != want {
		t.Errorf("data = %s, want %s", e.Data(), want)
	}
}
