package wire_test

import (
	"strings"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// binaryCall returns a call event as binary mode delivers it: attributes set,
// data the raw payload.
func binaryCall(t *testing.T, data string) event.Event {
	t.Helper()
	e := event.New()
	e.SetType(wire.CallType)
	e.SetID("call-7")
	e.SetSource("/agents/planner")
	e.SetExtension(wire.ExtRunID, "run_1")
	e.SetDataContentType(event.ApplicationJSON)
	e.DataEncoded = []byte(data)
	return e
}

// TestCallFromEventNesting: data nested deeper than encoding/json reads is
// refused as too deep, not as "not JSON"; nesting within it is left for the key
// derivation to judge; brackets inside strings do not count.
func TestCallFromEventNesting(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + "0" + strings.Repeat("]", n) }
	_, err := wire.CallFromEvent(binaryCall(t, `{"arguments":{"x":`+deep(20000)+`}}`), "acme", "book")
	checkReject(t, err, events.CodeTooDeep, "data")

	_, err = wire.CallFromEvent(binaryCall(t, `{"arguments":{"x":`+deep(20000)), "acme", "book")
	checkReject(t, err, events.CodeTooDeep, "data") // too deep before it is cut short

	_, err = wire.CallFromEvent(binaryCall(t, `{"arguments":{"x":"`+strings.Repeat("[", 20000)+`"`), "acme", "book")
	checkReject(t, err, events.CodeBadData, "data") // not JSON, and not deep either

	c, err := wire.CallFromEvent(binaryCall(t, `{"arguments":{"x":`+deep(500)+`}}`), "acme", "book")
	if err != nil {
		t.Fatalf("500 deep: %v", err)
	}
	if !strings.HasPrefix(string(c.Arguments), `{"x":[[[`) {
		t.Errorf("arguments = %.20s...", c.Arguments)
	}
}

// TestCallFromEventInvalidUTF8: data that is not UTF-8 (binary mode delivers
// it as sent) is rejected invalid_unicode, as a structured payload is, rather
// than read with the bad bytes turned into U+FFFD.
func TestCallFromEventInvalidUTF8(t *testing.T) {
	for name, data := range map[string]string{
		"in an argument":       "{\"arguments\":{\"flight\":\"L\xcc\"}}",
		"in a member name":     "{\"arguments\":{\"\xff\":1}}",
		"outside the argument": "{\"arguments\":{},\"\xfe\":1}",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := wire.CallFromEvent(binaryCall(t, data), "acme", "book")
			checkReject(t, err, events.CodeInvalidUnicode, "data")
		})
	}
}
