package mcpgate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// MetaPrefix starts every _meta name toolexec reads or writes.
const MetaPrefix = "io.tesserix.toolexec/"

// The _meta names of requests and results (docs/PROTOCOL.md §10).
const (
	// MetaRunID, in a request, puts the call in that run; in a result, names
	// the run the call was in.
	MetaRunID = MetaPrefix + "run_id"
	// MetaCallID, in a request, names the call: an earlier call's id attaches
	// to its answer. In a result, names the call answered.
	MetaCallID = MetaPrefix + "call_id"
	// MetaKind is the answer's kind: completed, deduplicated, indeterminate,
	// failed or rejected. In a tool's _meta, its idempotency kind.
	MetaKind = MetaPrefix + "kind"
	// MetaKey is the call's idempotency key, when one was derived.
	MetaKey = MetaPrefix + "idempotency_key"
	// MetaReason says why an indeterminate answer is indeterminate.
	MetaReason = MetaPrefix + "reason"
	// MetaBodyEntered says whether the tool's body was entered (indeterminate).
	MetaBodyEntered = MetaPrefix + "body_entered"
	// MetaCode is a failed or rejected answer's code.
	MetaCode = MetaPrefix + "code"
	// MetaKeyArguments, in a tool's _meta, lists its key arguments; absent
	// when every argument is one.
	MetaKeyArguments = MetaPrefix + "key_arguments"
	// MetaUnavailable is true in the _meta of a listed tool whose server
	// cannot be reached now: its calls are rejected upstream_unavailable,
	// without running, until it is back (clients are then sent
	// notifications/tools/list_changed).
	MetaUnavailable = MetaPrefix + "unavailable"
)

// toolOf returns the MCP tool for a declaration, or an error when its schema
// is not a JSON object describing an object (which MCP requires).
func toolOf(d bus.ToolDecl) (*mcp.Tool, error) {
	var schema map[string]any
	if err := json.Unmarshal(d.Parameters, &schema); err != nil || schema == nil {
		return nil, fmt.Errorf("tool %q: its parameters are not a JSON Schema object", d.Name)
	}
	switch typ, ok := schema["type"]; {
	case !ok:
		schema["type"] = "object"
	case typ != "object":
		return nil, fmt.Errorf("tool %q: its parameters describe %v, not an object", d.Name, typ)
	}
	t := &mcp.Tool{Name: d.Name, Description: d.Description, InputSchema: schema, Annotations: annotationsOf(d.Kind)}
	if d.Kind != "" {
		t.Meta = mcp.Meta{MetaKind: string(d.Kind)}
		if d.KeyArguments != nil {
			t.Meta[MetaKeyArguments] = d.KeyArguments
		}
	}
	if d.Unavailable {
		if t.Meta == nil {
			t.Meta = mcp.Meta{}
		}
		t.Meta[MetaUnavailable] = true
		t.Description = strings.TrimSpace(t.Description + "\n\n" + unavailableNote)
	}
	return t, nil
}

// unavailableNote ends the description of a tool that is unavailable now.
const unavailableNote = "Unavailable now: the server behind this tool cannot be reached, and calls are " +
	"refused without running. The tool list changes when it is back."

// annotationsOf returns the hints that say what repeating a call of kind
// does; nil for a tool without a policy, which promises nothing.
func annotationsOf(kind tool.Kind) *mcp.ToolAnnotations {
	no := false
	switch kind {
	case tool.ReadOnly:
		return &mcp.ToolAnnotations{ReadOnlyHint: true}
	case tool.Idempotent:
		return &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no}
	case tool.Effectful:
		return &mcp.ToolAnnotations{ReadOnlyHint: false, IdempotentHint: false}
	}
	return nil
}

// resultOf turns an answer into the tools/call result.
func resultOf(a events.Answer) *mcp.CallToolResult {
	r := &mcp.CallToolResult{Meta: metaOf(a)}
	switch a.Kind {
	case events.KindCompleted, events.KindDeduplicated:
		if c, ok := contentOf(a.Outcome); ok {
			r.Content, r.StructuredContent = c.Content, c.StructuredContent
			break
		}
		r.Content = []mcp.Content{&mcp.TextContent{Text: a.Outcome}}
		if obj := jsonObject(a.Outcome); obj != nil {
			r.StructuredContent = obj
		}
	case events.KindIndeterminate:
		r.IsError = true
		r.Content = []mcp.Content{&mcp.TextContent{Text: indeterminateText(a)}}
	case events.KindFailed:
		r.IsError = true
		r.Content = []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"The tool %s failed (%s): %s. Nothing is in doubt: its effect did not land.", a.Tool, a.Code, a.Error)}}
	default: // rejected
		r.IsError = true
		msg := a.Error
		if a.Field != "" {
			msg = a.Field + ": " + msg
		}
		r.Content = []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(
			"The call was rejected (%s): %s. Nothing ran; fix the call and try again.", a.Code, msg)}}
	}
	return r
}

// indeterminateText tells a model what an indeterminate answer means, in
// words it cannot mistake for a failure to retry. Two reasons come with a
// body never entered, and say so: the key could not be derived (nothing ran,
// and nothing will until the key arguments are given), or the store could not
// be reached before the tool started (nothing ran; a later retry may run it).
func indeterminateText(a events.Answer) string {
	switch {
	case !a.BodyEntered && a.Reason == events.ReasonKeyUnderivable:
		return fmt.Sprintf("Nothing ran: %s has effects, and without its key arguments the call cannot be told apart from "+
			"its repeats, so it is not run (reason: %s). Call it again with every key argument.", a.Tool, a.Reason)
	case !a.BodyEntered && a.Reason == events.ReasonStoreUnavailable:
		return fmt.Sprintf("Nothing ran: the idempotency store could not be reached before %s started (reason: %s). "+
			"Retrying later is safe: the tool has not run.", a.Tool, a.Reason)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The outcome of this call of %s is UNKNOWN: the tool may or may not have taken effect (reason: %s). ", a.Tool, a.Reason)
	b.WriteString("Do not assume it failed, and do not assume it succeeded. ")
	b.WriteString("Retrying will not run it again: a retry gets this same answer. ")
	if a.Key != "" {
		fmt.Fprintf(&b, "An operator must settle idempotency key %s (inspect it, then complete or release it).", a.Key)
	} else {
		b.WriteString("An operator must find out what happened.")
	}
	return b.String()
}

// metaOf returns a result's _meta for answer a.
func metaOf(a events.Answer) mcp.Meta {
	m := mcp.Meta{MetaKind: string(a.Kind), MetaCallID: a.CallID}
	if a.RunID != "" {
		m[MetaRunID] = a.RunID
	}
	if a.Key != "" {
		m[MetaKey] = a.Key
	}
	if a.Code != "" {
		m[MetaCode] = string(a.Code)
	}
	if a.Kind == events.KindIndeterminate {
		m[MetaReason] = string(a.Reason)
		m[MetaBodyEntered] = a.BodyEntered
	}
	return m
}

// contentOf returns the content and structured content an outcome carries as
// MCP content (see mcptool.ContentOutcome). ok is false for any other
// outcome, and for content the SDK cannot give a client (a type it does not
// know): such an outcome is shown as text.
func contentOf(outcome string) (_ *mcp.CallToolResult, ok bool) {
	raw, ok := mcptool.ParseContentOutcome(outcome)
	if !ok {
		return nil, false
	}
	var r mcp.CallToolResult
	var sc struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if json.Unmarshal(raw, &r) != nil || json.Unmarshal(raw, &sc) != nil {
		return nil, false
	}
	if r.Content == nil {
		r.Content = []mcp.Content{}
	}
	// Decoded again, so that its numbers stay as the upstream wrote them.
	r.StructuredContent = nil
	if obj := jsonObject(string(sc.StructuredContent)); obj != nil {
		r.StructuredContent = obj
	}
	return &r, true
}

// jsonObject returns outcome decoded when it is one JSON object, else nil.
func jsonObject(outcome string) map[string]any {
	t := strings.TrimSpace(outcome)
	if !strings.HasPrefix(t, "{") {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || dec.More() {
		return nil
	}
	if _, err := dec.Token(); err == nil { // something after the object
		return nil
	}
	return obj
}

// errorResult is an isError result for a call that got no answer: the text
// says what is known, and the _meta names the call so that a retry with its
// call_id attaches to the answer instead of publishing again.
func errorResult(callID, runID, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{
		IsError: true,
		Content: []mcp.Content{&mcp.TextContent{Text: text}},
		Meta:    mcp.Meta{MetaCallID: callID, MetaRunID: runID},
	}
}

// rawArguments returns a request's arguments as the call's JSON: {} when
// absent.
func rawArguments(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage("{}")
	}
	return raw
}
