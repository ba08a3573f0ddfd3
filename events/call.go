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
	CallID string // the call's id; on the wire also its event id and the last token of its subject
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
	// Repeat says the call may repeat one published before under the same
	// tenant, tool and call id: its id was chosen by the caller, or it is a
	// copy sent again. On the wire it is a header (see bus/wire.RepeatHeader):
	// an executor then answers it from the answer already stored, if there is
	// one, instead of running it, and a client looks for that answer too.
	Repeat bool
	// Interactions lists what the caller can answer while the call runs, when
	// its body asks (an upstream MCP server's elicitation or sampling
	// request): "elicitation", "sampling". Empty: nothing, and every such
	// request is refused at once. On the wire it is a header (see
	// bus/wire.InteractionsHeader).
	Interactions []string
	// Delivery counts how often the transport has delivered this call, 1 for
	// the first delivery; 0 when unknown, which is read as the first. It is not
	// on the wire: the bus sets it from JetStream's metadata. An earlier
	// delivery may have entered the tool's body, so an answer to a later one
	// never says that nothing ran unless the record says so.
	Delivery int
}
