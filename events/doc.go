// Package events is the vocabulary every layer of toolexec speaks: the [Call] a
// tool call is, the [Answer] that answers it and the rules that say which
// fields each answer [Kind] uses ([Answer.Check]), the [Reason]s an outcome is
// indeterminate, the [Code]s of rejections and failures, the [Action]s of an
// operator's resolution, and the tokens (tenant, tool, run id, call id) that
// name them.
//
// It holds values and pure functions only, and knows no wire: how calls and
// answers travel as CloudEvents on NATS subjects, and how their data is held to
// the JSON Schemas of package schemas, is package bus/wire's.
//
// # Tokens
//
// Every token (tenant, tool, run id, call id) matches [A-Za-z0-9_-]{1,128}
// ([ValidToken]): a single NATS subject token, neither a wildcard nor a
// separator. Anything else is refused before it reaches a subject.
//
// # Errors
//
// Bad input from a caller is reported as a [*RejectedError] whose [Code] names the
// problem; the bus answers it with a rejected event. A token that is not well
// formed is a [*TokenError]. Misuse by this program (an answer missing a field
// its kind needs) is reported as [ErrInvalidAnswer], to fail loudly in tests.
package events
