package events

import "fmt"

// Kind is the kind of an event toolexec publishes: one of the five answers to a
// call, or the audit event of an operator's resolution. It is a subject token and
// the last part of the event's CloudEvents type.
type Kind string

// The answer kinds (exactly one per call) and the audit kind.
const (
	// KindCompleted: the tool's body ran and returned; the outcome is recorded.
	KindCompleted Kind = "completed"
	// KindDeduplicated: a recorded outcome answered the call; the body was not
	// entered.
	KindDeduplicated Kind = "deduplicated"
	// KindIndeterminate: nobody can say whether the effect landed (see [Reason]).
	KindIndeterminate Kind = "indeterminate"
	// KindFailed: the call failed definitely (see the failure [Code]s).
	KindFailed Kind = "failed"
	// KindRejected: the call was refused before anything happened (see the
	// rejection [Code]s).
	KindRejected Kind = "rejected"
	// KindResolved is not an answer: it records an operator resolving an
	// indeterminate key.
	KindResolved Kind = "resolved"
)

// AnswerKinds returns the five kinds that answer a call, in a fixed order.
func AnswerKinds() []Kind {
	return []Kind{KindCompleted, KindDeduplicated, KindIndeterminate, KindFailed, KindRejected}
}

// Kinds returns every kind: the answer kinds, then [KindResolved].
func Kinds() []Kind { return append(AnswerKinds(), KindResolved) }

// ParseKind returns the kind named s, or an error matching [ErrUnknownKind].
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if !k.Valid() {
		return "", fmt.Errorf("%w: %s", ErrUnknownKind, quote(s))
	}
	return k, nil
}

// Valid reports whether k is one of the kinds above.
func (k Kind) Valid() bool {
	switch k {
	case KindCompleted, KindDeduplicated, KindIndeterminate, KindFailed, KindRejected, KindResolved:
		return true
	}
	return false
}

// IsAnswer reports whether k answers a call (every kind but [KindResolved]).
func (k Kind) IsAnswer() bool { return k.Valid() && k != KindResolved }

// String returns the kind's name.
func (k Kind) String() string { return string(k) }

// Reason says why an outcome is indeterminate.
type Reason string

// The reasons an answer can be indeterminate.
const (
	// ReasonBodyFailed: an effectful tool's body failed after it was entered.
	ReasonBodyFailed Reason = "body_failed"
	// ReasonHolderLost: the worker holding the claim stopped renewing its lease
	// before answering.
	ReasonHolderLost Reason = "holder_lost"
	// ReasonStoreUnavailable: the store could not be reached, so an effectful tool
	// was not run.
	ReasonStoreUnavailable Reason = "store_unavailable"
	// ReasonKeyUnderivable: a key argument was missing, so an effectful tool was
	// not run.
	ReasonKeyUnderivable Reason = "key_underivable"
	// ReasonTimeout: an effectful tool's body ran past its timeout.
	ReasonTimeout Reason = "timeout"
)

// Reasons returns every reason, in a fixed order.
func Reasons() []Reason {
	return []Reason{ReasonBodyFailed, ReasonHolderLost, ReasonStoreUnavailable, ReasonKeyUnderivable, ReasonTimeout}
}

// Valid reports whether r is one of the reasons above.
func (r Reason) Valid() bool {
	switch r {
	case ReasonBodyFailed, ReasonHolderLost, ReasonStoreUnavailable, ReasonKeyUnderivable, ReasonTimeout:
		return true
	}
	return false
}

// Code names a problem for programs: why a call was rejected, or why it failed.
type Code string

// Rejection codes: the call was refused before anything happened.
const (
	// CodeInvalidJSON: the message is not JSON where JSON was required.
	CodeInvalidJSON Code = "invalid_json"
	// CodeNotCloudEvent: the message is JSON (or has headers) but not a CloudEvent.
	CodeNotCloudEvent Code = "not_cloudevent"
	// CodeBadSpecVersion: specversion is not "1.0".
	CodeBadSpecVersion Code = "bad_specversion"
	// CodeBadType: the event's type is not a call's (io.tesserix.toolexec.call).
	CodeBadType Code = "bad_type"
	// CodeMissingAttribute: a required attribute or extension is absent or empty.
	CodeMissingAttribute Code = "missing_attribute"
	// CodeBadToken: a tenant, tool, run id or call id is not a valid token.
	CodeBadToken Code = "bad_token"
	// CodeTenantMismatch: the tenant extension disagrees with the subject's tenant.
	CodeTenantMismatch Code = "tenant_mismatch"
	// CodeToolMismatch: the subject attribute disagrees with the NATS subject's tool.
	CodeToolMismatch Code = "tool_mismatch"
	// CodeCallIDMismatch: the event's id disagrees with the call id of the NATS
	// subject.
	CodeCallIDMismatch Code = "call_id_mismatch"
	// CodeUnknownTool: no tool of that name is registered.
	CodeUnknownTool Code = "unknown_tool"
	// CodeToolConflict: what declares the tool disagrees (two workers declaring
	// it differently, say), so it is not run until an operator settles it.
	CodeToolConflict Code = "tool_conflict"
	// CodeUpstreamUnavailable: the server the tool's body calls (an MCP
	// upstream) cannot be reached now. Nothing ran: the same call may be sent
	// again once it is back.
	CodeUpstreamUnavailable Code = "upstream_unavailable"
	// CodeSchemaViolation: the data, or the arguments, do not match their schema.
	CodeSchemaViolation Code = "schema_violation"
	// CodeTooLarge: the message exceeds the size the executor accepts.
	CodeTooLarge Code = "too_large"
	// CodeArgumentsNotObject: the arguments are not a JSON object.
	CodeArgumentsNotObject Code = "arguments_not_object"
	// CodeDuplicateMember: an object has the same member name twice.
	CodeDuplicateMember Code = "duplicate_member"
	// CodeNFCCollision: two member names of one object are equal after NFC.
	CodeNFCCollision Code = "nfc_collision"
	// CodeNumberOutOfRange: a number does not fit a finite double.
	CodeNumberOutOfRange Code = "number_out_of_range"
	// CodeInvalidUnicode: invalid UTF-8 or a lone surrogate escape.
	CodeInvalidUnicode Code = "invalid_unicode"
	// CodeTooDeep: the arguments nest deeper than the executor accepts.
	CodeTooDeep Code = "too_deep"
	// CodeTooManyValues: the arguments hold more members in one object, elements
	// in one array, or values in all than the executor accepts.
	CodeTooManyValues Code = "too_many_values"
	// CodeArgumentsMismatch: a duplicate of a recorded call changed one of the
	// tool's check arguments.
	CodeArgumentsMismatch Code = "arguments_mismatch"
	// CodeBadContentType: the data is not declared as JSON.
	CodeBadContentType Code = "bad_content_type"
	// CodeBadData: the data is absent or not JSON.
	CodeBadData Code = "bad_data"
)

// Failure codes: the call failed definitely.
const (
	// CodeToolError: the tool's body failed (after any retries it was allowed).
	CodeToolError Code = "tool_error"
	// CodeNoEffect: the tool reported that its effect did not land; the claim was
	// released.
	CodeNoEffect Code = "no_effect"
	// CodeTimeout: the tool's body ran past its timeout.
	CodeTimeout Code = "timeout"
	// CodeOutcomeTooLarge: the body returned an outcome larger than the executor
	// records and answers.
	CodeOutcomeTooLarge Code = "outcome_too_large"
)

// RejectionCodes returns every rejection code, in a fixed order.
func RejectionCodes() []Code {
	return []Code{
		CodeInvalidJSON, CodeNotCloudEvent, CodeBadSpecVersion, CodeBadType,
		CodeMissingAttribute, CodeBadToken, CodeTenantMismatch, CodeToolMismatch,
		CodeUnknownTool, CodeSchemaViolation, CodeTooLarge, CodeArgumentsNotObject,
		CodeDuplicateMember, CodeNFCCollision, CodeNumberOutOfRange, CodeInvalidUnicode,
		CodeTooDeep, CodeArgumentsMismatch, CodeBadContentType, CodeBadData,
		CodeTooManyValues, CodeCallIDMismatch, CodeToolConflict, CodeUpstreamUnavailable,
	}
}

// FailureCodes returns every failure code, in a fixed order.
func FailureCodes() []Code {
	return []Code{CodeToolError, CodeNoEffect, CodeTimeout, CodeOutcomeTooLarge}
}

// IsRejection reports whether c is a rejection code.
func (c Code) IsRejection() bool {
	switch c {
	case CodeInvalidJSON, CodeNotCloudEvent, CodeBadSpecVersion, CodeBadType,
		CodeMissingAttribute, CodeBadToken, CodeTenantMismatch, CodeToolMismatch,
		CodeUnknownTool, CodeSchemaViolation, CodeTooLarge, CodeArgumentsNotObject,
		CodeDuplicateMember, CodeNFCCollision, CodeNumberOutOfRange, CodeInvalidUnicode,
		CodeTooDeep, CodeArgumentsMismatch, CodeBadContentType, CodeBadData,
		CodeTooManyValues, CodeCallIDMismatch, CodeToolConflict, CodeUpstreamUnavailable:
		return true
	}
	return false
}

// IsFailure reports whether c is a failure code.
func (c Code) IsFailure() bool {
	switch c {
	case CodeToolError, CodeNoEffect, CodeTimeout, CodeOutcomeTooLarge:
		return true
	}
	return false
}

// Action is what an operator did to an indeterminate key.
type Action string

// The resolutions of an indeterminate key.
const (
	// ActionComplete records an outcome for the key.
	ActionComplete Action = "complete"
	// ActionRelease frees the key; the next call runs the tool.
	ActionRelease Action = "release"
)

// Valid reports whether a is [ActionComplete] or [ActionRelease].
func (a Action) Valid() bool { return a == ActionComplete || a == ActionRelease }
