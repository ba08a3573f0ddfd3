package natstool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/tool"
)

// ErrInvalidDeclaration is matched by every error that refuses a worker's
// declaration; those that tool.New raised also match tool.ErrInvalidSpec
// (and tool.ErrUnknownArgument for a key or check argument that is not a
// parameter).
var ErrInvalidDeclaration = errors.New("natstool: invalid declaration")

// maxDeclarationBytes bounds a declaration's JSON.
const maxDeclarationBytes = 256 << 10

// Declaration returns the declaration a worker advertises for t: the JSON of
// its catalog declaration (bus.DeclOf), with DefaultTimeout when t declares no
// timeout, since the body is bounded by it either way.
func Declaration(t *tool.Tool) ([]byte, error) {
	d := bus.DeclOf(t)
	if d.TimeoutMillis == 0 {
		d.TimeoutMillis = DefaultTimeout.Milliseconds()
	}
	b, err := jsonv2.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("natstool: encoding the declaration of tool %q: %w", d.Name, err)
	}
	return b, nil
}

// ParseDeclaration reads a declaration as a worker advertises it — one JSON
// object with the members of a catalog declaration (bus.ToolDecl,
// docs/PROTOCOL.md §8) — and returns it as a spec, checked as tool.New checks
// one, with DefaultTimeout when it gives no timeout_ms. It reads strictly: a
// member that is not a declaration's, a member given twice, key_arguments or
// check_arguments without a kind, more than 256 KiB, are refused, so that a
// misspelt key_arguments cannot pass for "every argument". Its errors match
// [ErrInvalidDeclaration].
func ParseDeclaration(data []byte) (tool.Spec, error) {
	if len(data) > maxDeclarationBytes {
		return tool.Spec{}, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidDeclaration, len(data), maxDeclarationBytes)
	}
	var d bus.ToolDecl
	if err := jsonv2.Unmarshal(data, &d, jsonv2.RejectUnknownMembers(true)); err != nil {
		return tool.Spec{}, fmt.Errorf("%w: not the JSON of a declaration: %v", ErrInvalidDeclaration, err)
	}
	spec := tool.Spec{
		Name: d.Name, Description: d.Description, Parameters: json.RawMessage(d.Parameters),
		Timeout: time.Duration(d.TimeoutMillis) * time.Millisecond,
	}
	if d.TimeoutMillis < 0 {
		spec.Timeout = -1
	}
	switch {
	case d.Kind != "":
		spec.Idempotency = &tool.Policy{Kind: d.Kind, KeyArguments: d.KeyArguments, CheckArguments: d.CheckArguments}
	case d.KeyArguments != nil || d.CheckArguments != nil:
		return tool.Spec{}, fmt.Errorf("%w: tool %q: key_arguments and check_arguments need a kind", ErrInvalidDeclaration, d.Name)
	}
	if spec.Timeout == 0 {
		spec.Timeout = DefaultTimeout
	}
	t, err := tool.New(spec, refuse)
	if err != nil {
		return tool.Spec{}, fmt.Errorf("%w: %w", ErrInvalidDeclaration, err)
	}
	return t.Spec(), nil
}

// refuse stands in for a body where only the declaration is checked.
func refuse(context.Context, tool.Context, json.RawMessage) (string, error) {
	return "", errors.New("natstool: a declaration has no body")
}
