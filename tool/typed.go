package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	invopop "github.com/invopop/jsonschema"
)

// Typed declares a tool whose arguments are the Go struct A. Unless spec.Parameters
// is set, the parameters schema is derived from A: its JSON field names are the
// parameters, fields without `omitempty` are required, unknown members are refused
// and `jsonschema` struct tags refine the schema. The body receives the arguments
// decoded into A.
func Typed[A any](spec Spec, fn func(ctx context.Context, tc Context, args A) (string, error)) (*Tool, error) {
	if fn == nil {
		return nil, &SpecError{Tool: spec.Name, Field: "body", Msg: "is nil"}
	}
	if len(bytes.TrimSpace(spec.Parameters)) == 0 {
		typ := reflect.TypeFor[A]()
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return nil, &SpecError{Tool: spec.Name, Field: "parameters", Msg: fmt.Sprintf("typed tools take a struct, not %s", typ)}
		}
		r := invopop.Reflector{Anonymous: true, DoNotReference: true, ExpandedStruct: true}
		raw, err := json.Marshal(r.ReflectFromType(typ))
		if err != nil {
			return nil, &SpecError{Tool: spec.Name, Field: "parameters", Msg: "cannot derive a schema: " + err.Error()}
		}
		spec.Parameters = raw
	}
	return New(spec, func(ctx context.Context, tc Context, raw json.RawMessage) (string, error) {
		var args A
		if err := json.Unmarshal(raw, &args); err != nil {
			return "", NoEffect(fmt.Errorf("decoding arguments of %s: %w", tc.Tool, err))
		}
		return fn(ctx, tc, args)
	})
}
