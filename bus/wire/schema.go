package wire

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/schemas"
)

// compiled holds the embedded event schemas, compiled on first use.
var compiled struct {
	once sync.Once
	// byName maps a schema name ("call", "completed", ...) to its compiled schema.
	// Written once under once, read-only afterwards.
	byName map[string]*jsonschema.Schema
	err    error
}

// schemaFor returns the compiled schema named name, compiling every embedded
// schema the first time it is called. Safe for concurrent use.
func schemaFor(name string) (*jsonschema.Schema, error) {
	compiled.once.Do(func() {
		compiled.byName, compiled.err = compileAll()
	})
	if compiled.err != nil {
		return nil, compiled.err
	}
	s, ok := compiled.byName[name]
	if !ok {
		return nil, fmt.Errorf("%w: no schema for %s", events.ErrUnknownKind, quote(name))
	}
	return s, nil
}

// compileAll compiles every schema in package schemas. The compiler resolves
// nothing outside them: the schemas' $ids are registered as resources and the
// draft 2020-12 meta-schema ships with the validator.
func compileAll() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	names := schemas.EventSchemaNames()
	for _, name := range names {
		b, err := schemas.EventSchema(name)
		if err != nil {
			return nil, fmt.Errorf("wire: read schema %s: %w", name, err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			return nil, fmt.Errorf("wire: parse schema %s: %w", name, err)
		}
		if err := c.AddResource(schemas.EventSchemaID(name), doc); err != nil {
			return nil, fmt.Errorf("wire: add schema %s: %w", name, err)
		}
	}
	out := make(map[string]*jsonschema.Schema, len(names))
	for _, name := range names {
		s, err := c.Compile(schemas.EventSchemaID(name))
		if err != nil {
			return nil, fmt.Errorf("wire: compile schema %s: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
}

// Validate checks data, the data of an event of the given kind, against the kind's
// embedded JSON Schema. It returns nil when data matches, an error matching
// [ErrInvalidData] (and wrapping the validator's *jsonschema.ValidationError where
// there is one) when it does not or is not JSON, and one matching
// [events.ErrUnknownKind] for an unknown kind.
func Validate(kind events.Kind, data []byte) error {
	if !kind.Valid() {
		return fmt.Errorf("%w: %s", events.ErrUnknownKind, quote(string(kind)))
	}
	return validateBytes(string(kind), data)
}

// ValidateCall checks data, the data of a call event, against the embedded call
// schema. Errors are as for [Validate].
func ValidateCall(data []byte) error { return validateBytes(schemas.CallSchema, data) }

func validateBytes(name string, data []byte) error {
	v, err := parseData(name, data)
	if err != nil {
		return err
	}
	return validateValue(name, v)
}

// parseData decodes data, one JSON value, as the validator reads it.
func parseData(name string, data []byte) (any, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("wire: %s data is not JSON: %w: %w", name, ErrInvalidData, err)
	}
	return v, nil
}

// validateValue checks v, decoded by parseData (the values
// jsonschema.UnmarshalJSON gives), against the schema named name.
func validateValue(name string, v any) error {
	s, err := schemaFor(name)
	if err != nil {
		return err
	}
	if err := s.Validate(v); err != nil {
		return &dataError{name: name, summary: describe(err), err: err}
	}
	return nil
}

// dataError is a schema violation: one line for people, and the validator's
// *jsonschema.ValidationError for programs. It matches ErrInvalidData.
type dataError struct {
	name    string // the schema: "call", "completed", ...
	summary string // describe(err)
	err     error
}

func (e *dataError) Error() string {
	return "wire: " + e.name + " data does not match its schema: " + e.summary
}

func (e *dataError) Unwrap() []error { return []error{ErrInvalidData, e.err} }

// describe condenses a validation error into one line: each failed leaf as
// "<instance location>: <what is wrong>", joined by "; ".
func describe(err error) string {
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err.Error()
	}
	var parts []string
	for _, u := range verr.BasicOutput().Errors {
		if u.Error == nil {
			continue
		}
		loc := u.InstanceLocation
		if loc == "" {
			loc = "/"
		}
		parts = append(parts, loc+": "+u.Error.String())
	}
	if len(parts) == 0 {
		return verr.Error()
	}
	return strings.Join(parts, "; ")
}
