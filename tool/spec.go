package tool

import (
	"encoding/json"
	"time"

	"github.com/tesserix/toolexec/internal/backoff"
)

// Policy is a tool's idempotency declaration.
type Policy struct {
	// Kind is what repeating the tool does.
	Kind Kind
	// KeyArguments names the arguments that identify the effect. nil means every
	// argument counts; an empty, non-nil slice means none do (the key is tenant, run
	// and tool alone). Each name must be a parameter of the tool.
	KeyArguments []string
	// CheckArguments names arguments that are not part of the key but must not
	// change between a call and its duplicates. A duplicate whose values differ is
	// rejected (arguments_mismatch). Each name must be a parameter of the tool.
	CheckArguments []string
}

// Retry is a tool's retry policy: exponential backoff with jitter and a cap.
// Effectful tools are never retried, whatever it says. The zero value makes one
// attempt.
type Retry struct {
	// MaxAttempts is how many times the body may be entered in all; values below 1
	// mean 1.
	MaxAttempts int
	// InitialBackoff is the delay before the second attempt; default 100ms.
	InitialBackoff time.Duration
	// MaxBackoff caps every delay; default 10s.
	MaxBackoff time.Duration
	// Multiplier grows the delay after each attempt; default 2.
	Multiplier float64
}

// Attempts returns how many attempts the policy allows (at least 1).
func (r Retry) Attempts() int { return max(r.MaxAttempts, 1) }

// Backoff returns the delay before attempt n+1, after n failed attempts (n ≥ 1).
// The delay grows as InitialBackoff·Multiplier^(n-1), capped at MaxBackoff, and is
// jittered to a uniformly random point in its upper half: jitter is a number in
// [0, 1), typically from math/rand.
func (r Retry) Backoff(n int, jitter float64) time.Duration {
	return backoff.Backoff{Initial: r.InitialBackoff, Max: r.MaxBackoff, Multiplier: r.Multiplier, Jitter: 0.5}.DelayAt(n, jitter)
}

// Spec declares a tool.
type Spec struct {
	// Name is the tool's name, a token of [A-Za-z0-9_-]{1,128} (it is part of NATS
	// subjects).
	Name string
	// Description says what the tool does, for people and models.
	Description string
	// Idempotency is the tool's policy; nil means none: nothing is claimed or
	// recorded and the tool behaves as if the feature did not exist.
	Idempotency *Policy
	// Timeout bounds one attempt of the body; zero means no limit of its own.
	Timeout time.Duration
	// Retry is the retry policy.
	Retry Retry
	// Parameters is the JSON Schema of the arguments object. For typed tools it may
	// be left empty: the schema is derived from the argument struct.
	Parameters json.RawMessage
}
