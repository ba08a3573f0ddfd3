package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// hostileEvent returns a structured call event with extra top-level members
// (raw JSON, in order) and the given data.
func hostileEvent(data string, extra ...string) string {
	var b strings.Builder
	b.WriteString(`{"specversion":"1.0","id":"c1","source":"/agent","type":"` + wire.CallType + `","runid":"r1"`)
	for i := 0; i+1 < len(extra); i += 2 {
		b.WriteString(`,"` + extra[i] + `":` + extra[i+1])
	}
	b.WriteString(`,"datacontenttype":"application/json","data":` + data + `}`)
	return b.String()
}

func nested(depth int) string { return strings.Repeat("[", depth) + "0" + strings.Repeat("]", depth) }

// TestDecodeHostileStructured: what encoding/json would let through quietly
// (invalid UTF-8, lone surrogate escapes in attributes) or refuse as "not JSON"
// (nesting beyond its limit) is rejected with the code that says so, and the
// rejection can still be addressed.
func TestDecodeHostileStructured(t *testing.T) {
	args := `{"arguments":{"flight":"LH1"}}`
	tests := []struct {
		name      string
		payload   string
		wantCode  events.Code // "" means accepted
		wantField string
	}{
		{name: "invalid UTF-8 in an attribute", payload: hostileEvent(args, "comment", "\"\xff\xfe\""), wantCode: events.CodeInvalidUnicode},
		{name: "invalid UTF-8 in the data", payload: hostileEvent("{\"arguments\":{\"flight\":\"L\xc3\"}}"), wantCode: events.CodeInvalidUnicode},
		{name: "lone high surrogate in source", payload: strings.Replace(hostileEvent(args), `"/agent"`, `"/agent\ud800"`, 1),
			wantCode: events.CodeInvalidUnicode, wantField: "source"},
		{name: "lone low surrogate in an extension", payload: hostileEvent(args, "comment", `"x\udc00y"`), wantCode: events.CodeInvalidUnicode, wantField: "comment"},
		{name: "high surrogate then another escape", payload: hostileEvent(args, "comment", `"\ud800\u0041"`), wantCode: events.CodeInvalidUnicode, wantField: "comment"},
		{name: "high surrogate at the end", payload: hostileEvent(args, "comment", `"\ud800"`), wantCode: events.CodeInvalidUnicode, wantField: "comment"},
		{name: "two high surrogates", payload: hostileEvent(args, "comment", `"\ud800\ud800\udc00"`), wantCode: events.CodeInvalidUnicode, wantField: "comment"},
		{name: "data nested beyond MaxNesting", payload: hostileEvent(`{"arguments":{"x":` + nested(wire.MaxNesting+1) + `}}`), wantCode: events.CodeTooDeep},
		{name: "surrogate pair", payload: hostileEvent(args, "comment", `"\ud83d\ude00 and \uD83D\uDE00"`)},
		{name: "escaped backslash before ud800", payload: hostileEvent(args, "comment", `"\\ud800"`)},
		{name: "lone surrogate in the data is for later stages", payload: hostileEvent(`{"arguments":{"flight":"\ud800"}}`)},
		{name: "number too large for a double", payload: hostileEvent(`{"arguments":{"n":1e999999999}}`, "count", "1e999999999")},
		{name: "brackets inside strings do not nest", payload: hostileEvent(`{"arguments":{"s":"` + strings.Repeat("[{", wire.MaxNesting) + `"}}`)},
		{name: "nested deep but within MaxNesting", payload: hostileEvent(`{"arguments":{"x":` + nested(200) + `}}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, data := structured(tt.payload)
			_, err := wire.Decode(h, data)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			var re *events.RejectedError
			if !errors.As(err, &re) {
				t.Fatalf("Decode error = %v, want a *events.RejectedError", err)
			}
			if re.Code != tt.wantCode || (tt.wantField != "" && re.Field != tt.wantField) {
				t.Errorf("rejected %s (field %q): %v; want %s (field %q)", re.Code, re.Field, err, tt.wantCode, tt.wantField)
			}
			if got := wire.Peek(h, data); got != (wire.CallAddress{ID: "c1", RunID: "r1"}) {
				t.Errorf("Peek = %+v: the rejection cannot be addressed to call c1 of run r1", got)
			}
		})
	}
}

// TestPeekDeepAndHugeValues: Peek finds the id and runid beside members that
// encoding/json cannot decode (a number beyond a double) and before data nested
// beyond its limit. Members after such data are not read: the reader stops at
// MaxNesting, as encoding/json does, and a payload that leads with it reaches
// no waiting caller.
func TestPeekDeepAndHugeValues(t *testing.T) {
	for name, tt := range map[string]struct {
		payload string
		want    wire.CallAddress
	}{
		"deep data last":   {`{"id":"c1","runid":"r1","data":` + nested(2*wire.MaxNesting) + `}`, wire.CallAddress{ID: "c1", RunID: "r1"}},
		"deep data first":  {`{"data":` + nested(2*wire.MaxNesting) + `,"id":"c1","runid":"r1"}`, wire.CallAddress{}},
		"deep in between":  {`{"id":"c1","data":` + nested(2*wire.MaxNesting) + `,"runid":"r1"}`, wire.CallAddress{ID: "c1"}},
		"huge number":      {`{"id":"c1","n":1e999999999,"runid":"r1"}`, wire.CallAddress{ID: "c1", RunID: "r1"}},
		"spaces and lines": {"{ \"id\" :\n \"c1\" ,\t\"runid\"\r\n:\"r1\" }", wire.CallAddress{ID: "c1", RunID: "r1"}},
	} {
		t.Run(name, func(t *testing.T) {
			h, data := structured(tt.payload)
			if got := wire.Peek(h, data); got != tt.want {
				t.Errorf("Peek = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestDecodeReleasedBinding: a message of the released NATS binding (1.0.2),
// which predates headers, is the JSON event format alone; it is read in
// structured mode, other headers (Nats-Msg-Id) notwithstanding.
func TestDecodeReleasedBinding(t *testing.T) {
	payload := []byte(`{"specversion":"1.0","id":"c1","source":"/agent","type":"` + wire.CallType +
		`","subject":"book","tenant":"acme","runid":"r1","datacontenttype":"application/json","data":{"arguments":{"flight":"LH1"}}}`)
	for name, h := range map[string]nats.Header{"no headers": nil, "Nats-Msg-Id only": {"Nats-Msg-Id": {"c1"}}} {
		t.Run(name, func(t *testing.T) {
			e, err := wire.Decode(h, payload)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			c, err := wire.CallFromEvent(e, "acme", "book")
			if err != nil {
				t.Fatalf("CallFromEvent: %v", err)
			}
			if c.CallID != "c1" || c.RunID != "r1" || string(c.Arguments) != `{"flight":"LH1"}` {
				t.Errorf("call = %+v", c)
			}
			if got := wire.Peek(h, payload); got != (wire.CallAddress{ID: "c1", RunID: "r1"}) {
				t.Errorf("Peek = %+v", got)
			}
		})
	}
}

// TestDecodeBinaryQuotedStrings: header values may hold RFC 7230 quoted
// strings, as older senders wrote them; they are unescaped, then the value is
// percent-decoded once.
func TestDecodeBinaryQuotedStrings(t *testing.T) {
	base := []string{"ce-specversion", "1.0", "ce-source", "/agent", "ce-type", wire.CallType, "ce-runid", "r1", "Content-Type", "application/json"}
	tests := []struct {
		name, id, comment string
		wantID, wantText  string
		wantErr           string // the field rejected, "" for none
	}{
		{name: "whole value quoted", id: `"c1"`, comment: `"planner one"`, wantID: "c1", wantText: "planner one"},
		{name: "quoted part", id: `c"1"`, comment: `say "planner one" twice`, wantID: "c1", wantText: "say planner one twice"},
		{name: "quoted pair", id: `"c\1"`, comment: `"a\"b"`, wantID: "c1", wantText: `a"b`},
		{name: "percent-decoded after unquoting", id: `"c%31"`, comment: `"a%20b%C3%A9"`, wantID: "c1", wantText: "a bé"},
		{name: "unclosed", id: "c1", comment: `"a`, wantErr: "comment"},
		{name: "backslash at the end", id: `"c1\`, comment: "a", wantErr: "id"},
		{name: "percent sign left bare", id: "c1", comment: `"100%"`, wantErr: "comment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := binaryHdr(append(base, "ce-id", tt.id, "ce-comment", tt.comment)...)
			e, err := wire.Decode(h, []byte(`{"arguments":{}}`))
			if tt.wantErr != "" {
				var re *events.RejectedError
				if !errors.As(err, &re) || re.Code != events.CodeNotCloudEvent || re.Field != tt.wantErr {
					t.Fatalf("Decode error = %v, want not_cloudevent on %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if got := e.Extensions()["comment"]; e.ID() != tt.wantID || got != tt.wantText {
				t.Errorf("id %q, comment %q; want %q, %q", e.ID(), got, tt.wantID, tt.wantText)
			}
			if got := wire.Peek(h, nil); got.ID != tt.wantID {
				t.Errorf("Peek id %q, want %q", got.ID, tt.wantID)
			}
		})
	}
}
