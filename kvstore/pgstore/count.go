package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tesserix/toolexec/kvstore"
)

var _ kvstore.Census = (*Store)(nil)

// Count returns, per tenant, how many live records are in state and when the
// oldest of them was last written, in one grouped query. The state is written
// into the statement as a literal (it is one of three checked constants), so
// that counting indeterminate records reads only the partial index that List
// uses (records_indeterminate): one call costs a pass over the indeterminate
// records, whatever the number of others. Counting the other states reads the
// whole table. It returns kvstore.ErrInvalid for an unknown state and an error
// wrapping kvstore.ErrUnavailable when PostgreSQL cannot be reached. It
// implements kvstore.Census.
func (s *Store) Count(ctx context.Context, state kvstore.State) (map[string]kvstore.TenantCount, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := state.Validate(); err != nil {
		return nil, s.fail("count", err)
	}
	if err := s.checkOpen(); err != nil {
		return nil, s.fail("count", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT tenant, count(*), min(updated_at) FROM `+s.quotedSchema+`.records
WHERE state = '`+string(state)+`' AND expires_at > now() GROUP BY tenant`)
	if err != nil {
		return nil, s.fail("count", err)
	}
	out := map[string]kvstore.TenantCount{}
	var (
		tenant string
		n      int64
		oldest time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&tenant, &n, &oldest}, func() error {
		out[tenant] = kvstore.TenantCount{Records: n, Oldest: oldest}
		return nil
	})
	if err != nil {
		return nil, s.fail("count", err)
	}
	return out, nil
}
