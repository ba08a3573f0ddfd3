package mcptool_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/tool/mcptool"
)

// carried is what a test reads of the result a content outcome carries.
type carried struct {
	Content []struct {
		Type string         `json:"type"`
		Text string         `json:"text"`
		Meta map[string]any `json:"_meta"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
}

// TestContentOutcome: content that is not all text is kept as MCP content,
// item by item as sent (compacted), with structured content beside it; items
// that do not fit within the bound (DefaultMaxContentBytes, or the one given)
// are replaced by a text item with their digest, and the outcome stays within
// it.
func TestContentOutcome(t *testing.T) {
	image := `{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"}`
	audio := `{"type":"audio","data":"UklGRg==","mimeType":"audio/wav","annotations":{"audience":["user"]}}`
	resource := `{"type":"resource","resource":{"uri":"test://doc","mimeType":"text/plain","text":"the text"}}`
	text := `{"type":"text","text":"and words"}`
	huge := `{"type":"image","mimeType":"image/png","data":"` + strings.Repeat("A", mcptool.DefaultMaxContentBytes) + `"}`
	hugeSum := sha256.Sum256([]byte(huge))
	medium := `{"type":"image","mimeType":"image/png","data":"` + strings.Repeat("A", 1500) + `"}`
	many := make([]string, 2000)
	for i := range many {
		many[i] = fmt.Sprintf(`{"type":"audio","mimeType":"audio/wav","data":"%0300d"}`, i)
	}
	for _, tt := range []struct {
		name       string
		give       []string
		structured string
		max        int
		check      func(t *testing.T, out string, r carried)
		wantErr    string
	}{
		{name: "image, audio, resource and text, as sent", give: []string{image, audio, resource, text},
			check: func(t *testing.T, out string, r carried) {
				want := `{"` + mcptool.OutcomeResult + `":{"content":[` + strings.Join([]string{
					`{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}`, audio, resource, text}, ",") + `]}}`
				if out != want {
					t.Errorf("outcome\n%s\nwant\n%s", out, want)
				}
			}},
		{name: "structured content kept beside", give: []string{image}, structured: `{ "b": 2, "a": [1] }`,
			check: func(t *testing.T, _ string, r carried) {
				if string(r.StructuredContent) != `{"b":2,"a":[1]}` || len(r.Content) != 1 {
					t.Errorf("structuredContent %s, %d items", r.StructuredContent, len(r.Content))
				}
			}},
		{name: "an item over the bound is left out, with its digest", give: []string{huge, text},
			check: func(t *testing.T, out string, r carried) {
				if len(r.Content) != 2 || r.Content[0].Type != "text" || !strings.Contains(r.Content[0].Text, "image (image/png) content") {
					t.Fatalf("content %+v", r.Content)
				}
				om, _ := r.Content[0].Meta[mcptool.MetaOmitted].(map[string]any)
				if om["sha256"] != hex.EncodeToString(hugeSum[:]) || om["bytes"] != float64(len(huge)) || om["type"] != "image" {
					t.Errorf("omitted %v", om)
				}
				if r.Content[1].Text != "and words" {
					t.Errorf("the item after it: %+v", r.Content[1])
				}
				if len(out) > mcptool.DefaultMaxContentBytes {
					t.Errorf("outcome of %d bytes", len(out))
				}
			}},
		{name: "items past the room for digests are left out together", give: many,
			check: func(t *testing.T, out string, r carried) {
				last := r.Content[len(r.Content)-1]
				om, _ := last.Meta[mcptool.MetaOmitted].(map[string]any)
				if len(out) > mcptool.DefaultMaxContentBytes || om["items"] == nil || len(r.Content) < 150 {
					t.Errorf("outcome of %d bytes, %d items, last %+v", len(out), len(r.Content), last)
				}
				if r.Content[0].Type != "audio" {
					t.Errorf("the first item, which fits, is %s", r.Content[0].Type)
				}
			}},
		{name: "a bound of one's own", give: []string{audio, medium, text}, max: 2000,
			check: func(t *testing.T, out string, r carried) {
				if len(out) > 2000 || len(r.Content) != 3 || r.Content[0].Type != "audio" || r.Content[1].Type != "text" ||
					!strings.Contains(r.Content[1].Text, "over the 2000 bytes") || r.Content[2].Text != "and words" {
					t.Errorf("outcome of %d bytes: %+v", len(out), r.Content)
				}
			}},
		{name: "an item that is not an object", give: []string{`"image"`}, wantErr: "content item 0"},
		{name: "an item without a type", give: []string{image, `{"data":"x"}`}, wantErr: "content item 1"},
		{name: "structured content that is not JSON", give: []string{image}, structured: `{`, wantErr: "structuredContent"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			raw := make([]json.RawMessage, len(tt.give))
			for i, s := range tt.give {
				raw[i] = json.RawMessage(s)
			}
			out, err := mcptool.ContentOutcome(raw, json.RawMessage(tt.structured), tt.max)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ContentOutcome = %q, %v; want an error naming %q", out, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			result, ok := mcptool.ParseContentOutcome(out)
			if !ok {
				t.Fatalf("ParseContentOutcome(%q) is not ok", out)
			}
			var r carried
			if err := json.Unmarshal(result, &r); err != nil {
				t.Fatal(err)
			}
			tt.check(t, out, r)
		})
	}
}

// TestParseContentOutcome: only an object whose one member is OutcomeResult,
// holding a content list, carries MCP content; every other outcome is the
// tool's own.
func TestParseContentOutcome(t *testing.T) {
	m := mcptool.OutcomeResult
	for _, tt := range []struct {
		give string
		want bool
	}{
		{`{"` + m + `":{"content":[]}}`, true},
		{` {"` + m + `":{"content":[{"type":"image"}],"structuredContent":{"a":1}}} `, true},
		{`{"` + m + `":{"content":[]},"other":1}`, false},
		{`{"` + m + `":null}`, false},
		{`{"` + m + `":{"content":{}}}`, false},
		{`{"` + m + `":{}}`, false},
		{`{"content":[{"type":"image"}]}`, false},
		{`[{"type":"image","data":"x","mimeType":"image/png"}]`, false},
		{`"` + m + `"`, false},
		{``, false},
		{`PNR ABC123`, false},
	} {
		if _, ok := mcptool.ParseContentOutcome(tt.give); ok != tt.want {
			t.Errorf("ParseContentOutcome(%q) ok = %v, want %v", tt.give, ok, tt.want)
		}
	}
}
