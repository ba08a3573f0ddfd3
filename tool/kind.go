package tool

import "fmt"

// Kind says what repeating a tool call does.
type Kind string

// The kinds of tool. The zero Kind is not a kind: a tool without a policy has a nil
// [Policy] instead.
const (
	// ReadOnly tools read and change nothing: retried on failure, never deduplicated.
	ReadOnly Kind = "read_only"
	// Idempotent tools write, but repeating lands the same state: retried on failure
	// and deduplicated.
	Idempotent Kind = "idempotent"
	// Effectful tools make a second effect when repeated: deduplicated and never
	// retried. A failure whose effect cannot be known leaves the key indeterminate.
	Effectful Kind = "effectful"
)

// ParseKind returns the Kind named s ("read_only", "idempotent" or "effectful").
func ParseKind(s string) (Kind, error) {
	switch k := Kind(s); k {
	case ReadOnly, Idempotent, Effectful:
		return k, nil
	}
	return "", fmt.Errorf("tool: unknown idempotency kind %q (want read_only, idempotent or effectful)", s)
}

// Deduplicated reports whether calls of this kind claim an idempotency key.
func (k Kind) Deduplicated() bool { return k == Idempotent || k == Effectful }

// Retried reports whether failed calls of this kind are retried.
func (k Kind) Retried() bool { return k != Effectful }
