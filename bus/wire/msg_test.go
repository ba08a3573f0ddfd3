package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"pgregory.net/rapid"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

var msgModes = []wire.Mode{wire.Structured, wire.Binary}

// oddText draws what a header value holds only once percent-encoded: spaces,
// quotes, percent signs, control characters, characters beyond ASCII, and
// bytes that are not UTF-8.
var oddText = rapid.OneOf(rapid.StringMatching(`[a-z "%\\\x00-\x1f\x7f\x{e9}\x{2028}\x{1f600}]{1,12}`),
	rapid.SampledFrom([]string{"\xff", "a\xc3", "\xed\xa0\x80", "%41", "%", " ", "\r\nx: y"}))

// drawCall draws a call as TestCallJSONMatchesSDK does, with the fields that
// travel in headers (repeat, interactions) besides, and odd trace contexts.
func drawCall(t *rapid.T) events.Call {
	valid := rapid.StringMatching(`[A-Za-z0-9_-]{1,8}`)
	token := rapid.OneOf(valid, valid, valid, valid, valid, valid, valid, valid, rapid.Just(""), rapid.String())
	text := rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringMatching(`[a-z"\\<>&\x00-\x1f\x{2028}]{0,12}`), oddText)
	args := rapid.OneOf(rapid.Just(`{"flight":"LH1","seats":2}`), rapid.Just(`{ "a" : "<b>\u00e9" }`), rapid.Just(""),
		rapid.Just(`[1]`), rapid.Just(`{"a":`), rapid.Just(` {}`), rapid.String())
	c := events.Call{
		Tenant: rapid.SampledFrom([]string{"acme", "acme", "acme", "", "a.b"}).Draw(t, "tenant"),
		RunID:  token.Draw(t, "run"), CallID: token.Draw(t, "call"), Tool: token.Draw(t, "tool"),
		Source: rapid.OneOf(rapid.Just("/agents/planner"), rapid.Just("/agents/planner"),
			rapid.SampledFrom([]string{"urn:x", "https://a.example/b?c=d#e", "", "#", "%zz", "a b", `/"q"`, "/a%20b", "/é\u2028"}),
			rapid.String()).Draw(t, "source"),
		TraceParent: rapid.OneOf(rapid.SampledFrom([]string{"", "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}), oddText).
			Draw(t, "traceparent"),
		TraceState: text.Draw(t, "tracestate"),
		Repeat:     rapid.Bool().Draw(t, "repeat"),
		Interactions: rapid.SampledFrom([][]string{nil, nil, {}, {wire.CanElicit}, {wire.CanElicit, wire.CanSample}, {"x y", ""}}).
			Draw(t, "interactions"),
	}
	if a := args.Draw(t, "arguments"); a != "" {
		c.Arguments = json.RawMessage(a)
	}
	if rapid.Bool().Draw(t, "timed") {
		c.Time = time.Unix(rapid.Int64Range(-1e10, 1e11).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "nsec"))
	}
	return c
}

// drawAnswer draws an answer of any kind (the fields each kind carries, and
// now and then ones it does not), and a source.
func drawAnswer(t *rapid.T) (events.Answer, string) {
	valid := rapid.StringMatching(`[A-Za-z0-9_-]{1,8}`)
	token := rapid.OneOf(valid, valid, valid, valid, valid, valid, rapid.Just(""), rapid.String())
	text := rapid.OneOf(rapid.Just(""), rapid.String(), rapid.StringMatching(`[a-z"\\<>&\x00-\x1f\x{2028}]{0,12}`), oddText)
	kinds := []events.Kind{events.KindCompleted, events.KindDeduplicated, events.KindIndeterminate,
		events.KindFailed, events.KindRejected, events.KindResolved, "bogus"}
	a := events.Answer{
		Kind:   rapid.SampledFrom(kinds).Draw(t, "kind"),
		Tenant: rapid.SampledFrom([]string{"acme", "acme", "acme", "acme", "acme", "", "a.b"}).Draw(t, "tenant"),
		Tool:   token.Draw(t, "tool"),
		RunID:  token.Draw(t, "run"),
		CallID: token.Draw(t, "call"),
		Key:    rapid.SampledFrom([]string{"", strings.Repeat("ab", 32), strings.Repeat("ab", 32), "nothex"}).Draw(t, "key"),
		TraceParent: rapid.OneOf(rapid.SampledFrom([]string{"", "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}), oddText).
			Draw(t, "traceparent"),
		TraceState: text.Draw(t, "tracestate"),
	}
	switch a.Kind {
	case events.KindCompleted, events.KindDeduplicated:
		a.Outcome = text.Draw(t, "outcome")
	case events.KindIndeterminate:
		a.Reason = rapid.SampledFrom(events.Reasons()).Draw(t, "reason")
		a.BodyEntered = rapid.Bool().Draw(t, "entered")
		a.Error = text.Draw(t, "error")
	case events.KindFailed:
		a.Error, a.Code = text.Draw(t, "error"), rapid.SampledFrom(events.FailureCodes()).Draw(t, "code")
	case events.KindRejected:
		a.Error, a.Code = text.Draw(t, "error"), rapid.SampledFrom(events.RejectionCodes()).Draw(t, "code")
		a.Field = text.Draw(t, "field")
	case events.KindResolved:
		a.Action = rapid.SampledFrom([]events.Action{events.ActionComplete, events.ActionRelease}).Draw(t, "action")
		a.Operator = rapid.OneOf(rapid.Just("ops@acme"), text).Draw(t, "operator")
		if a.Action == events.ActionComplete {
			a.Outcome = text.Draw(t, "outcome")
		}
	}
	if rapid.IntRange(0, 9).Draw(t, "stray") == 0 {
		a.Outcome, a.Code = text.Draw(t, "stray outcome"), events.Code(text.Draw(t, "stray code"))
	}
	if rapid.Bool().Draw(t, "timed") {
		a.Time = time.Unix(rapid.Int64Range(-1e10, 1e11).Draw(t, "sec"), rapid.Int64Range(0, 999999999).Draw(t, "nsec")).
			In(time.FixedZone("x", rapid.IntRange(-50000, 50000).Draw(t, "zone")))
	}
	source := rapid.OneOf(rapid.Just("/toolexec/executor"), rapid.Just("/toolexec/executor"), rapid.Just("/toolexec/executor"),
		rapid.SampledFrom([]string{"urn:x", "https://a.example/b?c=d#e", "", "#", "?", "%zz", "a b", `/"q"`, "/é\u2028", "/a%20b"}),
		rapid.String()).Draw(t, "source")
	return a, source
}

// sdkCallMsg is the lasting oracle of CallMsg: the SDK's event of the call
// (CallEvent), written by the SDK in the mode (Encode), on the call's
// subject, with the headers docs/PROTOCOL.md gives a call message.
func sdkCallMsg(c events.Call, mode wire.Mode) (*nats.Msg, error) {
	e, err := wire.CallEvent(c)
	if err != nil {
		return nil, err
	}
	h, data, err := wire.Encode(e, mode)
	if err != nil {
		return nil, err
	}
	if c.TraceParent != "" {
		h["traceparent"] = []string{c.TraceParent}
	}
	h["Nats-Expected-Stream"] = []string{wire.CallStream}
	if c.Repeat {
		h["Toolexec-Repeat"] = []string{"true"}
	}
	if len(c.Interactions) > 0 {
		h["Toolexec-Interactions"] = []string{strings.Join(c.Interactions, ",")}
	}
	return &nats.Msg{Subject: wire.CallSubject(c.Tenant, c.Tool, c.CallID), Header: h, Data: data}, nil
}

// sdkAnswerMsg is the lasting oracle of AnswerMsg, as sdkCallMsg is of
// CallMsg.
func sdkAnswerMsg(a events.Answer, source string, mode wire.Mode) (*nats.Msg, error) {
	e, err := wire.AnswerEvent(a, source)
	if err != nil {
		return nil, err
	}
	h, data, err := wire.Encode(e, mode)
	if err != nil {
		return nil, err
	}
	if a.TraceParent != "" {
		h["traceparent"] = []string{a.TraceParent}
	}
	h["Nats-Msg-Id"] = []string{wire.MsgID(a)}
	h["Nats-Expected-Stream"] = []string{wire.EventStream}
	return &nats.Msg{Subject: wire.AnswerSubject(a), Header: h, Data: data}, nil
}

// The builders CallMsg and AnswerMsg replaced, as they were (issue 33,
// point 4), kept as the oracle that the wire did not change with them:
// bus.Client.callMsg (with the client's default source already filled in),
// bus's answerMsg with the headers bus.Worker.publish added, and
// admin.Service.publishAudit's message with the headers its publish options
// added.

func oldCallMsg(call events.Call, mode wire.Mode) (*nats.Msg, error) {
	subject := wire.CallSubject(call.Tenant, call.Tool, call.CallID)
	var msg *nats.Msg
	if mode == wire.Structured {
		data, err := wire.CallJSON(call)
		if err != nil {
			return nil, err
		}
		msg = wire.StructuredMsg(subject, data)
	} else {
		e, err := wire.CallEvent(call)
		if err != nil {
			return nil, err
		}
		if msg, err = wire.NewMsg(subject, e, mode); err != nil {
			return nil, err
		}
	}
	if call.TraceParent != "" {
		msg.Header.Set("traceparent", call.TraceParent)
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header[jetstream.ExpectedStreamHeader] = []string{wire.CallStream}
	if call.Repeat {
		msg.Header[wire.RepeatHeader] = []string{"true"}
	}
	if len(call.Interactions) > 0 {
		msg.Header[wire.InteractionsHeader] = []string{strings.Join(call.Interactions, ",")}
	}
	return msg, nil
}

func oldWorkerAnswerMsg(a events.Answer, source string, mode wire.Mode) (*nats.Msg, error) {
	var msg *nats.Msg
	if mode == wire.Structured {
		data, err := wire.AnswerJSON(a, source)
		if err != nil {
			return nil, err
		}
		msg = wire.StructuredMsg(wire.AnswerSubject(a), data)
	} else {
		e, err := wire.AnswerEvent(a, source)
		if err != nil {
			return nil, err
		}
		if msg, err = wire.NewMsg(wire.AnswerSubject(a), e, mode); err != nil {
			return nil, err
		}
	}
	if a.TraceParent != "" {
		msg.Header.Set("traceparent", a.TraceParent)
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	msg.Header[jetstream.MsgIDHeader] = []string{wire.MsgID(a)}
	msg.Header[jetstream.ExpectedStreamHeader] = []string{wire.EventStream}
	return msg, nil
}

func oldAdminAnswerMsg(ev events.Answer, source string) (*nats.Msg, error) {
	data, err := wire.AnswerJSON(ev, source)
	if err != nil {
		return nil, err
	}
	msg := wire.StructuredMsg(wire.AnswerSubject(ev), data)
	// jetstream.WithMsgID and WithExpectStream, as PublishMsg applies them.
	msg.Header.Set(jetstream.MsgIDHeader, wire.MsgID(ev))
	msg.Header.Set(jetstream.ExpectedStreamHeader, wire.EventStream)
	return msg, nil
}

// sameMsg reports how got and want differ, or "": subject, reply, every
// header (name, values and their order) and the payload, byte for byte or,
// with sdk, after shortEscapes (see there).
func sameMsg(got, want *nats.Msg, sdk bool) string {
	gd, wd := got.Data, want.Data
	if sdk {
		gd, wd = shortEscapes(gd), shortEscapes(wd)
	}
	switch {
	case got.Subject != want.Subject || got.Reply != want.Reply:
		return "subject " + got.Subject + " reply " + got.Reply + ", want " + want.Subject + " reply " + want.Reply
	case !reflect.DeepEqual(got.Header, want.Header):
		return "headers differ:\n" + headerText(got.Header) + "want\n" + headerText(want.Header)
	case !bytes.Equal(gd, wd):
		return "payload " + string(got.Data) + "\nwant    " + string(want.Data)
	}
	return ""
}

func headerText(h nats.Header) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(h)) {
		b.WriteString(k + ": " + strings.Join(h[k], " | ") + "\n")
	}
	return b.String()
}

// sameError reports whether got and want are both nil or both errors of the
// same text and kind.
func sameError(got, want error) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	var g, w *events.RejectedError
	if errors.As(got, &g) != errors.As(want, &w) || (g != nil && (g.Code != w.Code || g.Field != w.Field)) {
		return false
	}
	return errors.Is(got, events.ErrInvalidAnswer) == errors.Is(want, events.ErrInvalidAnswer) &&
		errors.Is(got, wire.ErrInvalidData) == errors.Is(want, wire.ErrInvalidData)
}

// TestCallMsg holds CallMsg, for any call in either mode, to the builder it
// replaced (the same message, header for header and byte for byte, or an
// error of the same kind) and to the SDK (the same message but for the
// escapes shortEscapes evens out, or an error where the SDK has one). It
// refuses a call in either mode with the error CallJSON returns: the old
// builder's binary mode gave the SDK's text instead.
func TestCallMsg(tt *testing.T) {
	for _, mode := range msgModes {
		tt.Run(mode.String(), func(tt *testing.T) {
			accepted := 0
			rapid.Check(tt, func(t *rapid.T) {
				c := drawCall(t)
				got, err := wire.CallMsg(c, mode)
				old, oldErr := oldCallMsg(c, mode)
				if (err == nil) != (oldErr == nil) || !sameError(err, oldErr) {
					t.Fatalf("CallMsg error %v, the old builder's %v, for %+v", err, oldErr, c)
				}
				if _, jsonErr := wire.CallJSON(c); !sameText(err, jsonErr) {
					t.Fatalf("CallMsg error %v, CallJSON's %v, for %+v", err, jsonErr, c)
				}
				sdk, sdkErr := sdkCallMsg(c, mode)
				if !sameError(err, sdkErr) {
					t.Fatalf("CallMsg error %v, the SDK's %v, for %+v", err, sdkErr, c)
				}
				if err != nil {
					return
				}
				if d := sameMsg(got, old, false); d != "" {
					t.Fatalf("for %+v, against the old builder: %s", c, d)
				}
				if d := sameMsg(got, sdk, true); d != "" {
					t.Fatalf("for %+v, against the SDK: %s", c, d)
				}
				accepted++
			})
			if accepted == 0 {
				tt.Error("no call was accepted: the generator does not reach the messages compared")
			}
		})
	}
}

// TestAnswerMsg holds AnswerMsg, for any answer and source in either mode, to
// the worker's builder it replaced and, in structured mode, the admin
// service's (the same message, header for header and byte for byte, or an
// error of the same kind), and to the SDK (as TestCallMsg). It refuses an
// answer in either mode with the error AnswerJSON returns.
func TestAnswerMsg(tt *testing.T) {
	for _, mode := range msgModes {
		tt.Run(mode.String(), func(tt *testing.T) {
			accepted := 0
			rapid.Check(tt, func(t *rapid.T) {
				a, source := drawAnswer(t)
				got, err := wire.AnswerMsg(a, source, mode)
				old, oldErr := oldWorkerAnswerMsg(a, source, mode)
				if (err == nil) != (oldErr == nil) || !sameError(err, oldErr) {
					t.Fatalf("AnswerMsg error %v, the worker's old builder's %v, for %+v from %q", err, oldErr, a, source)
				}
				if _, jsonErr := wire.AnswerJSON(a, source); !sameText(err, jsonErr) {
					t.Fatalf("AnswerMsg error %v, AnswerJSON's %v, for %+v from %q", err, jsonErr, a, source)
				}
				sdk, sdkErr := sdkAnswerMsg(a, source, mode)
				if (err == nil) != (sdkErr == nil) || !sameError(err, sdkErr) {
					t.Fatalf("AnswerMsg error %v, the SDK's %v, for %+v from %q", err, sdkErr, a, source)
				}
				var admin *nats.Msg
				if mode == wire.Structured {
					var adminErr error
					admin, adminErr = oldAdminAnswerMsg(a, source)
					if (err == nil) != (adminErr == nil) || (err != nil && err.Error() != adminErr.Error()) {
						t.Fatalf("AnswerMsg error %v, the admin's old builder's %v, for %+v from %q", err, adminErr, a, source)
					}
				}
				if err != nil {
					return
				}
				if d := sameMsg(got, old, false); d != "" {
					t.Fatalf("for %+v from %q, against the worker's old builder: %s", a, source, d)
				}
				if admin != nil && a.TraceParent == "" {
					// The admin service's resolutions carry no trace context.
					if d := sameMsg(got, admin, false); d != "" {
						t.Fatalf("for %+v from %q, against the admin's old builder: %s", a, source, d)
					}
				}
				if d := sameMsg(got, sdk, true); d != "" {
					t.Fatalf("for %+v from %q, against the SDK: %s", a, source, d)
				}
				accepted++
			})
			if accepted == 0 {
				tt.Error("no answer was accepted: the generator does not reach the messages compared")
			}
		})
	}
}
