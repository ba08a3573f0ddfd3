package events_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/schemas"
)

func TestParseKind(t *testing.T) {
	for _, k := range events.Kinds() {
		got, err := events.ParseKind(string(k))
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %q, %v; want %q", k, got, err, k)
		}
	}
	for _, s := range []string{"", "call", "Completed", "complete", "*", "completed.x", "resolved "} {
		if _, err := events.ParseKind(s); !errors.Is(err, events.ErrUnknownKind) {
			t.Errorf("ParseKind(%q) error = %v, want ErrUnknownKind", s, err)
		}
	}
}

func TestKindSets(t *testing.T) {
	want := []events.Kind{"completed", "deduplicated", "indeterminate", "failed", "rejected"}
	if got := events.AnswerKinds(); !slices.Equal(got, want) {
		t.Errorf("AnswerKinds() = %v, want %v", got, want)
	}
	for _, k := range want {
		if !k.IsAnswer() {
			t.Errorf("%q.IsAnswer() = false", k)
		}
	}
	if events.KindResolved.IsAnswer() || !events.KindResolved.Valid() {
		t.Error("resolved must be a valid kind that is not an answer")
	}
	if events.Kind("bogus").IsAnswer() {
		t.Error("an unknown kind must not be an answer")
	}
	for _, k := range events.Kinds() {
		if _, err := schemas.EventSchema(string(k)); err != nil {
			t.Errorf("kind %q has no schema: %v", k, err)
		}
	}
}

// schemaEnum returns the enum of property prop in the named schema.
func schemaEnum(t *testing.T, name, prop string) []string {
	t.Helper()
	b, err := schemas.EventSchema(name)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties map[string]struct {
			Enum []string `json:"enum"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Properties[prop].Enum
}

// TestCodesMatchSchemas keeps the Go constants and the published enums in step.
func TestCodesMatchSchemas(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		prop   string
		want   []string
	}{
		{"rejection codes", "rejected", "code", codes(events.RejectionCodes())},
		{"failure codes", "failed", "code", codes(events.FailureCodes())},
		{"reasons", "indeterminate", "reason", reasons(events.Reasons())},
		{"actions", "resolved", "action", []string{string(events.ActionComplete), string(events.ActionRelease)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := schemaEnum(t, tt.schema, tt.prop)
			if !slices.Equal(got, tt.want) {
				t.Errorf("schema %s.%s enum = %v\nGo constants      = %v", tt.schema, tt.prop, got, tt.want)
			}
		})
	}
	wantRejections := []string{"invalid_json", "not_cloudevent", "bad_specversion", "missing_attribute",
		"bad_token", "tenant_mismatch", "unknown_tool", "schema_violation", "too_large",
		"arguments_not_object", "duplicate_member", "nfc_collision", "number_out_of_range",
		"invalid_unicode", "too_deep", "arguments_mismatch", "bad_content_type", "bad_data", "call_id_mismatch", "tool_conflict"}
	for _, c := range wantRejections {
		if !events.Code(c).IsRejection() || events.Code(c).IsFailure() {
			t.Errorf("%q must be a rejection code and not a failure code", c)
		}
	}
	for _, c := range events.RejectionCodes() {
		if !c.IsRejection() {
			t.Errorf("%q is listed but IsRejection() = false", c)
		}
	}
	for _, c := range []events.Code{"tool_error", "no_effect", "timeout"} {
		if !c.IsFailure() || c.IsRejection() {
			t.Errorf("%q must be a failure code and not a rejection code", c)
		}
	}
	for _, r := range []events.Reason{"body_failed", "holder_lost", "store_unavailable", "key_underivable", "timeout"} {
		if !r.Valid() {
			t.Errorf("reason %q not valid", r)
		}
	}
	if events.Reason("crashed").Valid() || events.Code("nope").IsRejection() || events.Code("nope").IsFailure() || events.Action("undo").Valid() {
		t.Error("unknown reason, code or action accepted")
	}
}

func codes(cs []events.Code) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

func reasons(rs []events.Reason) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}
