package wire

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
)

// Interactions: what the executor running a call asks its caller while the
// body runs (an upstream MCP server's elicitation/create or
// sampling/createMessage), and the caller's answers (docs/PROTOCOL.md §13).
const (
	// InteractPrefix starts the subject where the executor running a call
	// sends its caller the requests of the call's body ([InteractSubject]).
	InteractPrefix = "toolexec.interact."
	// InteractSubjects matches every interaction subject: what the executors'
	// account exports to the tenants, each its own.
	InteractSubjects = InteractPrefix + "*.>"
	// RespondPrefix starts the subject where a caller takes and answers those
	// requests ([RespondSubject]).
	RespondPrefix = "toolexec.respond."
	// RespondSubjects matches every response subject: what the executors'
	// account exports to the tenants as a service, each its own.
	RespondSubjects = RespondPrefix + "*.>"

	// InteractionsHeader names the call header in which a caller declares the
	// requests it can answer while the call runs: a comma-separated list of
	// [CanElicit] and [CanSample]. A call without it gets every request of its
	// body refused at once.
	InteractionsHeader = "Toolexec-Interactions"
	// DeadlineHeader names the header of an interaction request that says
	// when the executor stops waiting for its answer (RFC 3339).
	DeadlineHeader = "Toolexec-Deadline"

	// CanElicit declares that the caller can answer elicitation/create.
	CanElicit = "elicitation"
	// CanSample declares that the caller can answer sampling/createMessage.
	CanSample = "sampling"

	// MethodElicit and MethodSample are the MCP methods relayed.
	MethodElicit = "elicitation/create"
	MethodSample = "sampling/createMessage"
)

// InteractSubject returns "toolexec.interact.<tenant>.<tool>.<call_id>",
// where the executor running that call publishes what it asks the caller.
// Like [CallSubject], it does not check its arguments.
func InteractSubject(tenant, tool, callID string) string {
	return InteractPrefix + tenant + "." + tool + "." + callID
}

// RespondSubject returns "toolexec.respond.<tenant>.<tool>.<call_id>", where
// the caller of that call takes and answers what it was asked (a request; the
// executor replies). Like [CallSubject], it does not check its arguments.
func RespondSubject(tenant, tool, callID string) string {
	return RespondPrefix + tenant + "." + tool + "." + callID
}

// Capability returns what a caller must declare to be asked method: CanElicit
// or CanSample, and "" for any other method (never relayed).
func Capability(method string) string {
	switch method {
	case MethodElicit:
		return CanElicit
	case MethodSample:
		return CanSample
	}
	return ""
}

// Interactions reads the capabilities a call's headers declare
// ([InteractionsHeader]), sorted, unknown ones left out.
func Interactions(h nats.Header) []string {
	v, ok := Get(h, InteractionsHeader)
	if !ok {
		return nil
	}
	var out []string
	for _, c := range strings.Split(v, ",") {
		c = strings.TrimSpace(c)
		if (c == CanElicit || c == CanSample) && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// Ask is a request the executor sends a call's caller: a JSON-RPC 2.0
// request whose id names the interaction (an id of the executor's own, not
// the upstream's).
type Ask struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      string          `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Respond is what a caller sends on [RespondSubject]: a take (Take true: the
// caller will answer, and no one else may) or an answer, a JSON-RPC 2.0
// response (Result or Error), to the interaction named by ID.
type Respond struct {
	JSONRPC string          `json:"jsonrpc,omitempty"`
	ID      string          `json:"id"`
	Take    bool            `json:"take,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *RPCError       `json:"error,omitempty"`
}

// RPCError is a JSON-RPC 2.0 error object.
type RPCError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// RespondReply is the executor's reply to a [Respond]: empty when it was
// accepted, else an error.
type RespondReply struct {
	Error *RespondError `json:"error,omitempty"`
}

// RespondError says why a [Respond] was refused: Code is RespondTaken (another
// caller took the interaction) or RespondBadRequest.
type RespondError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// The codes of a [RespondError].
const (
	RespondTaken      = "taken"
	RespondBadRequest = "bad_request"
)

// Error returns the code and the message.
func (e *RespondError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// CheckRespond checks a decoded [Respond]: an id, and exactly one of take,
// result and error.
func CheckRespond(r Respond) error {
	n := 0
	if r.Take {
		n++
	}
	if r.Result != nil {
		n++
	}
	if r.Error != nil {
		n++
	}
	switch {
	case r.ID == "":
		return fmt.Errorf("%w: a response names no interaction id", ErrBadMessage)
	case n != 1:
		return fmt.Errorf("%w: a response must hold exactly one of take, result and error", ErrBadMessage)
	}
	return nil
}
