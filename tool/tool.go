package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/tesserix/toolexec/events"
)

// Func is the body of a tool. It returns the outcome (recorded and answered as is)
// or an error; wrap the error with [NoEffect] when the effect is known not to have
// landed.
type Func func(ctx context.Context, tc Context, args json.RawMessage) (string, error)

// Tool is a checked declaration with its body. It is immutable and safe for
// concurrent use.
type Tool struct {
	spec   Spec
	params []string // sorted parameter names from the schema's properties
	schema *jsonschema.Schema
	fn     Func
}

// New checks spec and returns the tool. It returns an error matching
// [ErrInvalidSpec] for a bad name, a schema that does not compile or is not an
// object schema, a retry or timeout that is negative, and one matching
// [ErrUnknownArgument] (naming it) for a key or check argument that is not among
// the schema's properties.
func New(spec Spec, fn Func) (*Tool, error) {
	if fn == nil {
		return nil, &SpecError{Tool: spec.Name, Field: "body", Msg: "is nil"}
	}
	if !events.ValidToken(spec.Name) {
		return nil, &SpecError{Tool: spec.Name, Field: "name", Msg: "must match [A-Za-z0-9_-]{1,128}"}
	}
	if spec.Timeout < 0 {
		return nil, &SpecError{Tool: spec.Name, Field: "timeout", Msg: "is negative"}
	}
	if r := spec.Retry; r.InitialBackoff < 0 || r.MaxBackoff < 0 || r.Multiplier < 0 || r.MaxAttempts < 0 {
		return nil, &SpecError{Tool: spec.Name, Field: "retry", Msg: "has a negative value"}
	}
	if len(bytes.TrimSpace(spec.Parameters)) == 0 {
		spec.Parameters = json.RawMessage(`{"type":"object"}`)
	}
	schema, params, err := compileParameters(spec.Name, spec.Parameters)
	if err != nil {
		return nil, err
	}
	if p := spec.Idempotency; p != nil {
		if _, err := ParseKind(string(p.Kind)); err != nil {
			return nil, &SpecError{Tool: spec.Name, Field: "idempotency.kind", Msg: err.Error()}
		}
		for _, list := range []struct {
			field string
			names []string
		}{{"key_arguments", p.KeyArguments}, {"check_arguments", p.CheckArguments}} {
			seen := map[string]bool{}
			for _, name := range list.names {
				if _, ok := slices.BinarySearch(params, name); !ok {
					return nil, &SpecError{Tool: spec.Name, Field: list.field, Argument: name,
						Msg: "is not a parameter of the tool (parameters: " + strings.Join(params, ", ") + ")"}
				}
				if seen[name] {
					return nil, &SpecError{Tool: spec.Name, Field: list.field, Argument: name, Msg: "is listed twice"}
				}
				seen[name] = true
			}
		}
		// Copy the slices so that a caller's later edits cannot change the declaration,
		// keeping nil apart from empty.
		cp := *p
		if p.KeyArguments != nil {
			cp.KeyArguments = slices.Clone(p.KeyArguments)
			if cp.KeyArguments == nil {
				cp.KeyArguments = []string{}
			}
		}
		cp.CheckArguments = slices.Clone(p.CheckArguments)
		spec.Idempotency = &cp
	}
	spec.Parameters = slices.Clone(spec.Parameters)
	return &Tool{spec: spec, params: params, schema: schema, fn: fn}, nil
}

// compileParameters compiles a parameters schema and lists its top-level
// properties. Schemas may not load anything from outside: $ref works only within
// the document.
func compileParameters(name string, raw json.RawMessage) (*jsonschema.Schema, []string, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, nil, &SpecError{Tool: name, Field: "parameters", Msg: "is not JSON: " + err.Error()}
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, nil, &SpecError{Tool: name, Field: "parameters", Msg: "must be a JSON Schema object"}
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, nil, &SpecError{Tool: name, Field: "parameters", Msg: fmt.Sprintf("must describe an object (type is %v)", t)}
	}
	var params []string
	if props, ok := obj["properties"]; ok {
		m, ok := props.(map[string]any)
		if !ok {
			return nil, nil, &SpecError{Tool: name, Field: "parameters.properties", Msg: "must be an object"}
		}
		for p := range m {
			params = append(params, p)
		}
	}
	sort.Strings(params)
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoader{})
	const loc = "toolexec:///parameters.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, nil, &SpecError{Tool: name, Field: "parameters", Msg: err.Error()}
	}
	schema, err := c.Compile(loc)
	if err != nil {
		return nil, nil, &SpecError{Tool: name, Field: "parameters", Msg: "does not compile: " + err.Error()}
	}
	return schema, params, nil
}

// refuseLoader keeps schema compilation from reading files or the network.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %q is not allowed: tool schemas must be self-contained", url)
}

// Name returns the tool's name.
func (t *Tool) Name() string { return t.spec.Name }

// Spec returns a copy of the tool's declaration.
func (t *Tool) Spec() Spec {
	s := t.spec
	if p := s.Idempotency; p != nil {
		cp := *p
		cp.KeyArguments = cloneKeepNil(p.KeyArguments)
		cp.CheckArguments = slices.Clone(p.CheckArguments)
		s.Idempotency = &cp
	}
	s.Parameters = slices.Clone(s.Parameters)
	return s
}

func cloneKeepNil(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string{}, s...)
}

// Timeout returns the bound on one attempt of the body; zero means none.
func (t *Tool) Timeout() time.Duration { return t.spec.Timeout }

// Retry returns the tool's retry policy (Effectful tools are never retried,
// whatever it says).
func (t *Tool) Retry() Retry { return t.spec.Retry }

// Policy returns the tool's idempotency policy, nil when it declares none. The
// returned value must not be modified.
func (t *Tool) Policy() *Policy { return t.spec.Idempotency }

// Parameters returns the sorted names of the tool's parameters.
func (t *Tool) Parameters() []string { return slices.Clone(t.params) }

// ArgumentsError reports arguments that do not satisfy the tool's schema.
type ArgumentsError struct {
	Tool string
	Err  error // the validator's error, with the failing locations
}

func (e *ArgumentsError) Error() string {
	return fmt.Sprintf("arguments of tool %q do not match its parameters: %v", e.Tool, e.Err)
}

func (e *ArgumentsError) Unwrap() error { return e.Err }

// Validate checks arguments (a JSON object) against the tool's parameters schema.
// It returns an *ArgumentsError when they do not satisfy it.
func (t *Tool) Validate(args json.RawMessage) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
	if err != nil {
		return &ArgumentsError{Tool: t.spec.Name, Err: err}
	}
	return t.ValidateValue(inst)
}

// ValidateValue is [Tool.Validate] for arguments already decoded, as
// encoding/json's Decoder with UseNumber decodes them (numbers as json.Number):
// the value idemkey.ParseValue returns beside the parsed arguments, so that a
// call's JSON is read once.
func (t *Tool) ValidateValue(args any) error {
	if err := t.schema.Validate(args); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return &ArgumentsError{Tool: t.spec.Name, Err: errors.New(flattenValidation(ve))}
		}
		return &ArgumentsError{Tool: t.spec.Name, Err: err}
	}
	return nil
}

// printer renders validation messages in English.
var printer = message.NewPrinter(language.English)

// flattenValidation renders a validation error on one line: each leaf cause as
// "/location: message".
func flattenValidation(ve *jsonschema.ValidationError) string {
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			parts = append(parts, loc+": "+e.ErrorKind.LocalizedString(printer))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return strings.Join(parts, "; ")
}

// Call runs the body once. It does not validate; the dispatcher does.
func (t *Tool) Call(ctx context.Context, tc Context, args json.RawMessage) (string, error) {
	return t.fn(ctx, tc, args)
}
