package wire

import (
	"fmt"
	"strings"

	"github.com/tesserix/toolexec/events"
)

// Streams and subjects.
const (
	// CallStream is the JetStream work-queue stream that holds calls.
	CallStream = "TOOLEXEC_CALLS"
	// EventStream is the JetStream limits stream that holds answers and audit events.
	EventStream = "TOOLEXEC_EVENTS"

	// CallPrefix starts every call subject.
	CallPrefix = "toolexec.call."
	// EventPrefix starts every answer and audit subject.
	EventPrefix = "toolexec.event."

	// CallSubjects is the subject filter of [CallStream]: every call.
	CallSubjects = CallPrefix + ">"
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
)

// Placeholder stands in, in an event subject, for a tool, run id or call id that a
// rejected call did not supply in a usable form (absent or not a valid token), and
// for the run and call of a resolution whose record does not name them. It is a
// valid token, so such subjects still have the usual shape.
const Placeholder = "_"

// CallSubject returns "toolexec.call.<tenant>.<tool>", where calls for tool are
// published. It does not check its arguments: check them with [events.CheckToken] first,
// since anything but valid tokens yields something that is not a valid subject.
func CallSubject(tenant, tool string) string {
	return CallPrefix + tenant + "." + tool
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

// ParseCallSubject splits "toolexec.call.<tenant>.<tool>" into its tenant and tool.
// Anything else (another prefix, more or fewer tokens, a token that is not valid)
// is an error matching [ErrBadSubject]; when a token is at fault the error also
// wraps its [*events.TokenError].
func ParseCallSubject(subject string) (tenant, tool string, err error) {
	rest, ok := strings.CutPrefix(subject, CallPrefix)
	if !ok {
		return "", "", fmt.Errorf("%w: %s does not start with %q", ErrBadSubject, quote(subject), CallPrefix)
	}
	tenant, tool, ok = strings.Cut(rest, ".")
	if !ok || strings.IndexByte(tool, '.') >= 0 {
		return "", "", fmt.Errorf("%w: %s is not %s<tenant>.<tool>", ErrBadSubject, quote(subject), CallPrefix)
	}
	if err := events.CheckToken("tenant", tenant); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrBadSubject, err)
	}
	if err := events.CheckToken("tool", tool); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrBadSubject, err)
	}
	return tenant, tool, nil
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
