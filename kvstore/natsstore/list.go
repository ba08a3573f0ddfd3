package natsstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/kvstore"
)

var _ kvstore.Lister = (*Store)(nil)

// List returns up to limit of the tenant's live records in state, oldest first
// by their last write (limit ≤ 0: all of them). It reads the latest value of
// each of the tenant's keys through one watch on "<tenant>.>" — an ordered
// consumer, which any replica may serve — so its cost grows with the tenant's
// records, whatever their state, and LeaseExpired is left unset. It returns
// kvstore.ErrInvalid for a malformed tenant or an unknown state, and an error
// wrapping kvstore.ErrUnavailable when JetStream cannot be reached. It
// implements kvstore.Lister.
func (s *Store) List(ctx context.Context, tenant string, state kvstore.State, limit int) ([]kvstore.Record, error) {
	const op = "list"
	if err := kvstore.CheckTenant(tenant); err != nil {
		return nil, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := state.Validate(); err != nil {
		return nil, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := s.usable(op); err != nil {
		return nil, err
	}
	var out []kvstore.Record
	err := s.eachLatest(ctx, op, tenant+".>", func(e jetstream.KeyValueEntry) error {
		digest, ok := strings.CutPrefix(e.Key(), tenant+".")
		if !ok {
			return nil
		}
		v, err := decodeValue(e.Value())
		if err != nil {
			return fmt.Errorf("natsstore: %s: key %s: %w", op, e.Key(), err)
		}
		if kvstore.State(v.State) == state {
			out = append(out, s.recordOf(tenant, digest, v, e))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, kvstore.CompareAge)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
