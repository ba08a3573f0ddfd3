package wire_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

const traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func sampleCall() events.Call {
	return events.Call{
		Tenant:      "acme",
		RunID:       "run_1",
		CallID:      "call-7",
		Tool:        "book",
		Source:      "agents/planner",
		Arguments:   json.RawMessage(`{"flight":"BA117","seats":2,"n":9007199254740993}`),
		TraceParent: traceParent,
		TraceState:  "vendor=1",
		Time:        time.Date(2025, 3, 1, 12, 0, 0, 123_000_000, time.UTC),
	}
}

func TestCallRoundTrip(t *testing.T) {
	c := sampleCall()
	e, err := wire.CallEvent(c)
	if err != nil {
		t.Fatal(err)
	}
	back, m := roundTrip(t, e)
	wantAttrs(t, m, map[string]any{
		"specversion":     "1.0",
		"type":            "io.tesserix.toolexec.call",
		"id":              "call-7",
		"source":          "agents/planner",
		"subject":         "book",
		"tenant":          "acme",
		"runid":           "run_1",
		"datacontenttype": "application/json",
		"time":            "2025-03-01T12:00:00.123Z",
		"traceparent":     traceParent,
		"tracestate":      "vendor=1",
		"data":            nil,
	})
	data, _ := m["data"].(map[string]any)
	if _, ok := data["arguments"].(map[string]any); !ok || len(data) != 1 {
		t.Errorf("data = %#v, want {\"arguments\": {...}}", m["data"])
	}

	got, err := wire.CallFromEvent(back, "acme", "book")
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Arguments) != string(c.Arguments) {
		t.Errorf("arguments = %s, want %s exactly", got.Arguments, c.Arguments)
	}
	if !equalCalls(got, c) {
		t.Errorf("CallFromEvent = %+v\nwant             %+v", got, c)
	}
}

func equalCalls(a, b events.Call) bool {
	return a.Tenant == b.Tenant && a.RunID == b.RunID && a.CallID == b.CallID && a.Tool == b.Tool &&
		a.Source == b.Source && a.TraceParent == b.TraceParent && a.TraceState == b.TraceState &&
		string(a.Arguments) == string(b.Arguments) && a.Time.Equal(b.Time)
}

func TestCallEventMinimal(t *testing.T) {
	e, err := wire.CallEvent(events.Call{Tenant: "t", RunID: "r", CallID: "c", Tool: "x", Source: "s"})
	if err != nil {
		t.Fatal(err)
	}
	_, m := roundTrip(t, e)
	wantAttrs(t, m, map[string]any{
		"specversion": "1.0", "type": wire.CallType, "id": "c", "source": "s", "subject": "x",
		"tenant": "t", "runid": "r", "datacontenttype": "application/json", "data": nil,
	})
	if string(e.Data()) != `{"arguments":{}}` {
		t.Errorf("data = %s, want nil arguments sent as {}", e.Data())
	}

	args := `{ "q": "<a&b>", "n": 1.50, "n": 2 }`
	e, err = wire.CallEvent(events.Call{Tenant: "t", RunID: "r", CallID: "c", Tool: "x", Source: "s", Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"arguments":` + args + `}`; string(e.Data()) != want {
		t.Errorf("data = %s, want the arguments byte for byte: %s", e.Data(), want)
	}
}

func TestCallEventRejects(t *testing.T) {
	tests := []struct {
		name      string
		mutate    func(*events.Call)
		wantCode  events.Code
		wantField string
	}{
		{"bad tenant", func(c *events.Call) { c.Tenant = "a.b" }, events.CodeBadToken, "tenant"},
		{"empty run", func(c *events.Call) { c.RunID = "" }, events.CodeBadToken, "runid"},
		{"bad call id", func(c *events.Call) { c.CallID = "c*" }, events.CodeBadToken, "id"},
		{"bad tool", func(c *events.Call) { c.Tool = "bo ok" }, events.CodeBadToken, "subject"},
		{"no source", func(c *events.Call) { c.Source = "" }, events.CodeMissingAttribute, "source"},
		{"arguments array", func(c *events.Call) { c.Arguments = json.RawMessage(`[1]`) }, events.CodeArgumentsNotObject, "arguments"},
		{"arguments null", func(c *events.Call) { c.Arguments = json.RawMessage(`null`) }, events.CodeArgumentsNotObject, "arguments"},
		{"arguments not JSON", func(c *events.Call) { c.Arguments = json.RawMessage(`{"a":`) }, events.CodeBadData, "arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sampleCall()
			tt.mutate(&c)
			_, err := wire.CallEvent(c)
			checkReject(t, err, tt.wantCode, tt.wantField)
		})
	}
}

// checkReject asserts that err is a *RejectedError with the given code and field.
func checkReject(t *testing.T, err error, code events.Code, field string) {
	t.Helper()
	var re *events.RejectedError
	if !errors.As(err, &re) {
		t.Fatalf("error = %v (%T), want *RejectedError %s", err, err, code)
	}
	if !errors.Is(err, events.ErrRejected) {
		t.Errorf("errors.Is(%v, ErrRejected) = false", err)
	}
	if re.Code != code || re.Field != field {
		t.Errorf("RejectedError{Code: %q, Field: %q, Msg: %q}, want code %q field %q", re.Code, re.Field, re.Message, code, field)
	}
	if re.Message == "" {
		t.Error("RejectedError has no message")
	}
	if !strings.HasPrefix(re.Error(), string(code)) {
		t.Errorf("Error() = %q, want it to start with the code", re.Error())
	}
}

// callJSON is a well-formed structured call; cases edit it.
const callJSON = `{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"call-7","source":"agents/planner",` +
	`"subject":"book","tenant":"acme","runid":"run_1","datacontenttype":"application/json",` +
	`"data":{"arguments":{"flight":"BA117"}}}`

// withAttr returns callJSON with attribute name set to the raw JSON value v, or
// removed when v is "".
func withAttr(t *testing.T, name, v string) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(callJSON), &m); err != nil {
		t.Fatal(err)
	}
	if v == "" {
		delete(m, name)
	} else {
		m[name] = json.RawMessage(v)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCallFromEventAccepts(t *testing.T) {
	tests := []struct {
		name     string
		event    func(t *testing.T) event.Event
		wantArgs string
	}{
		{"as sent", func(t *testing.T) event.Event { return decode(t, callJSON) }, `{"flight":"BA117"}`},
		{"no tenant extension", func(t *testing.T) event.Event { return decode(t, withAttr(t, "tenant", "")) }, `{"flight":"BA117"}`},
		{"no subject attribute", func(t *testing.T) event.Event { return decode(t, withAttr(t, "subject", "")) }, `{"flight":"BA117"}`},
		{"no datacontenttype", func(t *testing.T) event.Event { return decode(t, withAttr(t, "datacontenttype", "")) }, `{"flight":"BA117"}`},
		{"charset utf-8", func(t *testing.T) event.Event {
			return decode(t, withAttr(t, "datacontenttype", `"application/json; charset=UTF-8"`))
		}, `{"flight":"BA117"}`},
		{"text/json", func(t *testing.T) event.Event {
			return decode(t, withAttr(t, "datacontenttype", `"text/json"`))
		}, `{"flight":"BA117"}`},
		{"+json type", func(t *testing.T) event.Event {
			// sdk-go decodes +json data in structured mode as a string only; binary
			// mode delivers the bytes.
			e := decode(t, callJSON)
			e.SetDataContentType("application/vnd.acme+json")
			return e
		}, `{"flight":"BA117"}`},
		{"arguments kept byte for byte", func(t *testing.T) event.Event {
			return decode(t, strings.Replace(callJSON, `{"arguments":{"flight":"BA117"}}`,
				`{"arguments": {"b":2.0, "a":1e0, "a":"dup", "n":9007199254740993}}`, 1))
		}, `{"b":2.0, "a":1e0, "a":"dup", "n":9007199254740993}`},
		{"empty arguments", func(t *testing.T) event.Event { return decode(t, withAttr(t, "data", `{"arguments":{}}`)) }, `{}`},
		{"data_base64", func(t *testing.T) event.Event {
			s := withAttr(t, "data", "")
			return decode(t, s[:len(s)-1]+`,"data_base64":"eyJhcmd1bWVudHMiOnsiZmxpZ2h0IjoiQkExMTcifX0="}`)
		}, `{"flight":"BA117"}`},
		{"binary mode shape", func(t *testing.T) event.Event {
			// What the bus builds from ce- headers: every attribute a string.
			e := event.New()
			e.SetID("call-7")
			e.SetType(wire.CallType)
			e.SetSource("agents/planner")
			e.SetExtension("runid", "run_1")
			e.SetExtension("tenant", "acme")
			e.SetDataContentType("application/json")
			e.DataEncoded = []byte(`{"arguments":{"flight":"BA117"}}`)
			return e
		}, `{"flight":"BA117"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := wire.CallFromEvent(tt.event(t), "acme", "book")
			if err != nil {
				t.Fatal(err)
			}
			if c.Tenant != "acme" || c.Tool != "book" || c.RunID != "run_1" || c.CallID != "call-7" || c.Source != "agents/planner" {
				t.Errorf("call = %+v", c)
			}
			if string(c.Arguments) != tt.wantArgs {
				t.Errorf("arguments = %s, want %s", c.Arguments, tt.wantArgs)
			}
		})
	}
}

func TestCallFromEventRejects(t *testing.T) {
	type tc struct {
		name      string
		event     func(t *testing.T) event.Event
		tenant    string // subject tenant; "acme" when empty
		tool      string // subject tool; "book" when empty
		wantCode  events.Code
		wantField string
	}
	js := func(s func(t *testing.T) string) func(t *testing.T) event.Event {
		return func(t *testing.T) event.Event { return decode(t, s(t)) }
	}
	attr := func(name, v string) func(t *testing.T) event.Event {
		return js(func(t *testing.T) string { return withAttr(t, name, v) })
	}
	data := func(b string) func(t *testing.T) event.Event {
		return func(t *testing.T) event.Event {
			e := decode(t, callJSON)
			e.DataEncoded = []byte(b)
			return e
		}
	}
	tests := []tc{
		{name: "no context", event: func(*testing.T) event.Event { return event.Event{} }, wantCode: events.CodeNotCloudEvent},
		{name: "specversion 0.3", event: func(*testing.T) event.Event {
			e := event.New("0.3")
			e.SetID("call-7")
			e.SetType(wire.CallType)
			e.SetSource("s")
			return e
		}, wantCode: events.CodeBadSpecVersion, wantField: "specversion"},
		{name: "no type", event: attr("type", ""), wantCode: events.CodeMissingAttribute, wantField: "type"},
		{name: "answer type", event: attr("type", `"io.tesserix.toolexec.completed"`), wantCode: events.CodeBadType, wantField: "type"},
		{name: "foreign type", event: attr("type", `"com.example.call"`), wantCode: events.CodeBadType, wantField: "type"},
		{name: "bad subject tenant", event: attr("tenant", ""), tenant: "ac.me", wantCode: events.CodeBadToken, wantField: "tenant"},
		{name: "bad subject tool", event: attr("subject", ""), tool: "*", wantCode: events.CodeBadToken, wantField: "tool"},
		{name: "no id", event: attr("id", ""), wantCode: events.CodeMissingAttribute, wantField: "id"},
		{name: "bad id", event: attr("id", `"call 7"`), wantCode: events.CodeBadToken, wantField: "id"},
		{name: "id too long", event: attr("id", `"`+strings.Repeat("c", 129)+`"`), wantCode: events.CodeBadToken, wantField: "id"},
		{name: "no source", event: attr("source", ""), wantCode: events.CodeMissingAttribute, wantField: "source"},
		{name: "no runid", event: attr("runid", ""), wantCode: events.CodeMissingAttribute, wantField: "runid"},
		{name: "empty runid", event: attr("runid", `""`), wantCode: events.CodeMissingAttribute, wantField: "runid"},
		{name: "bad runid", event: attr("runid", `"run.1"`), wantCode: events.CodeBadToken, wantField: "runid"},
		{name: "runid not a string", event: attr("runid", `7`), wantCode: events.CodeBadToken, wantField: "runid"},
		{name: "tenant mismatch", event: attr("tenant", `"globex"`), wantCode: events.CodeTenantMismatch, wantField: "tenant"},
		{name: "tenant case mismatch", event: attr("tenant", `"ACME"`), wantCode: events.CodeTenantMismatch, wantField: "tenant"},
		{name: "tenant not a string", event: attr("tenant", `true`), wantCode: events.CodeBadToken, wantField: "tenant"},
		{name: "tool mismatch", event: attr("subject", `"cancel"`), wantCode: events.CodeToolMismatch, wantField: "subject"},
		{name: "text/plain", event: func(t *testing.T) event.Event {
			return decode(t, strings.Replace(withAttr(t, "datacontenttype", `"text/plain"`),
				`{"arguments":{"flight":"BA117"}}`, `"{\"arguments\":{}}"`, 1))
		}, wantCode: events.CodeBadContentType, wantField: "datacontenttype"},
		{name: "xml", event: func(t *testing.T) event.Event {
			e := decode(t, callJSON)
			e.SetDataContentType("application/xml")
			return e
		}, wantCode: events.CodeBadContentType, wantField: "datacontenttype"},
		{name: "latin1", event: attr("datacontenttype", `"application/json; charset=latin1"`), wantCode: events.CodeBadContentType, wantField: "datacontenttype"},
		{name: "bad media type", event: func(t *testing.T) event.Event {
			e := decode(t, callJSON)
			e.SetDataContentType("application/json; =")
			return e
		}, wantCode: events.CodeBadContentType, wantField: "datacontenttype"},
		{name: "no data", event: attr("data", ""), wantCode: events.CodeBadData, wantField: "data"},
		{name: "data not JSON", event: data(`{"arguments":`), wantCode: events.CodeBadData, wantField: "data"},
		{name: "trailing data", event: data(`{"arguments":{}} {}`), wantCode: events.CodeBadData, wantField: "data"},
		{name: "duplicate arguments", event: data(`{"arguments":{},"arguments":{"a":1}}`), wantCode: events.CodeDuplicateMember, wantField: "data"},
		{name: "arguments array", event: attr("data", `{"arguments":[1,2]}`), wantCode: events.CodeArgumentsNotObject, wantField: "arguments"},
		{name: "arguments string", event: attr("data", `{"arguments":"{}"}`), wantCode: events.CodeArgumentsNotObject, wantField: "arguments"},
		{name: "arguments null", event: attr("data", `{"arguments":null}`), wantCode: events.CodeArgumentsNotObject, wantField: "arguments"},
		{name: "arguments number", event: attr("data", `{"arguments":1}`), wantCode: events.CodeArgumentsNotObject, wantField: "arguments"},
		{name: "no arguments", event: attr("data", `{"args":{}}`), wantCode: events.CodeSchemaViolation, wantField: "data"},
		{name: "extra member", event: attr("data", `{"arguments":{},"tool":"book"}`), wantCode: events.CodeSchemaViolation, wantField: "data"},
		{name: "data array", event: attr("data", `[{"arguments":{}}]`), wantCode: events.CodeSchemaViolation, wantField: "data"},
		{name: "data string", event: attr("data", `"hello"`), wantCode: events.CodeSchemaViolation, wantField: "data"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant, tool := tt.tenant, tt.tool
			if tenant == "" {
				tenant = "acme"
			}
			if tool == "" {
				tool = "book"
			}
			c, err := wire.CallFromEvent(tt.event(t), tenant, tool)
			checkReject(t, err, tt.wantCode, tt.wantField)
			if c.Arguments != nil || c.CallID != "" {
				t.Errorf("a rejected call returned %+v", c)
			}
		})
	}
}

func TestCallFromEventSchemaMessageNamesProblem(t *testing.T) {
	_, err := wire.CallFromEvent(decode(t, withAttr(t, "data", `{"arguments":{},"extra":1}`)), "acme", "book")
	var re *events.RejectedError
	if !errors.As(err, &re) {
		t.Fatalf("error = %v", err)
	}
	if !strings.Contains(re.Message, "extra") {
		t.Errorf("message %q does not name the offending member", re.Message)
	}
	if strings.Contains(re.Message, "\n") {
		t.Errorf("message %q spans lines", re.Message)
	}
	if !errors.Is(err, wire.ErrInvalidData) {
		t.Errorf("schema violation does not unwrap to ErrInvalidData: %v", err)
	}
}
