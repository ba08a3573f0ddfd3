package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/tesserix/toolexec/events"
)

// FuzzCallArguments holds callArguments, which reads the call schema's rules
// directly, to the schema itself: on valid JSON without duplicate members it
// accepts exactly the data ValidateCall accepts, and returns the
// arguments' bytes as sent.
func FuzzCallArguments(f *testing.F) {
	for _, s := range []string{
		`{"arguments":{}}`, `{"arguments":{"a":[1,{"b":null}]}}`, ` { "arguments" : { "x" : "y" } } `,
		`{"arguments":[]}`, `{"arguments":null}`, `{"arguments":"x"}`, `{"arguments":1}`, `{}`,
		`{"arguments":{},"x":1}`, `{"x":1}`, `[]`, `"x"`, `1`, `null`, `{"arguments":{},"arguments":{}}`,
		`{"argu\u006dents":{}}`, `{"arguments":{}`, ``, `{"arguments":{"a":"\ud800"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		args, err := callArguments(data)
		if err != nil {
			var re *events.RejectedError
			if !errors.As(err, &re) {
				t.Fatalf("callArguments(%q) = %v, not a *events.RejectedError", data, err)
			}
		}
		if !utf8.Valid(data) || !json.Valid(data) {
			if err == nil {
				t.Fatalf("callArguments(%q) accepted data that is not valid UTF-8 JSON", data)
			}
			return
		}
		if re := (*events.RejectedError)(nil); errors.As(err, &re) && re.Code == events.CodeDuplicateMember {
			return // the schema, reading a decoded map, cannot see duplicates
		}
		schemaErr := ValidateCall(data)
		if (err == nil) != (schemaErr == nil) {
			t.Fatalf("callArguments(%q) = %v but the call schema says %v", data, err, schemaErr)
		}
		if err != nil {
			return
		}
		var whole struct{ Arguments json.RawMessage }
		if e := json.Unmarshal(data, &whole); e != nil || !bytes.Equal(args, whole.Arguments) {
			t.Fatalf("callArguments(%q) returned arguments %q, want %q", data, args, whole.Arguments)
		}
	})
}
