package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"

	"github.com/tesserix/toolexec/events"
)

// CallEvent returns the CloudEvent for c: type [CallType], id the call id,
// source, subject the tool, extensions tenant and runid, time when set, the
// distributed tracing extension when TraceParent is set, and data
// {"arguments": ...} as application/json, the arguments byte for byte as given
// (nil arguments as {}).
//
// It checks c first: a token that is not valid, an empty source or arguments that
// are not a JSON object are reported as an [*events.RejectedError] with the code a
// receiver would answer with.
func CallEvent(c events.Call) (event.Event, error) {
	data, err := callData(c)
	if err != nil {
		return event.Event{}, err
	}
	e := event.New()
	e.SetType(CallType)
	e.SetID(c.CallID)
	e.SetSource(c.Source)
	e.SetSubject(c.Tool)
	e.SetExtension(ExtTenant, c.Tenant)
	e.SetExtension(ExtRunID, c.RunID)
	if !c.Time.IsZero() {
		e.SetTime(c.Time)
	}
	if c.TraceParent != "" {
		extensions.DistributedTracingExtension{TraceParent: c.TraceParent, TraceState: c.TraceState}.AddTracingAttributes(&e)
	}
	e.SetDataContentType(event.ApplicationJSON)
	e.DataEncoded = data
	if err := e.Validate(); err != nil {
		return event.Event{}, events.Reject(events.CodeNotCloudEvent, "", "%v", strings.TrimSpace(err.Error()))
	}
	return e, nil
}

// callData checks the call and returns the data of its event.
func callData(c events.Call) ([]byte, error) {
	for _, f := range []struct{ field, v string }{
		{ExtTenant, c.Tenant}, {ExtRunID, c.RunID}, {"id", c.CallID}, {"subject", c.Tool},
	} {
		if err := events.CheckToken(f.field, f.v); err != nil {
			return nil, badToken(f.field, err)
		}
	}
	if c.Source == "" {
		return nil, events.Reject(events.CodeMissingAttribute, "source", "the call has no source")
	}
	args := c.Arguments
	if args == nil {
		args = json.RawMessage("{}")
	}
	if !json.Valid(args) {
		return nil, events.Reject(events.CodeBadData, "arguments", "arguments are not valid JSON")
	}
	if firstByte(args) != '{' {
		return nil, events.Reject(events.CodeArgumentsNotObject, "arguments", "arguments must be a JSON object")
	}
	// The arguments go out byte for byte as given (json.Marshal would compact and
	// HTML-escape them); they are known to be one valid JSON object.
	data := make([]byte, 0, len(`{"arguments":}`)+len(args))
	data = append(data, `{"arguments":`...)
	data = append(data, args...)
	return append(data, '}'), nil
}

// CallJSON returns c's event (see [CallEvent]) in the CloudEvents JSON event
// format: the payload of c's structured-mode message ([CallMsg]), the bytes the
// SDK writes for that event but for the escapes of U+0008 and U+000C. Its
// errors are CallEvent's, with the same codes and fields.
func CallJSON(c events.Call) ([]byte, error) {
	p, err := callParts(c)
	if err != nil {
		return nil, err
	}
	return p.appendJSON(make([]byte, 0, p.jsonSize())), nil
}

// callParts checks c and returns its event's parts. It fails where CallEvent
// does, with the same codes and fields: the SDK's check of the event finds
// nothing that callData and the source's check have not refused.
func callParts(c events.Call) (eventParts, error) {
	data, err := callData(c)
	if err != nil {
		return eventParts{}, err
	}
	src, ok := uriRef(c.Source)
	if !ok {
		return eventParts{}, events.Reject(events.CodeNotCloudEvent, "", "source %s is not a URI reference", quote(c.Source))
	}
	p := eventParts{id: c.CallID, source: src, typ: CallType, subject: c.Tool, time: c.Time, data: data}
	p.exts[extRunID], p.exts[extTenant] = c.RunID, c.Tenant
	p.setTracing(c.TraceParent, c.TraceState)
	return p, nil
}

// CallFromEvent reads a call from e, a CloudEvent that arrived on the call subject
// of subjectTenant and subjectTool (see [ParseCallSubject]). It checks, in order:
//
//   - specversion is 1.0 (else [events.CodeBadSpecVersion]) and type is
//     [CallType] ([events.CodeBadType]);
//   - id, source and the runid extension are present
//     ([events.CodeMissingAttribute]), and the id, runid, and the tenant and tool
//     are valid tokens ([events.CodeBadToken]);
//   - the tenant extension, when present, equals subjectTenant
//     ([events.CodeTenantMismatch]); when absent the subject's tenant is taken;
//   - the subject attribute, when present, equals subjectTool
//     ([events.CodeToolMismatch]); when absent the NATS subject's tool is taken;
//   - datacontenttype is JSON: application/json, text/json or a +json type,
//     absent meaning JSON ([events.CodeBadContentType]);
//   - the data is present, valid UTF-8 ([events.CodeInvalidUnicode]) and JSON
//     ([events.CodeBadData]), nests no deeper than encoding/json reads
//     ([events.CodeTooDeep]), has no member twice ([events.CodeDuplicateMember]),
//     its arguments are an object ([events.CodeArgumentsNotObject]) and it
//     matches the call schema ([events.CodeSchemaViolation]).
//
// Every error is an [*events.RejectedError]. The arguments themselves are returned
// as sent; judging their content (canonical form, the tool's schema) is for
// later stages.
func CallFromEvent(e event.Event, subjectTenant, subjectTool string) (events.Call, error) {
	if e.Context == nil {
		return events.Call{}, events.Reject(events.CodeNotCloudEvent, "", "the message is not a CloudEvent")
	}
	if v := e.SpecVersion(); v != event.CloudEventsVersionV1 {
		return events.Call{}, events.Reject(events.CodeBadSpecVersion, "specversion", "got %s, want %q", quote(v), event.CloudEventsVersionV1)
	}
	if t := e.Type(); t != CallType {
		if t == "" {
			return events.Call{}, events.Reject(events.CodeMissingAttribute, "type", "the call has no type")
		}
		return events.Call{}, events.Reject(events.CodeBadType, "type", "got %s, want %q", quote(t), CallType)
	}
	if err := events.CheckToken("tenant", subjectTenant); err != nil {
		return events.Call{}, badToken("tenant", err)
	}
	if err := events.CheckToken("tool", subjectTool); err != nil {
		return events.Call{}, badToken("tool", err)
	}
	c := events.Call{Tenant: subjectTenant, Tool: subjectTool, CallID: e.ID(), Source: e.Source(), Time: e.Time()}
	if c.CallID == "" {
		return events.Call{}, events.Reject(events.CodeMissingAttribute, "id", "the call has no id")
	}
	if err := events.CheckToken("id", c.CallID); err != nil {
		return events.Call{}, badToken("id", err)
	}
	if c.Source == "" {
		return events.Call{}, events.Reject(events.CodeMissingAttribute, "source", "the call has no source")
	}
	exts := Extensions(e)
	runID, present, err := stringExtension(exts, ExtRunID)
	switch {
	case err != nil:
		return events.Call{}, err
	case !present || runID == "":
		return events.Call{}, events.Reject(events.CodeMissingAttribute, ExtRunID, "the call has no runid extension")
	}
	if err := events.CheckToken(ExtRunID, runID); err != nil {
		return events.Call{}, badToken(ExtRunID, err)
	}
	c.RunID = runID
	tenant, present, err := stringExtension(exts, ExtTenant)
	if err != nil {
		return events.Call{}, err
	}
	if present && tenant != subjectTenant {
		return events.Call{},
			events.Reject(events.CodeTenantMismatch, ExtTenant, "extension says %s but the call was published for tenant %q", quote(tenant),
				subjectTenant)
	}
	if hasSubject(e) && e.Subject() != subjectTool {
		return events.Call{},
			events.Reject(events.CodeToolMismatch, "subject", "attribute says %s but the call was published for tool %q", quote(e.Subject()),
				subjectTool)
	}
	// A tracestate means nothing without a traceparent (W3C Trace Context), and
	// CallEvent would not write one back.
	if tc, ok := tracing(exts); ok && tc.TraceParent != "" {
		c.TraceParent, c.TraceState = tc.TraceParent, tc.TraceState
	}
	if err := checkJSONContentType(e); err != nil {
		return events.Call{}, err
	}
	args, err := callArguments(e.Data())
	if err != nil {
		return events.Call{}, err
	}
	c.Arguments = args
	return c, nil
}

// CheckSubjectCallID refuses a call c, read by [CallFromEvent], whose id is not
// subjectCallID, the call id its subject names ([CallSubject]): the subject
// is what the calls stream keeps one call of, so the two must agree
// ([events.CodeCallIDMismatch], an [*events.RejectedError]). An empty
// subjectCallID, of a subject of wire version 1 that names no call, accepts
// any id.
func CheckSubjectCallID(c events.Call, subjectCallID string) error {
	if subjectCallID == "" || c.CallID == subjectCallID {
		return nil
	}
	return events.Reject(events.CodeCallIDMismatch, "id", "the event's id is %s but the call was published as call %q", quote(c.CallID),
		subjectCallID)
}

// callArguments checks the data of a call and returns its raw arguments. It
// holds the data to the call schema (schemas.CallSchema: an object with one
// member, arguments, itself an object) by reading its top level directly; a
// fuzz test holds the two to the same verdicts.
func callArguments(data []byte) (json.RawMessage, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, events.Reject(events.CodeBadData, "data", "the call has no data; want {\"arguments\": {...}}")
	}
	if !utf8.Valid(data) {
		// encoding/json would quietly turn the bad bytes into U+FFFD.
		return nil, events.Reject(events.CodeInvalidUnicode, "data", "data is not valid UTF-8")
	}
	if !json.Valid(data) {
		if nestsDeeper(data, MaxNesting) {
			return nil, events.Reject(events.CodeTooDeep, "data", "data nests arrays and objects more than %d deep", MaxNesting)
		}
		var v any
		err := json.Unmarshal(data, &v) // for the position of the mistake
		return nil, &events.RejectedError{Code: events.CodeBadData, Field: "data", Message: "data is not JSON: " + err.Error(), Err: err}
	}
	ms, dup, err := readMembers(nil, data)
	switch {
	case err != nil: // data is valid JSON: it is not an object
		return nil, schemaViolation("data must be a JSON object {\"arguments\": {...}}, got %s", rawKind(data))
	case dup != "":
		return nil, events.Reject(events.CodeDuplicateMember, "data", "member %s appears twice", quote(dup))
	}
	args, ok := ms.get("arguments")
	if ok && args[0] != '{' {
		return nil, events.Reject(events.CodeArgumentsNotObject, "arguments", "arguments must be a JSON object, got %s", rawKind(args))
	}
	for _, m := range ms {
		if m.name != "arguments" {
			return nil, schemaViolation("member %s is not allowed: the data of a call holds only arguments", quote(m.name))
		}
	}
	if !ok {
		return nil, schemaViolation("data has no arguments; want {\"arguments\": {...}}")
	}
	return args, nil
}

// schemaViolation rejects data that breaks the call schema; the error matches
// ErrInvalidData, as the schema's own verdict would.
func schemaViolation(format string, args ...any) *events.RejectedError {
	msg := fmt.Sprintf(format, args...)
	return &events.RejectedError{Code: events.CodeSchemaViolation, Field: "data", Message: msg, Err: fmt.Errorf("%w: %s", ErrInvalidData, msg)}
}

// MaxNesting is the depth of arrays and objects encoding/json reads: a
// structured event, or a call's data, nesting deeper is refused as too deep
// rather than as not JSON. (The arguments of a call are held to a far smaller
// depth when the key is derived.)
const MaxNesting = 10000

// nestsDeeper reports whether data, read as JSON, has more than limit arrays and
// objects open at once. Brackets inside strings do not count.
func nestsDeeper(data []byte, limit int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range data {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > limit {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

// checkJSONContentType accepts an absent datacontenttype, application/json,
// text/json and any +json type (RFC 6839), with no charset but utf-8. (In
// structured mode sdk-go itself decodes only application/json and text/json data
// as JSON; a +json type is usable in binary mode.)
func checkJSONContentType(e event.Event) error {
	ct := e.DataContentType()
	if ct == "" || ct == event.ApplicationJSON { // the type as toolexec writes it needs no parsing
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return &events.RejectedError{Code: events.CodeBadContentType, Field: "datacontenttype",
			Message: fmt.Sprintf("%s is not a media type", quote(ct)), Err: err}
	}
	if mt != event.ApplicationJSON && mt != event.TextJSON && !strings.HasSuffix(mt, "+json") {
		return events.Reject(events.CodeBadContentType, "datacontenttype", "got %s, want application/json", quote(ct))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return events.Reject(events.CodeBadContentType, "datacontenttype", "charset %s: only utf-8 is accepted", quote(cs))
	}
	return nil
}

// stringExtension returns the extension name from exts, whether it is present, and
// a *events.RejectedError when it is present but not a string.
func stringExtension(exts map[string]any, name string) (string, bool, error) {
	v, ok := exts[name]
	if !ok {
		return "", false, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", true, events.Reject(events.CodeBadToken, name, "extension must be a string, got %T", v)
	}
	return s, true, nil
}

// badToken wraps a *TokenError for field as a bad_token rejection.
func badToken(field string, err error) *events.RejectedError {
	var te *events.TokenError
	msg := err.Error()
	if errors.As(err, &te) {
		msg = fmt.Sprintf("%s is not a valid token: must be 1 to %d characters of A-Z a-z 0-9 _ -", quote(te.Value), events.MaxTokenLen)
	}
	return &events.RejectedError{Code: events.CodeBadToken, Field: field, Message: msg, Err: err}
}

// firstByte returns the first byte of b that is not JSON whitespace, or 0.
func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		}
		return c
	}
	return 0
}

// rawKind names the kind of the JSON value v, known to be valid JSON, for an
// error message.
func rawKind(v []byte) string {
	v = bytes.TrimLeft(v, " \t\r\n")
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	}
	return "a number"
}
