package httptool

import (
	"errors"
	"fmt"
	"strings"
)

// Errors returned by the body of an HTTP tool.
var (
	// ErrNotSent is matched when the request never reached the downstream (DNS,
	// dial, TLS or the deadline failed first). Such errors are also wrapped with
	// [tool.NoEffect].
	ErrNotSent = errors.New("httptool: request not sent")
	// ErrResponseTooLarge is matched when a 2xx response body is longer than
	// [Endpoint.MaxResponseBytes].
	ErrResponseTooLarge = errors.New("httptool: response body too large")
)

// maxErrorBody bounds how much of a non-2xx response body a StatusError keeps.
const maxErrorBody = 256

// StatusError reports a response whose status is not 2xx. The body wraps it with
// [tool.NoEffect] when [RefusedStatus] says the downstream refused before acting.
type StatusError struct {
	// StatusCode is the response's status code, e.g. 409.
	StatusCode int
	// Status is the status line's text, e.g. "409 Conflict".
	Status string
	// Body is the start of the response body (at most 256 bytes, valid UTF-8),
	// kept for diagnosis.
	Body string
}

func (e *StatusError) Error() string {
	msg := "downstream answered " + e.Status
	if e.Status == "" {
		msg = fmt.Sprintf("downstream answered %d", e.StatusCode)
	}
	if b := strings.TrimSpace(e.Body); b != "" {
		msg += ": " + b
	}
	return msg
}

// newStatusError builds a StatusError keeping at most maxErrorBody bytes of the
// body, with invalid UTF-8 (a rune cut in two included) replaced.
func newStatusError(code int, status string, body []byte) *StatusError {
	if len(body) > maxErrorBody {
		body = body[:maxErrorBody]
	}
	return &StatusError{StatusCode: code, Status: status, Body: strings.ToValidUTF8(string(body), "\uFFFD")}
}

// RefusedStatus reports whether a response status says the downstream refused
// the request before acting on it, so that the effect did not land: the 4xx
// client errors that reject a request outright (400, 401, 402, 403, 404, 405, 409,
// 410, 411, 412, 413, 414, 415, 417, 421, 422, 423, 424, 425, 426, 428, 429, 431,
// 451) and the method-preserving redirects 307 and 308. It is false for 2xx, for
// 408 (see the package documentation), for 406 and 416 (about the response, not
// the request), for unregistered 4xx codes, and for every other 3xx and 5xx.
func RefusedStatus(code int) bool {
	switch code {
	case 307, 308,
		400, 401, 402, 403, 404, 405, 409, 410, 411, 412, 413, 414, 415, 417,
		421, 422, 423, 424, 425, 426, 428, 429, 431, 451:
		return true
	}
	return false
}

var _ error = (*StatusError)(nil)
