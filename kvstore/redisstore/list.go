package redisstore

import (
	"context"
	"errors"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/kvstore"
)

var _ kvstore.Lister = (*Store)(nil)

// listPage is how many index entries List reads per round trip.
const listPage = 256

// List returns up to limit of the tenant's live records in state, oldest first
// by their last write (limit ≤ 0: all of them), with LeaseExpired judged by
// Redis's clock. It walks the tenant's index in batches — reading each record's
// state, then the whole hash of those that match — never the keyspace, so its
// cost grows with the tenant's records, whatever their state. It returns
// kvstore.ErrInvalid for a malformed tenant or an unknown state, and an error
// wrapping kvstore.ErrUnavailable when Redis cannot be reached. It implements
// kvstore.Lister.
func (s *Store) List(ctx context.Context, tenant string, state kvstore.State, limit int) ([]kvstore.Record, error) {
	const op = "list"
	if err := s.closed(op); err != nil {
		return nil, err
	}
	if err := validTenant(op, tenant); err != nil {
		return nil, err
	}
	if !state.Valid() {
		return nil, errf(op, kvstore.ErrInvalid, "state %q", state)
	}
	now, err := s.client.Time(ctx).Result()
	if err != nil {
		return nil, unavailable(op, err)
	}
	var (
		out  []kvstore.Record
		seen = map[string]bool{} // a record written during the walk moves on in the index
		from = "-inf"            // the walk's position: the index is scored by expiry
		skip int                 // entries at score from already read
	)
	for {
		zs, err := s.client.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{
			Key: s.idxKey(tenant), ByScore: true, Start: from, Stop: "+inf", Offset: int64(skip), Count: listPage,
		}).Result()
		if err != nil {
			return nil, unavailable(op, err)
		}
		var digests []string
		for _, z := range zs {
			if d, ok := z.Member.(string); ok && !seen[d] {
				seen[d] = true
				digests = append(digests, d)
			}
		}
		recs, err := s.listBatch(ctx, tenant, state, digests, now.UnixMilli())
		if err != nil {
			return nil, unavailable(op, err)
		}
		out = append(out, recs...)
		if len(zs) < listPage {
			break
		}
		last := strconv.FormatFloat(zs[len(zs)-1].Score, 'f', -1, 64)
		if last != from {
			from, skip = last, 0
		}
		for i := len(zs) - 1; i >= 0 && strconv.FormatFloat(zs[i].Score, 'f', -1, 64) == from; i-- {
			skip++
		}
	}
	slices.SortFunc(out, kvstore.CompareAge)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// listBatch reads the state of each record of digests and returns those in
// state, judged at now (Redis's clock, milliseconds).
func (s *Store) listBatch(ctx context.Context, tenant string, state kvstore.State, digests []string, now int64) ([]kvstore.Record, error) {
	if len(digests) == 0 {
		return nil, nil
	}
	states := make([]*redis.StringCmd, len(digests))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range digests {
			states[i] = p.HGet(ctx, s.recKey(tenant, d), "state")
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var hashes []*redis.MapStringStringCmd
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range digests {
			if states[i].Val() == string(state) {
				hashes = append(hashes, p.HGetAll(ctx, s.recKey(tenant, d)))
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var out []kvstore.Record
	for _, h := range hashes {
		if len(h.Val()) == 0 {
			continue // expired or gone since its state was read
		}
		rec, err := snapshot{found: true, now: now, fields: h.Val()}.record()
		if err != nil {
			return nil, err
		}
		if rec.State == state && rec.Tenant == tenant {
			out = append(out, rec)
		}
	}
	return out, nil
}
