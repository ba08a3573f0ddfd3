package wire

import (
	"fmt"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/cloudevents/sdk-go/v2/extensions"
	"github.com/cloudevents/sdk-go/v2/types"

	"github.com/tesserix/toolexec/events"
)

// TypePrefix starts the CloudEvents type of every toolexec event.
const TypePrefix = "io.tesserix.toolexec."

// CallType is the CloudEvents type of a tool call.
const CallType = TypePrefix + "call"

// EventType returns the CloudEvents type of events of kind k:
// "io.tesserix.toolexec.<kind>".
func EventType(k events.Kind) string { return TypePrefix + string(k) }

// KindOfType returns the kind whose CloudEvents type is t, or an error matching
// [events.ErrUnknownKind] (which is what [CallType] gets: a call is not an
// answer).
func KindOfType(t string) (events.Kind, error) {
	if len(t) > len(TypePrefix) && t[:len(TypePrefix)] == TypePrefix {
		if k := events.Kind(t[len(TypePrefix):]); k.Valid() {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w: type %s", events.ErrUnknownKind, quote(t))
}

// Names of the CloudEvents extension attributes toolexec uses.
const (
	// ExtTenant carries the tenant, on calls and answers.
	ExtTenant = "tenant"
	// ExtRunID carries the run id, on calls and answers.
	ExtRunID = "runid"
	// ExtCallID carries, on answers, the id of the call answered.
	ExtCallID = "callid"
	// ExtIdempotencyKey carries, on answers, the idempotency key when one was
	// derived.
	ExtIdempotencyKey = "idempotencykey"
)

// Extensions returns e's extension attributes for reading, without the copy
// Event.Extensions makes on every call (CloudEvents 1.0 events). The caller
// must not change the map.
func Extensions(e event.Event) map[string]any {
	if ec, ok := e.Context.(*event.EventContextV1); ok {
		return ec.Extensions
	}
	return e.Extensions()
}

// tracing returns e's distributed tracing extension, as
// extensions.GetDistributedTracingExtension reads it, from exts.
func tracing(exts map[string]any) (extensions.DistributedTracingExtension, bool) {
	tp, ok := exts[extensions.TraceParentExtension]
	if !ok {
		return extensions.DistributedTracingExtension{}, false
	}
	tpStr, err := types.ToString(tp)
	if err != nil {
		return extensions.DistributedTracingExtension{}, false
	}
	var tsStr string
	if ts, ok := exts[extensions.TraceStateExtension]; ok {
		tsStr, _ = types.ToString(ts)
	}
	return extensions.DistributedTracingExtension{TraceParent: tpStr, TraceState: tsStr}, true
}

// hasSubject reports whether e has a subject attribute, even an empty one.
func hasSubject(e event.Event) bool {
	if ec, ok := e.Context.(*event.EventContextV1); ok {
		return ec.Subject != nil
	}
	return e.Subject() != ""
}
