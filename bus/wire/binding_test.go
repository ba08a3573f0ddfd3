package wire_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"pgregory.net/rapid"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

func TestPercentEncode(t *testing.T) {
	tests := []struct {
		give, want string
	}{
		{give: "", want: ""},
		{give: "plain-ASCII_0.9~!", want: "plain-ASCII_0.9~!"},
		{give: "a b", want: "a%20b"},
		{give: `say "hi"`, want: "say%20%22hi%22"},
		{give: "100%", want: "100%25"},
		{give: "é", want: "%C3%A9"},
		{give: "tab\there\n", want: "tab%09here%0A"},
		{give: "\x7f", want: "%7F"},
		{give: "日本", want: "%E6%97%A5%E6%9C%AC"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			if got := wire.PercentEncode(tt.give); got != tt.want {
				t.Errorf("PercentEncode(%q) = %q, want %q", tt.give, got, tt.want)
			}
			got, err := wire.PercentDecode(tt.want)
			if err != nil || got != tt.give {
				t.Errorf("PercentDecode(%q) = %q, %v; want %q", tt.want, got, err, tt.give)
			}
		})
	}
}

func TestPercentDecodeLowerCaseAndErrors(t *testing.T) {
	if got, err := wire.PercentDecode("%c3%a9"); err != nil || got != "é" {
		t.Errorf("lower-case hex: got %q, %v", got, err)
	}
	for _, give := range []string{"%", "%4", "abc%", "%GG", "%4G", "%FF", "%C3", "\xff"} {
		if _, err := wire.PercentDecode(give); !errors.Is(err, wire.ErrBadEncoding) {
			t.Errorf("PercentDecode(%q) error = %v, want ErrBadEncoding", give, err)
		}
	}
}

func TestPercentRoundTripProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := rapid.String().Draw(t, "s")
		enc := wire.PercentEncode(s)
		for i := 0; i < len(enc); i++ {
			if c := enc[i]; c < 0x21 || c > 0x7e || c == '"' {
				t.Fatalf("encoded %q holds byte %#x", enc, c)
			}
		}
		if !utf8.ValidString(s) {
			return
		}
		got, err := wire.PercentDecode(enc)
		if err != nil || got != s {
			t.Fatalf("round trip of %q: got %q, %v", s, got, err)
		}
	})
}

func codecCall() events.Call {
	return events.Call{
		Tenant: "acme", RunID: "run-1", CallID: "call-1", Tool: "book",
		Source:      "/agents/one",
		Arguments:   json.RawMessage(`{"flight": "LH 123", "seats": 2.0}`),
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		TraceState:  "vendor=x y",
		Time:        time.Date(2025, 3, 4, 5, 6, 7, 891000000, time.UTC),
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	for _, mode := range []wire.Mode{wire.Structured, wire.Binary} {
		t.Run(mode.String(), func(t *testing.T) {
			want := codecCall()
			e, err := wire.CallEvent(want)
			if err != nil {
				t.Fatal(err)
			}
			msg, err := wire.NewMsg(wire.CallSubject(want.Tenant, want.Tool, want.CallID), e, mode)
			if err != nil {
				t.Fatal(err)
			}
			if got := wire.ModeOf(msg.Header); got != mode {
				t.Fatalf("ModeOf = %v, want %v", got, mode)
			}
			got, err := wire.Decode(msg.Header, msg.Data)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			call, err := wire.CallFromEvent(got, want.Tenant, want.Tool)
			if err != nil {
				t.Fatalf("CallFromEvent: %v", err)
			}
			if string(call.Arguments) != string(want.Arguments) {
				t.Errorf("arguments = %s, want %s byte for byte", call.Arguments, want.Arguments)
			}
			call.Arguments, want.Arguments = nil, nil
			if !call.Time.Equal(want.Time) {
				t.Errorf("time = %v, want %v", call.Time, want.Time)
			}
			call.Time, want.Time = time.Time{}, time.Time{}
			if call.Tenant != want.Tenant || call.RunID != want.RunID || call.CallID != want.CallID ||
				call.Tool != want.Tool || call.Source != want.Source || call.TraceParent != want.TraceParent ||
				call.TraceState != want.TraceState {
				t.Errorf("call = %+v, want %+v", call, want)
			}
		})
	}
}

func TestEncodeBinaryHeaders(t *testing.T) {
	e, err := wire.CallEvent(codecCall())
	if err != nil {
		t.Fatal(err)
	}
	h, data, err := wire.Encode(e, wire.Binary)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"ce-specversion": "1.0",
		"ce-id":          "call-1",
		"ce-source":      "/agents/one",
		"ce-type":        wire.CallType,
		"ce-subject":     "book",
		"ce-tenant":      "acme",
		"ce-runid":       "run-1",
		"ce-time":        "2025-03-04T05:06:07.891Z",
		"ce-tracestate":  "vendor=x%20y",
		"Content-Type":   "application/json",
	}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	if string(data) != `{"arguments":{"flight": "LH 123", "seats": 2.0}}` {
		t.Errorf("payload = %s", data)
	}
}

func TestEncodeRefusesOtherVersions(t *testing.T) {
	e := event.New(event.CloudEventsVersionV03)
	e.SetID("x")
	if _, _, err := wire.Encode(e, wire.Binary); !errors.Is(err, wire.ErrUnsupported) {
		t.Errorf("Encode(0.3) error = %v, want ErrUnsupported", err)
	}
	if _, _, err := wire.Encode(event.Event{}, wire.Structured); !errors.Is(err, wire.ErrUnsupported) {
		t.Errorf("Encode(zero event) error = %v, want ErrUnsupported", err)
	}
}

func TestModeOf(t *testing.T) {
	tests := []struct {
		name string
		give nats.Header
		want wire.Mode
	}{
		{"no headers (the released binding)", nil, wire.Structured},
		{"no Content-Type nor ce- header", nats.Header{"Nats-Msg-Id": {"c1"}}, wire.Structured},
		{"ce- headers without Content-Type", nats.Header{"ce-id": {"c1"}}, wire.Binary},
		{"canonical", nats.Header{"Content-Type": {"application/cloudevents+json"}}, wire.Structured},
		{"lower-case name, mixed-case value", nats.Header{"content-type": {"Application/CloudEvents+JSON; charset=utf-8"}}, wire.Structured},
		{"upper-case name", nats.Header{"CONTENT-TYPE": {"application/cloudevents+json"}}, wire.Structured},
		{"json data", nats.Header{"Content-Type": {"application/json"}, "ce-id": {"x"}}, wire.Binary},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wire.ModeOf(tt.give); got != tt.want {
				t.Errorf("ModeOf = %v, want %v", got, tt.want)
			}
		})
	}
}

func structured(payload string) (nats.Header, []byte) {
	return nats.Header{"Content-Type": {"application/cloudevents+json"}}, []byte(payload)
}

func binaryHdr(kv ...string) nats.Header {
	h := nats.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func TestDecodeRejects(t *testing.T) {
	validBinary := []string{"ce-specversion", "1.0", "ce-id", "c1", "ce-source", "s", "ce-type", wire.CallType}
	tests := []struct {
		name      string
		header    nats.Header
		data      string
		wantCode  events.Code
		wantField string
	}{
		{name: "structured empty", header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, wantCode: events.CodeInvalidJSON},
		{name: "structured not JSON", header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, data: "{nope", wantCode: events.CodeInvalidJSON},
		{name: "structured array", header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, data: "[1,2]", wantCode: events.CodeNotCloudEvent},
		{name: "structured no specversion", header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, data: `{"id":"a"}`, wantCode: events.CodeNotCloudEvent, wantField: "specversion"},
		{name: "structured specversion 0.3", header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, data: `{"specversion":"0.3","id":"a","source":"s","type":"t"}`, wantCode: events.CodeBadSpecVersion},
		{name: "structured specversion 2.0", header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, data: `{"specversion":"2.0","id":"a","source":"s","type":"t"}`, wantCode: events.CodeBadSpecVersion},
		{name: "structured specversion number", header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, data: `{"specversion":1.0}`, wantCode: events.CodeBadSpecVersion},
		{name: "structured specversion null", header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, data: `{"specversion":null,"id":"a","source":"s","type":"t"}`, wantCode: events.CodeBadSpecVersion},
		{name: "structured specversion escaped", header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, data: `{"specversion":"1\u002e1","id":"a","source":"s","type":"t"}`, wantCode: events.CodeBadSpecVersion},
		{name: "structured duplicate id", header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, data: `{"specversion":"1.0","id":"a","id":"b","source":"s","type":"t"}`, wantCode: events.CodeDuplicateMember, wantField: "id"},
		{name: "structured bad time", header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, data: `{"specversion":"1.0","id":"a","source":"s","type":"t","time":"yesterday"}`, wantCode: events.CodeNotCloudEvent},
		{name: "structured batch", header: nats.Header{"Content-Type": {"application/cloudevents-batch+json"}}, data: `[]`, wantCode: events.CodeNotCloudEvent, wantField: "Content-Type"},
		{name: "structured other charset", header: nats.Header{"Content-Type": {"application/cloudevents+json; charset=latin1"}}, data: `{}`, wantCode: events.CodeNotCloudEvent},
		{name: "two content types", header: nats.Header{"Content-Type": {"application/cloudevents+json"}, "content-type": {"application/json"}}, data: `{}`, wantCode: events.CodeNotCloudEvent},
		{name: "no headers at all", data: `{"arguments":{}}`, wantCode: events.CodeNotCloudEvent, wantField: "specversion"},
		{name: "binary without specversion", header: binaryHdr("ce-id", "a"), wantCode: events.CodeNotCloudEvent, wantField: "specversion"},
		{name: "binary specversion 0.3", header: binaryHdr("ce-specversion", "0.3", "ce-id", "a"), wantCode: events.CodeBadSpecVersion},
		{name: "binary bad percent", header: binaryHdr(append(validBinary, "ce-tenant", "a%2")...), wantCode: events.CodeNotCloudEvent, wantField: "tenant"},
		{name: "binary repeated header", header: binaryHdr(append(validBinary, "ce-id", "c2")...), wantCode: events.CodeNotCloudEvent, wantField: "id"},
		{name: "binary header in two cases", header: binaryHdr(append(validBinary, "CE-ID", "c2")...), wantCode: events.CodeNotCloudEvent, wantField: "id"},
		{name: "binary bad time", header: binaryHdr(append(validBinary, "ce-time", "soon")...), wantCode: events.CodeNotCloudEvent, wantField: "time"},
		{name: "binary bad extension name", header: binaryHdr(append(validBinary, "ce-run_id", "r")...), wantCode: events.CodeNotCloudEvent, wantField: "run_id"},
		{name: "binary content types disagree", header: binaryHdr(append(validBinary, "ce-datacontenttype", "text/plain", "Content-Type", "application/json")...), wantCode: events.CodeNotCloudEvent, wantField: "datacontenttype"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wire.Decode(tt.header, []byte(tt.data))
			var re *events.RejectedError
			if !errors.As(err, &re) {
				t.Fatalf("Decode error = %v, want a *events.RejectedError", err)
			}
			if re.Code != tt.wantCode {
				t.Errorf("code = %s, want %s (%v)", re.Code, tt.wantCode, err)
			}
			if tt.wantField != "" && re.Field != tt.wantField {
				t.Errorf("field = %q, want %q", re.Field, tt.wantField)
			}
			if !errors.Is(err, events.ErrRejected) {
				t.Errorf("error does not match events.ErrRejected")
			}
		})
	}
}

// TestDecodeBinaryReportsOneProblem: of several headers refused, Decode
// reports the one of the least name, and a header given twice rather than
// its value, whatever order the header map is ranged in.
func TestDecodeBinaryReportsOneProblem(t *testing.T) {
	valid := []string{"ce-specversion", "1.0", "ce-source", "s", "ce-type", wire.CallType}
	tests := []struct {
		name      string
		header    nats.Header
		wantField string
		wantText  string
	}{
		{name: "two values refused", header: binaryHdr(append(valid, "ce-id", "c1", "ce-tracestate", "%FF", "ce-traceparent", "%FF",
			"ce-runid", "a%2")...), wantField: "runid", wantText: "bad percent-encoding"},
		{name: "given twice, once refused", header: binaryHdr(append(valid, "ce-id", "%FF", "CE-ID", "c1", "Ce-Id", "c2")...),
			wantField: "id", wantText: "more than once"},
		{name: "refused before given twice", header: binaryHdr(append(valid, "ce-id", "%FF", "ce-tenant", "a", "CE-TENANT", "b")...),
			wantField: "id", wantText: "bad percent-encoding"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var first string
			for i := range 64 {
				_, err := wire.Decode(tt.header, nil)
				var re *events.RejectedError
				if !errors.As(err, &re) || re.Field != tt.wantField || !strings.Contains(err.Error(), tt.wantText) {
					t.Fatalf("Decode error = %v, want one of field %q saying %q", err, tt.wantField, tt.wantText)
				}
				if i == 0 {
					first = err.Error()
				} else if err.Error() != first {
					t.Fatalf("Decode error = %v, and before %v", err, first)
				}
			}
		})
	}
}

func TestDecodeBinaryCaseInsensitiveHeaders(t *testing.T) {
	h := binaryHdr("CE-SpecVersion", "1.0", "Ce-Id", "c%2D1", "CE-SOURCE", "agent%3Ax", "ce-type", wire.CallType,
		"ce-Tenant", "acme", "ce-runid", "r1", "content-type", "application/json")
	e, err := wire.Decode(h, []byte(`{"arguments":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	if e.ID() != "c-1" || e.Source() != "agent:x" || e.DataContentType() != "application/json" {
		t.Errorf("event = %v", e)
	}
	if got := e.Extensions()["tenant"]; got != "acme" {
		t.Errorf("tenant extension = %v", got)
	}
	if _, err := wire.CallFromEvent(e, "acme", "book"); err != nil {
		t.Errorf("CallFromEvent: %v", err)
	}
}

func TestPeek(t *testing.T) {
	tests := []struct {
		name   string
		header nats.Header
		data   string
		want   wire.CallAddress
	}{
		{"structured", nats.Header{"Content-Type": {"application/cloudevents+json"}}, `{"specversion":"9","id":"c1","runid":"r1"}`, wire.CallAddress{ID: "c1", RunID: "r1"}},
		{"structured non-string id", nats.Header{"Content-Type": {"application/cloudevents+json"}}, `{"id":5,"runid":"r1"}`, wire.CallAddress{RunID: "r1"}},
		{"structured cut short", nats.Header{"Content-Type": {"application/cloudevents+json"}}, `{"id":"c1"`, wire.CallAddress{ID: "c1"}},
		{"structured, mistake before the id", nats.Header{"Content-Type": {"application/cloudevents+json"}}, `{"a":tru,"id":"c1"}`, wire.CallAddress{}},
		{"structured not an object", nats.Header{"Content-Type": {"application/cloudevents+json"}}, `["c1"]`, wire.CallAddress{}},
		{"binary", binaryHdr("ce-id", "c%201", "CE-RUNID", "r1"), "", wire.CallAddress{ID: "c 1", RunID: "r1"}},
		{"nothing", nil, "junk", wire.CallAddress{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wire.Peek(tt.header, []byte(tt.data)); got != tt.want {
				t.Errorf("Peek = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGetAndValues(t *testing.T) {
	h := nats.Header{"X-A": {"1"}, "x-a": {"2"}, "Y": {"3"}}
	if got := wire.Values(h, "X-a"); len(got) != 2 {
		t.Errorf("Values = %v, want both", got)
	}
	if _, ok := wire.Get(h, "x-A"); ok {
		t.Error("Get of a header given twice reported one value")
	}
	if v, ok := wire.Get(h, "y"); !ok || v != "3" {
		t.Errorf("Get(y) = %q, %v", v, ok)
	}
	if !strings.Contains(wire.Binary.String()+wire.Structured.String(), "binarystructured") {
		t.Error("Mode.String")
	}
}

// TestDecodeStructuredWithoutDataContentType: JSON data with no datacontenttype
// is read as JSON, as the JSON event format says.
func TestDecodeStructuredWithoutDataContentType(t *testing.T) {
	h, data := structured(`{"specversion":"1.0","id":"c1","source":"/a","type":"` + wire.CallType +
		`","runid":"r1","data":{"arguments":{"flight":"LH1", "n": 1.50}}}`)
	e, err := wire.Decode(h, data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := wire.CallFromEvent(e, "acme", "book")
	if err != nil {
		t.Fatalf("CallFromEvent: %v", err)
	}
	if string(c.Arguments) != `{"flight":"LH1", "n": 1.50}` {
		t.Errorf("arguments %s, want them as sent", c.Arguments)
	}
}
