package natstool

import (
	"errors"
	"strings"
	"unicode/utf8"
)

// Errors returned by the body of a NATS tool.
var (
	// ErrNotSent is matched when the request was never sent: the connection
	// was not up, or refused the request before writing it. Such errors are
	// also wrapped with [tool.NoEffect].
	ErrNotSent = errors.New("natstool: request not sent")
	// ErrNoWorker is matched when the server answered at once that no
	// subscription took the request: no worker serves the tool's subject. Such
	// errors also match nats.ErrNoResponders and are wrapped with
	// [tool.NoEffect].
	ErrNoWorker = errors.New("natstool: no worker serves the tool")
	// ErrReplyTooLarge is matched when a reply's payload is longer than
	// [Endpoint.MaxReplyBytes].
	ErrReplyTooLarge = errors.New("natstool: reply too large")
)

// CodeNoEffect is the error code with which a worker says that the body made
// no effect (the downstream refused it, say): the claim is released and the
// call fails without effect, even for an Effectful tool.
const CodeNoEffect = "no_effect"

// maxDescription bounds how much of an error reply's description a BodyError
// keeps.
const maxDescription = 256

// BodyError is a worker's error reply: the body failed. The body wraps it with
// [tool.NoEffect] when its Code is [CodeNoEffect].
type BodyError struct {
	// Code is the reply's Nats-Service-Error-Code.
	Code string
	// Description is the start of its Nats-Service-Error (at most 256 bytes,
	// valid UTF-8).
	Description string
}

func (e *BodyError) Error() string {
	msg := "the worker answered error " + e.Code
	if d := strings.TrimSpace(e.Description); d != "" {
		msg += ": " + d
	}
	return msg
}

// newBodyError builds a BodyError keeping at most maxDescription bytes of the
// code and the description, each valid UTF-8 and cut between runes.
func newBodyError(code, description string) *BodyError {
	return &BodyError{Code: bound(code), Description: bound(description)}
}

// bound returns s with invalid UTF-8 replaced, cut to at most maxDescription
// bytes between two runes.
func bound(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxDescription {
		return s
	}
	n := maxDescription
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

var _ error = (*BodyError)(nil)
