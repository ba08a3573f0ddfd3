package mcpgate

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool/mcptool"
)

// TestResultOf: each kind of answer becomes the result docs/PROTOCOL.md §10 names, with
// the _meta a client branches on and a text that says what to do.
func TestResultOf(t *testing.T) {
	key := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name     string
		a        events.Answer
		isError  bool
		says     []string
		meta     map[string]any
		structed bool
	}{
		{"completed, plain text", events.Answer{Kind: events.KindCompleted, Tool: "book", Outcome: "K7Q2ZD", Key: key, CallID: "c", RunID: "r"},
			false, []string{"K7Q2ZD"}, map[string]any{MetaKind: "completed", MetaKey: key, MetaCallID: "c", MetaRunID: "r"}, false},
		{"deduplicated, a JSON object", events.Answer{Kind: events.KindDeduplicated, Tool: "book", Outcome: ` {"pnr":"K7"} `, Key: key, CallID: "c"},
			false, []string{`"pnr"`}, map[string]any{MetaKind: "deduplicated"}, true},
		{"failed", events.Answer{Kind: events.KindFailed, Tool: "book", Error: "flight cancelled", Code: events.CodeToolError, CallID: "c"},
			true, []string{"failed", "flight cancelled", "did not land"}, map[string]any{MetaKind: "failed", MetaCode: "tool_error"}, false},
		{"rejected", events.Answer{Kind: events.KindRejected, Tool: "book", Error: "missing seats", Field: "arguments", Code: events.CodeSchemaViolation, CallID: "c"},
			true, []string{"rejected", "arguments: missing seats", "nothing ran"}, map[string]any{MetaKind: "rejected", MetaCode: "schema_violation"}, false},
		{"indeterminate, body entered", events.Answer{Kind: events.KindIndeterminate, Tool: "book", Reason: events.ReasonTimeout, BodyEntered: true, Key: key, CallID: "c"},
			true, []string{"UNKNOWN", "will not run it again", key, "operator must settle"},
			map[string]any{MetaKind: "indeterminate", MetaReason: "timeout", MetaBodyEntered: true}, false},
		{"indeterminate, store away before the body", events.Answer{Kind: events.KindIndeterminate, Tool: "book", Reason: events.ReasonStoreUnavailable, Key: key, CallID: "c"},
			true, []string{"Nothing ran", "safe"}, map[string]any{MetaReason: "store_unavailable", MetaBodyEntered: false}, false},
		{"indeterminate, no key", events.Answer{Kind: events.KindIndeterminate, Tool: "book", Reason: events.ReasonKeyUnderivable, CallID: "c"},
			true, []string{"Nothing ran", "key arguments"}, map[string]any{MetaReason: "key_underivable"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := resultOf(tc.a)
			txt := r.Content[0].(*mcp.TextContent).Text
			if r.IsError != tc.isError {
				t.Errorf("IsError = %v", r.IsError)
			}
			for _, s := range tc.says {
				if !strings.Contains(strings.ToLower(txt), strings.ToLower(s)) {
					t.Errorf("text %q does not say %q", txt, s)
				}
			}
			for k, v := range tc.meta {
				if r.Meta[k] != v {
					t.Errorf("_meta[%s] = %v, want %v (all: %v)", k, r.Meta[k], v, r.Meta)
				}
			}
			if (r.StructuredContent != nil) != tc.structed {
				t.Errorf("StructuredContent = %v, want set=%v", r.StructuredContent, tc.structed)
			}
		})
	}
}

func TestJSONObject(t *testing.T) {
	for in, want := range map[string]bool{
		`{"a":1}`: true, ` {"a":{"b":[1,2]}} `: true, `{}`: true,
		`[1]`: false, `"x"`: false, `{"a":1} {"b":2}`: false, `{"a":1} x`: false, `{"a":`: false, `PNR`: false, ``: false,
	} {
		if got := jsonObject(in) != nil; got != want {
			t.Errorf("jsonObject(%q) set = %v, want %v", in, got, want)
		}
	}
}

// TestResultOfContent: an outcome that carries MCP content (an upstream's
// image, audio or embedded resource) is given back as that content, for a
// completed answer and a deduplicated one alike; what the SDK cannot give a
// client is shown as text, as any other outcome.
func TestResultOfContent(t *testing.T) {
	wrap := func(inner string) string { return `{"` + mcptool.OutcomeResult + `":` + inner + `}` }
	for _, tc := range []struct {
		name         string
		outcome      string
		wantTypes    []string
		wantStruct   bool
		wantVerbatim bool // shown as the outcome's text
	}{
		{"image and text", wrap(`{"content":[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},{"type":"text","text":"a pixel"}]}`),
			[]string{"image", "text"}, false, false},
		{"audio", wrap(`{"content":[{"type":"audio","data":"UklGRg==","mimeType":"audio/wav"}]}`), []string{"audio"}, false, false},
		{"embedded resource", wrap(`{"content":[{"type":"resource","resource":{"uri":"test://r","mimeType":"text/plain","text":"hi"}}]}`),
			[]string{"resource"}, false, false},
		{"structured content beside", wrap(`{"content":[{"type":"resource_link","uri":"test://r","name":"r"}],"structuredContent":{"n":9007199254740993}}`),
			[]string{"resource_link"}, true, false},
		{"no content", wrap(`{"content":[]}`), []string{}, false, false},
		{"a type the SDK does not know", wrap(`{"content":[{"type":"hologram"}]}`), []string{"text"}, true, true},
		{"a JSON object of the tool's own", `{"content":[{"type":"image"}]}`, []string{"text"}, true, true},
	} {
		for _, kind := range []events.Kind{events.KindCompleted, events.KindDeduplicated} {
			t.Run(tc.name+"/"+string(kind), func(t *testing.T) {
				r := resultOf(events.Answer{Kind: kind, Tool: "snap", Outcome: tc.outcome, CallID: "c"})
				if r.IsError || r.Meta[MetaKind] != string(kind) {
					t.Fatalf("IsError %v, _meta %v", r.IsError, r.Meta)
				}
				types := []string{}
				for _, c := range r.Content {
					b, err := c.MarshalJSON()
					if err != nil {
						t.Fatal(err)
					}
					var v struct{ Type string }
					_ = json.Unmarshal(b, &v)
					types = append(types, v.Type)
				}
				if !slices.Equal(types, tc.wantTypes) {
					t.Errorf("content types %v, want %v", types, tc.wantTypes)
				}
				if (r.StructuredContent != nil) != tc.wantStruct {
					t.Errorf("StructuredContent = %v, want set=%v", r.StructuredContent, tc.wantStruct)
				}
				if b, _ := json.Marshal(r.StructuredContent); tc.wantStruct && !tc.wantVerbatim && string(b) != `{"n":9007199254740993}` {
					t.Errorf("StructuredContent %s, want its number as sent", b)
				}
				if tc.wantVerbatim && r.Content[0].(*mcp.TextContent).Text != tc.outcome {
					t.Errorf("text %q, want the outcome as is", r.Content[0].(*mcp.TextContent).Text)
				}
			})
		}
	}
}
