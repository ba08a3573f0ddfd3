package wire

import (
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/events"
)

// Streams and subjects.
const (
	// CallStream is the JetStream work-queue stream that holds calls: one
	// stored call at most per call subject, so that a call id is its tenant's
	// alone (see [CallSubject]).
	CallStream = "TOOLEXEC_CALLS_V2"
	// LegacyCallStream is the calls stream of wire version 1, whose subjects
	// named no call id and which dropped a repeated Nats-Msg-Id whatever the
	// tenant. The executors still take the calls it holds (its subjects
	// narrowed to [LegacyCallSubjects]) until an operator deletes it; they
	// never create it.
	LegacyCallStream = "TOOLEXEC_CALLS"
	// EventStream is the JetStream limits stream that holds answers and audit events.
	EventStream = "TOOLEXEC_EVENTS"

	// CallPrefix starts every call subject.
	CallPrefix = "toolexec.call."
	// EventPrefix starts every answer and audit subject.
	EventPrefix = "toolexec.event."

	// CallSubjects is the subject filter of [CallStream]: every call,
	// toolexec.call.<tenant>.<tool>.<call_id>.
	CallSubjects = CallPrefix + "*.*.*"
	// LegacyCallSubjects is the subject filter [LegacyCallStream] keeps:
	// toolexec.call.<tenant>.<tool>, the calls of wire version 1.
	LegacyCallSubjects = CallPrefix + "*.*"
	// EventSubjects is the subject filter of [EventStream]: every answer and audit
	// event.
	EventSubjects = EventPrefix + ">"

	// HistoryPrefix starts the subject of a tenant's history requests
	// ([HistorySubject]).
	HistoryPrefix = "toolexec.history."
	// HistorySubjects matches every tenant's history subject: what the executors
	// serve.
	HistorySubjects = HistoryPrefix + "*"
	// AdminHistorySubject is where the operators ask the executors for any
	// tenant's stored events (package bus answers it, to the admin account
	// only). It lies within the admin subjects, toolexec.admin.>, which a
	// deployment exports to the admin account alone.
	AdminHistorySubject = "toolexec.admin.history"

	// CatalogPrefix starts the subject where a tenant asks the executors which
	// tools they serve ([CatalogSubject]): what an MCP gateway lists.
	CatalogPrefix = "toolexec.tools."
	// CatalogSubjects matches every tenant's catalog subject: what the
	// executors serve.
	CatalogSubjects = CatalogPrefix + "*"

	// BodyPrefix starts the subject where an executor asks a worker to run a
	// tool's body ([BodySubject]; docs/PROTOCOL.md §12).
	BodyPrefix = "toolexec.body."
	// BodySubjects matches every body subject: what a workers' account
	// exports to the executors.
	BodySubjects = BodyPrefix + ">"
	// BodyQueue is the queue group of every worker's endpoints, so that each
	// request reaches one worker of the tool.
	BodyQueue = "toolexec.body"
	// WorkerService is the name of the service (the NATS service API) a worker
	// runs, one endpoint per tool it serves.
	WorkerService = "toolexec-worker"
	// WorkerInfoSubject is where an executor asks every worker for its
	// endpoints and gathers the replies: the service API's INFO request for
	// [WorkerService].
	WorkerInfoSubject = "$SRV.INFO." + WorkerService
	// DeclarationMetadata is the endpoint metadata key whose value is the
	// tool's declaration, the JSON of a catalog declaration (§8).
	DeclarationMetadata = "toolexec.declaration"
)

// RepeatHeader names the header that marks a call message which may repeat a
// call published before: a copy sent again after its PubAck did not come, or a
// call whose id the caller chose rather than drew. An executor that takes a
// call so marked first looks for the answer stored under its tenant, tool and
// call id, whatever the run, and when it finds one it acknowledges the call
// without running or answering it again: [CallStream] refuses a second copy
// only while the first is stored, and a call leaves it once answered. The
// value is "true".
const RepeatHeader = "Toolexec-Repeat"

// IsRepeat reports whether h marks its call as a repeat (see [RepeatHeader]),
// the header's name matched without regard to case.
func IsRepeat(h nats.Header) bool {
	v, ok := Get(h, RepeatHeader)
	return ok && strings.EqualFold(v, "true")
}

// Placeholder stands in, in an event subject, for a tool, run id or call id that a
// rejected call did not supply in a usable form (absent or not a valid token), and
// for the run and call of a resolution whose record does not name them. It is a
// valid token, so such subjects still have the usual shape.
const Placeholder = "_"

// CallSubject returns "toolexec.call.<tenant>.<tool>.<call_id>", where the
// call callID of tool is published. [CallStream] stores one call at most under
// each such subject, so a call id that one tenant uses cannot touch another
// tenant's calls. It does not check its arguments: check them with
// [events.CheckToken] first, since anything but valid tokens yields something
// that is not a valid subject.
func CallSubject(tenant, tool, callID string) string {
	var b strings.Builder
	b.Grow(len(CallPrefix) + len(tenant) + len(tool) + len(callID) + 2)
	b.WriteString(CallPrefix)
	b.WriteString(tenant)
	b.WriteByte('.')
	b.WriteString(tool)
	b.WriteByte('.')
	b.WriteString(callID)
	return b.String()
}

// TenantCallSubjects returns "toolexec.call.<tenant>.>": every call of tenant, the
// subjects a tenant's credentials may publish to.
func TenantCallSubjects(tenant string) string { return CallPrefix + tenant + ".>" }

// TenantEventSubjects returns "toolexec.event.<tenant>.>": every answer to tenant's
// calls, the subjects a tenant's credentials may subscribe to.
func TenantEventSubjects(tenant string) string { return EventPrefix + tenant + ".>" }

// HistorySubject returns "toolexec.history.<tenant>", where a client asks the
// executors for tenant's stored events (package bus answers it). Like
// [CallSubject], it does not check its argument.
func HistorySubject(tenant string) string { return HistoryPrefix + tenant }

// CatalogSubject returns "toolexec.tools.<tenant>", where a client asks the
// executors for the declarations of the tools they serve (package bus answers
// it). Like [CallSubject], it does not check its argument.
func CatalogSubject(tenant string) string { return CatalogPrefix + tenant }

// BodySubject returns "toolexec.body.<tool>", where an executor asks the
// workers serving tool to run its body. Like [CallSubject], it does not check
// its argument.
func BodySubject(tool string) string { return BodyPrefix + tool }

// KindSubjects returns "toolexec.event.*.<kind>.>": every event of kind across
// tenants, what an auditor subscribes to.
func KindSubjects(kind events.Kind) string { return EventPrefix + "*." + string(kind) + ".>" }

// EventSubject returns "toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>",
// where an event of kind about one call is published. Like [CallSubject], it does
// not check its arguments.
func EventSubject(tenant string, kind events.Kind, tool, runID, callID string) string {
	var b strings.Builder
	b.Grow(len(EventPrefix) + len(tenant) + len(kind) + len(tool) + len(runID) + len(callID) + 4)
	b.WriteString(EventPrefix)
	b.WriteString(tenant)
	b.WriteByte('.')
	b.WriteString(string(kind))
	b.WriteByte('.')
	b.WriteString(tool)
	b.WriteByte('.')
	b.WriteString(runID)
	b.WriteByte('.')
	b.WriteString(callID)
	return b.String()
}

// AnswerFilter returns "toolexec.event.<tenant>.*.<tool>.<run_id>.<call_id>": the
// answer to one call, whatever its kind. A caller subscribes to it before
// publishing the call. Like [CallSubject], it does not check its arguments.
func AnswerFilter(tenant, tool, runID, callID string) string {
	return EventSubject(tenant, "*", tool, runID, callID)
}

// CallSubjectParts is what a call subject says: whose call, of which tool,
// and, from wire version 2 on, which call.
type CallSubjectParts struct {
	Tenant string
	Tool   string
	// CallID is empty for a subject of wire version 1,
	// toolexec.call.<tenant>.<tool>, whose call id is in the event alone.
	CallID string
}

// ParseCallSubject splits "toolexec.call.<tenant>.<tool>.<call_id>" (or, of
// wire version 1, "toolexec.call.<tenant>.<tool>") into its parts. Anything
// else (another prefix, more or fewer tokens, a token that is not valid) is an
// error matching [ErrBadSubject]; when a token is at fault the error also wraps
// its [*events.TokenError].
func ParseCallSubject(subject string) (CallSubjectParts, error) {
	rest, ok := strings.CutPrefix(subject, CallPrefix)
	if !ok {
		return CallSubjectParts{}, fmt.Errorf("%w: %s does not start with %q", ErrBadSubject, quote(subject), CallPrefix)
	}
	parts := strings.Split(rest, ".")
	if len(parts) != 2 && len(parts) != 3 {
		return CallSubjectParts{}, fmt.Errorf("%w: %s is not %s<tenant>.<tool>.<call_id>", ErrBadSubject, quote(subject), CallPrefix)
	}
	a := CallSubjectParts{Tenant: parts[0], Tool: parts[1]}
	names := []string{"tenant", "tool", "callid"}
	if len(parts) == 3 {
		a.CallID = parts[2]
	}
	for i, v := range parts {
		if err := events.CheckToken(names[i], v); err != nil {
			return CallSubjectParts{}, fmt.Errorf("%w: %w", ErrBadSubject, err)
		}
	}
	return a, nil
}

// EventAddress is what an event subject says: whose event, of which kind, about
// which call.
type EventAddress struct {
	Tenant string
	Kind   events.Kind
	Tool   string
	RunID  string
	CallID string
}

// Subject returns the event subject for a, as [EventSubject] builds it.
func (a EventAddress) Subject() string {
	return EventSubject(a.Tenant, a.Kind, a.Tool, a.RunID, a.CallID)
}

// ParseEventSubject splits "toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>"
// into its parts. Anything else, including an unknown kind or a token that is not
// valid, is an error matching [ErrBadSubject]. [Placeholder] tokens are accepted as
// they are.
func ParseEventSubject(subject string) (EventAddress, error) {
	rest, ok := strings.CutPrefix(subject, EventPrefix)
	if !ok {
		return EventAddress{}, fmt.Errorf("%w: %s does not start with %q", ErrBadSubject, quote(subject), EventPrefix)
	}
	var parts [5]string
	for i := range parts {
		if i == len(parts)-1 {
			if strings.IndexByte(rest, '.') >= 0 {
				return EventAddress{}, fmt.Errorf("%w: %s has too many tokens", ErrBadSubject, quote(subject))
			}
			parts[i] = rest
			break
		}
		var found bool
		parts[i], rest, found = strings.Cut(rest, ".")
		if !found {
			return EventAddress{}, fmt.Errorf("%w: %s has too few tokens", ErrBadSubject, quote(subject))
		}
	}
	kind, err := events.ParseKind(parts[1])
	if err != nil {
		return EventAddress{}, fmt.Errorf("%w: %w", ErrBadSubject, err)
	}
	a := EventAddress{Tenant: parts[0], Kind: kind, Tool: parts[2], RunID: parts[3], CallID: parts[4]}
	for _, f := range []struct{ name, v string }{
		{"tenant", a.Tenant}, {"tool", a.Tool}, {"runid", a.RunID}, {"callid", a.CallID},
	} {
		if err := events.CheckToken(f.name, f.v); err != nil {
			return EventAddress{}, fmt.Errorf("%w: %w", ErrBadSubject, err)
		}
	}
	return a, nil
}
