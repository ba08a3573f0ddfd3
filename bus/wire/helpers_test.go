package wire_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/cloudevents/sdk-go/v2/event"
)

// roundTrip encodes e in structured mode (the CloudEvents JSON format) and decodes
// it again, as a NATS message in structured mode carries it. It returns the decoded
// event and the JSON as a generic map, to check attributes by name.
func roundTrip(t *testing.T, e event.Event) (event.Event, map[string]any) {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured JSON %s: %v", b, err)
	}
	var back event.Event
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
	return back, m
}

// decode parses structured-mode JSON into an event.
func decode(t *testing.T, s string) event.Event {
	t.Helper()
	var e event.Event
	if err := json.Unmarshal([]byte(s), &e); err != nil {
		t.Fatalf("unmarshal %s: %v", s, err)
	}
	return e
}

// wantAttrs checks that m has exactly the attributes in want (by name, with
// values compared as JSON decodes them) besides any listed in ignore.
func wantAttrs(t *testing.T, m map[string]any, want map[string]any, ignore ...string) {
	t.Helper()
	skip := map[string]bool{}
	for _, k := range ignore {
		skip[k] = true
	}
	for k, v := range want {
		got, ok := m[k]
		if !ok {
			t.Errorf("attribute %q missing; event: %v", k, m)
			continue
		}
		if v != nil && got != v {
			t.Errorf("attribute %q = %#v, want %#v", k, got, v)
		}
	}
	for k := range m {
		if _, ok := want[k]; !ok && !skip[k] {
			t.Errorf("unexpected attribute %q = %#v", k, m[k])
		}
	}
}

// shortEscapes rewrites the escapes \u0008 and \u000c in the JSON text b as \b and
// \f. toolexec writes attributes with its one string escaper (canonical.AppendQuoted),
// which uses the short forms where the SDK's writer spells the code point out; the
// two read the same, and a comparison of both writers' bytes after this rewrite
// holds them to each other in everything else. An escaped backslash is copied as it
// is, so a string holding the text `\u0008` is left alone.
func shortEscapes(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			out = append(out, b[i])
			continue
		}
		switch rest := b[i+1:]; {
		case bytes.HasPrefix(rest, []byte("u0008")):
			out = append(out, '\\', 'b')
			i += 5
		case bytes.HasPrefix(rest, []byte("u000c")):
			out = append(out, '\\', 'f')
			i += 5
		default:
			out = append(out, b[i], b[i+1])
			i++
		}
	}
	return out
}

func TestShortEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`"\u0008\u000c"`:     `"\b\f"`,
		`"\\u0008"`:          `"\\u0008"`,
		`"\\\u0008"`:         `"\\\b"`,
		`"a\u000cb\n\u0007"`: `"a\fb\n\u0007"`,
		`"\u000C"`:           `"\u000C"`,
	} {
		if got := string(shortEscapes([]byte(in))); got != want {
			t.Errorf("shortEscapes(%s) = %s, want %s", in, got, want)
		}
	}
}

// sameText reports whether got and want are both nil or both errors of the
// same text.
func sameText(got, want error) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	return got.Error() == want.Error()
}
