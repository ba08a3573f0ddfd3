package events

import (
	"encoding/json"
	"time"
)

// Call is one tool call: what the bus reads off the wire and the dispatcher
// runs, whatever wire it came from.
type Call struct {
	Tenant string // the tenant the call was published for
	RunID  string // the run the call belongs to
	CallID string // the call's id; on the wire also its event id and Nats-Msg-Id
	Tool   string // the tool called
	// Source is the agent that made the call (the event's source on the wire).
	Source string
	// Arguments is the raw JSON object of the call's arguments, exactly as sent
	// (duplicate members, number spellings and all), for canonicalisation and the
	// tool's schema to judge. A writer of calls treats nil as {}.
	Arguments json.RawMessage
	// TraceParent and TraceState are the W3C trace context of the caller, empty
	// when the call carries none.
	TraceParent string
	TraceState  string
	// Time is when the call was made (the event's time attribute); zero when
	// unknown.
	Time time.Time
	// Delivery counts how often the transport has delivered this call, 1 for
	// the first delivery; 0 when unknown, which is read as the first. It is not
	// on the wire: the bus sets it from JetStream's metadata. An earlier
	// delivery may have entered the tool's body, so an answer to a later one
	// never says that nothing ran unless the record says so.
	Delivery int
}
