package natstool_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
)

// TestParseDeclaration: a worker's declaration is read strictly and checked as
// a tools file's is, each refusal matching ErrInvalidDeclaration and, where
// tool.New refused it, tool.ErrInvalidSpec, and saying what is wrong.
func TestParseDeclaration(t *testing.T) {
	const params = `{"type":"object","properties":{"flight":{"type":"string"},"seats":{"type":"integer"}}}`
	tests := []struct {
		name string
		give string
		// want is the spec read, for a declaration that is accepted.
		want *tool.Spec
		// says is in the refusal's message; spec says tool.New refused it.
		says    string
		spec    bool
		unknown bool // the refusal matches tool.ErrUnknownArgument
	}{
		{name: "every member", give: `{"name":"book","description":"Take a seat.","parameters":` + params +
			`,"kind":"effectful","key_arguments":["flight"],"check_arguments":["seats"],"timeout_ms":1500}`,
			want: &tool.Spec{Name: "book", Description: "Take a seat.", Parameters: json.RawMessage(params), Timeout: 1500 * time.Millisecond,
				Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}, CheckArguments: []string{"seats"}}}},
		{name: "no key arguments: every argument", give: `{"name":"book","parameters":` + params + `,"kind":"idempotent"}`,
			want: &tool.Spec{Name: "book", Parameters: json.RawMessage(params), Timeout: natstool.DefaultTimeout,
				Idempotency: &tool.Policy{Kind: tool.Idempotent}}},
		{name: "empty key arguments: none", give: `{"name":"book","parameters":` + params + `,"kind":"idempotent","key_arguments":[]}`,
			want: &tool.Spec{Name: "book", Parameters: json.RawMessage(params), Timeout: natstool.DefaultTimeout,
				Idempotency: &tool.Policy{Kind: tool.Idempotent, KeyArguments: []string{}}}},
		{name: "no policy, no parameters", give: `{"name":"echo"}`,
			want: &tool.Spec{Name: "echo", Parameters: json.RawMessage(`{"type":"object"}`), Timeout: natstool.DefaultTimeout}},

		{name: "not JSON", give: `{"name":"book"`, says: "not the JSON of a declaration"},
		{name: "not an object", give: `["book"]`, says: "not the JSON of a declaration"},
		{name: "empty", give: ``, says: "not the JSON of a declaration"},
		{name: "unknown member", give: `{"name":"book","kind":"effectful","key_argument":["flight"]}`, says: "key_argument"},
		{name: "member twice", give: `{"name":"book","name":"cancel"}`, says: "name"},
		{name: "trailing data", give: `{"name":"book"} {}`, says: "not the JSON of a declaration"},
		{name: "bad name", give: `{"name":"bo.ok"}`, says: "name", spec: true},
		{name: "no name", give: `{"description":"nameless"}`, says: "name", spec: true},
		{name: "schema does not compile", give: `{"name":"book","parameters":{"type":"object","properties":{"flight":{"type":"strin"}}}}`,
			says: "parameters", spec: true},
		{name: "schema not an object schema", give: `{"name":"book","parameters":{"type":"array"}}`, says: "parameters", spec: true},
		{name: "schema null", give: `{"name":"book","parameters":null}`, says: "parameters", spec: true},
		{name: "schema loads from outside", give: `{"name":"book","parameters":{"$ref":"https://example.com/s.json"}}`, says: "parameters", spec: true},
		{name: "key argument not a parameter", give: `{"name":"book","parameters":` + params + `,"kind":"effectful","key_arguments":["flihgt"]}`,
			says: "flihgt", spec: true, unknown: true},
		{name: "check argument not a parameter", give: `{"name":"book","parameters":` + params + `,"kind":"effectful","check_arguments":["gate"]}`,
			says: "gate", spec: true, unknown: true},
		{name: "key arguments without a kind", give: `{"name":"book","parameters":` + params + `,"key_arguments":["flight"]}`,
			says: "need a kind"},
		{name: "unknown kind", give: `{"name":"book","kind":"once"}`, says: "kind", spec: true},
		{name: "negative timeout", give: `{"name":"book","timeout_ms":-1}`, says: "timeout", spec: true},
		{name: "too large", give: `{"name":"book","description":"` + strings.Repeat("x", 300<<10) + `"}`, says: "bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := natstool.ParseDeclaration([]byte(tt.give))
			if tt.want != nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !reflect.DeepEqual(got, *tt.want) {
					t.Fatalf("read %+v (policy %+v), want %+v (policy %+v)", got, got.Idempotency, *tt.want, tt.want.Idempotency)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			if !errors.Is(err, natstool.ErrInvalidDeclaration) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("err = %v; want ErrInvalidDeclaration saying %q", err, tt.says)
			}
			if errors.Is(err, tool.ErrInvalidSpec) != tt.spec || errors.Is(err, tool.ErrUnknownArgument) != tt.unknown {
				t.Errorf("err = %v: ErrInvalidSpec %v, ErrUnknownArgument %v; want %v, %v", err,
					errors.Is(err, tool.ErrInvalidSpec), errors.Is(err, tool.ErrUnknownArgument), tt.spec, tt.unknown)
			}
		})
	}
}

// TestDeclarationRoundTrip: what a worker advertises for a tool reads back as
// the tool's declaration, "every argument" and "none" kept apart, a missing
// timeout as the default.
func TestDeclarationRoundTrip(t *testing.T) {
	for _, spec := range []tool.Spec{
		bookSpec,
		{Name: "reset", Idempotency: &tool.Policy{Kind: tool.Idempotent, KeyArguments: []string{}}},
		{Name: "echo", Description: "Say it back."},
	} {
		tl, err := tool.New(spec, func(context.Context, tool.Context, json.RawMessage) (string, error) { return "", nil })
		if err != nil {
			t.Fatal(err)
		}
		b, err := natstool.Declaration(tl)
		if err != nil {
			t.Fatal(err)
		}
		got, err := natstool.ParseDeclaration(b)
		if err != nil {
			t.Fatalf("%s: %s refused: %v", spec.Name, b, err)
		}
		want := tl.Spec()
		if want.Timeout == 0 {
			want.Timeout = natstool.DefaultTimeout
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %s read back as %+v, want %+v", spec.Name, b, got, want)
		}
	}
}
