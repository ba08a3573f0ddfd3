package admin

import (
	"time"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
)

// Admin subjects. Requests and replies are JSON, each request exactly its type's
// members. Deployments let only the admin account reach them (an export to that
// account alone), and Config.Account makes the executors check it.
const (
	// ForgetSubject takes a ForgetRequest: erase a tenant.
	ForgetSubject = "toolexec.admin.forget"
	// InspectSubject takes an InspectRequest: read one key's record.
	InspectSubject = "toolexec.admin.inspect"
	// ResolveSubject takes a ResolveRequest: settle an indeterminate key.
	ResolveSubject = "toolexec.admin.resolve"
	// ListSubject takes a ListRequest: a tenant's records in one state
	// (indeterminate unless asked otherwise).
	ListSubject = "toolexec.admin.list"
	// Subjects matches every admin subject, wire.AdminHistorySubject too (the
	// operators' history, which the executors' bus.HistoryService answers, with
	// the same account check). Responders subscribe to their own subjects, never
	// to this wildcard, so that each request reaches the service it names.
	Subjects = "toolexec.admin.>"
)

// Defaults of requests.
const (
	// DefaultOperator names the operator of a resolution that names none.
	DefaultOperator = "admin"
	// DefaultListLimit is how many records a ListRequest without a Limit gets.
	DefaultListLimit = 100
	// MaxListLimit is the most records one ListRequest gets.
	MaxListLimit = 1000
)

// ForgetRequest asks to erase every record of Tenant, and its calls and events
// from both streams.
type ForgetRequest struct {
	Tenant string `json:"tenant"`
}

// ForgetResponse says how many records were erased (-1 when the store cannot
// tell).
type ForgetResponse struct {
	Tenant  string `json:"tenant"`
	Records int64  `json:"records"`
	Error   *Error `json:"error,omitempty"`
}

// InspectRequest asks for the record of one key.
type InspectRequest struct {
	Tenant string `json:"tenant"`
	Key    string `json:"key"`
}

// InspectResponse carries the record, or the error.
type InspectResponse struct {
	Record *RecordInfo `json:"record,omitempty"`
	Error  *Error      `json:"error,omitempty"`
}

// ResolveRequest asks to settle an indeterminate key: complete it with Outcome,
// or release it so that the next call runs the tool.
type ResolveRequest struct {
	Tenant string        `json:"tenant"`
	Key    string        `json:"key"`
	Action events.Action `json:"action"`
	// Outcome is recorded with ActionComplete; it must be empty with
	// ActionRelease.
	Outcome string `json:"outcome,omitempty"`
	// Operator names who decided, for the audit event; default DefaultOperator.
	Operator string `json:"operator,omitempty"`
}

// ResolveResponse carries the record as it now is (for a release, as it was),
// or the error. With CodeAuditFailed the resolution was applied and Record is
// set, but its resolved event was not stored.
type ResolveResponse struct {
	Record *RecordInfo `json:"record,omitempty"`
	Error  *Error      `json:"error,omitempty"`
}

// ListRequest asks for the live records of Tenant in State, oldest first by
// their last write.
type ListRequest struct {
	Tenant string `json:"tenant"`
	// State is the state listed; default kvstore.StateIndeterminate, the records
	// that wait for an operator.
	State kvstore.State `json:"state,omitempty"`
	// Limit bounds the records returned; default DefaultListLimit, at most
	// MaxListLimit.
	Limit int `json:"limit,omitempty"`
}

// ListResponse carries the records, oldest first, or the error. More says that
// the tenant has more records in the state than were returned (beyond Limit,
// or beyond what one reply can carry). Now is the executor's clock when it
// listed, so that a record's age (Now - UpdatedAt) is judged by one clock.
type ListResponse struct {
	Records []*RecordInfo `json:"records"`
	More    bool          `json:"more,omitempty"`
	Now     time.Time     `json:"now"`
	Error   *Error        `json:"error,omitempty"`
}

// RecordInfo is an idempotency record as admin replies show it: kvstore.Record
// in JSON, never the call's arguments (no record holds them).
type RecordInfo struct {
	Tenant       string        `json:"tenant"`
	Key          string        `json:"key"`
	State        kvstore.State `json:"state"`
	Outcome      string        `json:"outcome,omitempty"`
	Reason       string        `json:"reason,omitempty"`
	BodyEntered  bool          `json:"body_entered,omitempty"`
	CheckDigest  string        `json:"check_digest,omitempty"`
	Tool         string        `json:"tool,omitempty"`
	RunID        string        `json:"run_id,omitempty"`
	CallID       string        `json:"call_id,omitempty"`
	Holder       string        `json:"holder,omitempty"`
	Lease        string        `json:"lease,omitempty"`
	LeaseUntil   *time.Time    `json:"lease_until,omitempty"`
	LeaseExpired bool          `json:"lease_expired,omitempty"`
	Revision     uint64        `json:"revision"`
	CreatedAt    *time.Time    `json:"created_at,omitempty"`
	UpdatedAt    *time.Time    `json:"updated_at,omitempty"`
	ExpiresAt    *time.Time    `json:"expires_at,omitempty"`
}

// NewRecordInfo converts a store's record.
func NewRecordInfo(r kvstore.Record) *RecordInfo {
	t := func(v time.Time) *time.Time {
		if v.IsZero() {
			return nil
		}
		return &v
	}
	ri := &RecordInfo{
		Tenant: r.Tenant, Key: r.Key, State: r.State, Outcome: r.Outcome, Reason: r.Reason,
		BodyEntered: r.BodyEntered, CheckDigest: r.CheckDigest, Tool: r.Tool, RunID: r.RunID, CallID: r.CallID,
		Holder: r.Holder, LeaseUntil: t(r.LeaseUntil), LeaseExpired: r.LeaseExpired, Revision: r.Revision,
		CreatedAt: t(r.CreatedAt), UpdatedAt: t(r.UpdatedAt), ExpiresAt: t(r.ExpiresAt),
	}
	if r.Lease > 0 {
		ri.Lease = r.Lease.String()
	}
	return ri
}
