package natsstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/kvstore"
)

var _ kvstore.Census = (*Store)(nil)

// Count returns, per tenant, how many live records are in state and when the
// oldest of them was last written. The bucket holds no index by state, so it
// reads the latest value of every key of every tenant through one watch on
// "*.*" (an ordered consumer, which any replica may serve): one call costs a
// pass over all the bucket's live records, whatever their state. It returns
// kvstore.ErrInvalid for an unknown state and an error wrapping
// kvstore.ErrUnavailable when JetStream cannot be reached. It implements
// kvstore.Census.
func (s *Store) Count(ctx context.Context, state kvstore.State) (map[string]kvstore.TenantCount, error) {
	const op = "count"
	if err := state.Validate(); err != nil {
		return nil, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := s.usable(op); err != nil {
		return nil, err
	}
	out := map[string]kvstore.TenantCount{}
	err := s.eachLatest(ctx, op, "*.*", func(e jetstream.KeyValueEntry) error {
		tenant, digest, ok := strings.Cut(e.Key(), ".")
		if !ok || kvstore.CheckKey(tenant, digest) != nil {
			return nil
		}
		v, err := decodeValue(e.Value())
		if err != nil {
			return fmt.Errorf("natsstore: %s: key %s: %w", op, e.Key(), err)
		}
		if kvstore.State(v.State) == state {
			out[tenant] = out[tenant].Add(s.recordOf(tenant, digest, v, e))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
