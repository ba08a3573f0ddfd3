package memstore

import (
	"context"
	"fmt"

	"github.com/tesserix/toolexec/kvstore"
)

var _ kvstore.Census = (*Store)(nil)

// Count returns, per tenant, how many live records are in state and when the
// oldest of them was last written. It walks every record under the store's
// lock, so one call costs a pass over all of them. It returns
// kvstore.ErrInvalid for an unknown state and kvstore.ErrUnavailable once the
// store is closed. It implements kvstore.Census.
func (s *Store) Count(ctx context.Context, state kvstore.State) (map[string]kvstore.TenantCount, error) {
	if err := state.Validate(); err != nil {
		return nil, fmt.Errorf("memstore: count: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(ctx); err != nil {
		return nil, fmt.Errorf("memstore: count: %w", err)
	}
	now := s.clock.Now()
	out := map[string]kvstore.TenantCount{}
	for tenant, recs := range s.tenants {
		for _, e := range recs {
			if s.live(e, now) && e.rec.State == state {
				out[tenant] = out[tenant].Add(e.rec)
			}
		}
	}
	return out, nil
}
