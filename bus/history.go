package bus

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// Bounds of history requests and replies.
const (
	// MaxHistoryLimit is the most events one history reply carries, and
	// DefaultHistoryLimit how many a request without a Limit gets.
	MaxHistoryLimit     = 256
	DefaultHistoryLimit = MaxHistoryLimit
	// MaxHistoryRequestBytes bounds a history request's JSON.
	MaxHistoryRequestBytes = 4096
)

// Codes of a [HistoryError].
const (
	// HistoryBadRequest: the request is not what the service reads (not JSON, an
	// unknown member, trailing data, more than MaxHistoryRequestBytes, a negative
	// limit, two starts, a filter that is not a well-formed subject, a tenant
	// token that is not valid).
	HistoryBadRequest = "bad_request"
	// HistoryForbidden: the filter reaches outside the tenant's own events,
	// toolexec.event.<tenant>.> (outside toolexec.event.> on
	// toolexec.admin.history), or a request on toolexec.admin.history did not
	// come from the admin account (see HistoryConfig.AdminAccount).
	HistoryForbidden = "forbidden"
	// HistoryUnavailable: the events stream could not be read; asking again
	// later may work.
	HistoryUnavailable = "unavailable"
)

// HistoryRequest asks the executors, on toolexec.history.<tenant>
// ([wire.HistorySubject]), for a page of the tenant's events stored in
// TOOLEXEC_EVENTS; or, on toolexec.admin.history
// ([wire.AdminHistorySubject]), the operators' subject, for a page of any
// tenant's. It travels as JSON and is read strictly: an unknown member, a
// member given twice or anything after the object is refused.
//
// Where the page starts: after stream sequence AfterSeq, or at the first event
// stored at or after Since, or (neither set) at the first event stored. At most
// one of the two may be set.
type HistoryRequest struct {
	// Filter selects the events: a subject filter within
	// toolexec.event.<tenant>. (on toolexec.admin.history, within
	// toolexec.event., any tenant or a wildcard in the tenant's place), whose
	// wildcards stand as whole tokens. Empty means every event of the tenant
	// (of every tenant, on toolexec.admin.history).
	Filter string `json:"filter,omitzero"`
	// AfterSeq starts the page after this stream sequence: the Seq of the last
	// event of the page before, to read on.
	AfterSeq uint64 `json:"after_seq,omitzero"`
	// Since starts the page at the first event stored at or after this time.
	Since time.Time `json:"since,omitzero"`
	// Limit bounds the events of the page: default DefaultHistoryLimit, and at
	// most MaxHistoryLimit (a larger limit gets MaxHistoryLimit). A page also
	// stops short of the largest message the executor's connection may send.
	Limit int `json:"limit,omitzero"`
}

// HistoryResponse is a page of events, oldest first, or the error.
type HistoryResponse struct {
	Events []HistoryEvent `json:"events"`
	// More says that the filter matches events after the last one of the page:
	// ask again with AfterSeq set to its Seq.
	More bool `json:"more"`
	// LastSeq is the stream's last sequence when the page was read (whatever
	// the filter). Events stored later have larger sequences.
	LastSeq uint64        `json:"last_seq"`
	Error   *HistoryError `json:"error,omitzero"`
}

// HistoryEvent is one stored event as TOOLEXEC_EVENTS holds it: an answer or
// audit event in either mode (in binary mode its CloudEvents attributes are the
// ce- headers).
type HistoryEvent struct {
	// Seq is the event's stream sequence.
	Seq     uint64    `json:"seq"`
	Subject string    `json:"subject"`
	Time    time.Time `json:"time"`
	// Header and Data are the message's headers and payload.
	Header nats.Header `json:"header,omitzero"`
	Data   []byte      `json:"data,omitzero"`
	// Omitted says that the event alone is larger than a reply may be: Header
	// and Data were left out, and the event can only be read with JetStream.
	Omitted bool `json:"omitted,omitzero"`
}

// HistoryError is a history request's failure as it travels in a reply. A
// toolexec.Client returns it as it came.
type HistoryError struct {
	// Code is HistoryBadRequest, HistoryForbidden or HistoryUnavailable.
	Code string `json:"code"`
	// Message says what went wrong, for people.
	Message string `json:"message"`
}

// Error returns the message with its code.
func (e *HistoryError) Error() string {
	return fmt.Sprintf("bus: history request: %s: %s", e.Code, e.Message)
}

func historyError(code, format string, args ...any) *HistoryError {
	return &HistoryError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// parseHistoryRequest reads a request strictly: one JSON object of at most
// MaxHistoryRequestBytes, no unknown or repeated member, nothing after it, at
// most one start, no negative limit.
func parseHistoryRequest(data []byte) (HistoryRequest, *HistoryError) {
	var req HistoryRequest
	if len(data) > MaxHistoryRequestBytes {
		return req, historyError(HistoryBadRequest, "the request is %d bytes, more than %d", len(data), MaxHistoryRequestBytes)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return req, historyError(HistoryBadRequest, "the request is not a JSON object")
	}
	if err := json.Unmarshal(data, &req, json.RejectUnknownMembers(true)); err != nil {
		return HistoryRequest{}, historyError(HistoryBadRequest, "the request is not the JSON expected: %v", err)
	}
	// Both starts given, whatever their values, are refused: omitzero would
	// take after_seq 0 for "not given".
	var starts struct {
		AfterSeq *jsontext.Value `json:"after_seq"`
		Since    *jsontext.Value `json:"since"`
	}
	if err := json.Unmarshal(data, &starts); err == nil && starts.AfterSeq != nil && starts.Since != nil {
		return HistoryRequest{}, historyError(HistoryBadRequest, "after_seq and since both given: give one start")
	}
	if req.Limit < 0 {
		return HistoryRequest{}, historyError(HistoryBadRequest, "limit %d is negative", req.Limit)
	}
	if req.Limit == 0 || req.Limit > MaxHistoryLimit {
		req.Limit = MaxHistoryLimit
	}
	return req, nil
}

// HistoryFilter returns the filter a history request for tenant's events
// reads: filter itself, or every event of the tenant, toolexec.event.<tenant>.>,
// when filter is empty. With tenant "" the scope is every tenant's events, as
// on the operators' toolexec.admin.history. It is the rule the
// [HistoryService] applies to [HistoryRequest.Filter], and clients check
// their filters by it before they ask. It returns a *[HistoryError]:
// HistoryBadRequest for a filter that is not a well-formed subject filter or
// cannot match an event subject, HistoryForbidden for one outside the scope.
func HistoryFilter(tenant, filter string) (string, error) {
	f, herr := scopeFilter(tenant, filter)
	if herr != nil {
		return "", herr
	}
	return f, nil
}

// eventSubjectTokens is how many tokens an event subject has:
// toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>.
const eventSubjectTokens = 7

// scopeFilter returns the filter a history request reads: filter itself, or
// every event of its scope when filter is empty. The scope is tenant's events,
// toolexec.event.<tenant>.>, or every tenant's, toolexec.event.>, when tenant
// is "" (the operators', on toolexec.admin.history). A filter that is not a
// well-formed subject (an empty token, a wildcard inside a token, '>' before
// the end, a literal token that no event subject holds, more tokens than an
// event subject) is a bad request; one outside the scope (a wildcard or
// another name in a tenant's place, another prefix) is forbidden.
func scopeFilter(tenant, filter string) (string, *HistoryError) {
	if filter == "" {
		if tenant == "" {
			return wire.EventSubjects, nil
		}
		return wire.TenantEventSubjects(tenant), nil
	}
	if fault := filterFault(filter); fault != "" {
		return "", historyError(HistoryBadRequest, "filter %q %s", filter, fault)
	}
	tokens := strings.Split(filter, ".")
	if len(tokens) < 3 || tokens[0] != "toolexec" || tokens[1] != "event" || (tenant != "" && tokens[2] != tenant) {
		scope := wire.EventPrefix
		if tenant != "" {
			scope += tenant + "."
		}
		return "", historyError(HistoryForbidden, "filter %q is not within %s", filter, scope)
	}
	if (len(tokens) == 3 && tokens[2] != ">") || len(tokens) > eventSubjectTokens {
		return "", historyError(HistoryBadRequest, "filter %q cannot match an event subject (%d tokens)", filter, eventSubjectTokens)
	}
	for _, tok := range tokens[2:] {
		if tok != "*" && tok != ">" && !events.ValidToken(tok) {
			return "", historyError(HistoryBadRequest, "filter %q has a token no event subject holds: %q", filter, tok)
		}
	}
	return filter, nil
}

// filterFault returns what makes filter not a well-formed subject filter (an
// empty token, white space, a wildcard inside a token, '>' before the end), or
// "" when it is one.
func filterFault(filter string) string {
	tokens := strings.Split(filter, ".")
	for i, tok := range tokens {
		switch {
		case tok == "":
			return "has an empty token"
		case strings.ContainsAny(tok, " \t\r\n"):
			return "holds white space"
		case tok != "*" && tok != ">" && strings.ContainsAny(tok, "*>"):
			return "has a wildcard inside a token"
		case tok == ">" && i != len(tokens)-1:
			return "has '>' before its last token"
		}
	}
	return ""
}
