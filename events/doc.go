// Package events is toolexec's wire vocabulary: the CloudEvents that carry calls and
// answers, the NATS subjects they travel on, the answer kinds, reasons and codes,
// and validation of every event's data against the JSON Schemas in package schemas.
//
// It holds values and pure functions only; it knows nothing of NATS connections.
// The bus turns NATS messages into [event.Event] values and hands them to
// [CallFromEvent]; the dispatcher builds an [Answer] and the bus publishes
// [Answer.Event] on [Answer.Subject] with [Answer.MsgID] as Nats-Msg-Id.
//
// # Subjects
//
//	toolexec.call.<tenant>.<tool>                                  calls ([CallSubject])
//	toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>       answers ([EventSubject])
//	toolexec.event.<tenant>.*.<tool>.<run_id>.<call_id>            one call's answer ([AnswerFilter])
//
// Every token (tenant, tool, run id, call id) matches [A-Za-z0-9_-]{1,128}
// ([ValidToken]); anything else is refused before it reaches a subject.
//
// # Errors
//
// Bad input from a caller is reported as a [*RejectError] whose [Code] names the
// problem; the bus answers it with a rejected event. Misuse by this program (an
// answer missing a field its kind needs, data that does not match its schema) is
// reported as [ErrInvalidAnswer] or [ErrInvalidData], to fail loudly in tests.
package events
