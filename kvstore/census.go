package kvstore

import (
	"context"
	"time"
)

// Census is an optional capability of a [Store]: counting the live records in
// one state across every tenant, for monitoring (the executor's gauge of keys
// that wait for an operator's decision). Callers probe for it with a type
// assertion; the stores in this module all implement it.
type Census interface {
	// Count returns, for each tenant with at least one live record in state,
	// how many it has and when the oldest of them was last written. Tenants
	// with none are absent. Like listing it is a read for people, not part of
	// the guarantee: it may be served from a replica and lag the latest
	// writes. It returns ErrInvalid for a state that is not one of
	// StateClaimed, StateCompleted and StateIndeterminate, and an error
	// wrapping ErrUnavailable when the backend cannot be reached. Each
	// implementation says what one call costs.
	Count(ctx context.Context, state State) (map[string]TenantCount, error)
}

// TenantCount is what [Census.Count] tells of one tenant.
type TenantCount struct {
	// Records is how many of the tenant's live records are in the state.
	Records int64
	// Oldest is the UpdatedAt of the least recently written of them: for an
	// indeterminate record, when it became indeterminate.
	Oldest time.Time
}

// Add counts rec in c.
func (c TenantCount) Add(rec Record) TenantCount {
	c.Records++
	if c.Oldest.IsZero() || rec.UpdatedAt.Before(c.Oldest) {
		c.Oldest = rec.UpdatedAt
	}
	return c
}
