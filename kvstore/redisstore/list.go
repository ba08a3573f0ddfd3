package redisstore

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/kvstore"
)

var _ kvstore.Lister = (*Store)(nil)

// listPage is how many index entries List reads per round trip.
const listPage = 256

// List returns up to limit of the tenant's live records in state, oldest first
// by their last write (limit ≤ 0: all of them), with LeaseExpired judged by
// Redis's clock. It walks the tenant's index in batches — reading each record's
// state, then the whole record of those that match — never the keyspace, so its
// cost grows with the tenant's records, whatever their state. It returns
// kvstore.ErrInvalid for a malformed tenant or an unknown state, and an error
// wrapping kvstore.ErrUnavailable when Redis cannot be reached. It implements
// kvstore.Lister.
func (s *Store) List(ctx context.Context, tenant string, state kvstore.State, limit int) ([]kvstore.Record, error) {
	const op = "list"
	if err := s.closed(op); err != nil {
		return nil, err
	}
	if err := invalid(op, kvstore.CheckTenant(tenant)); err != nil {
		return nil, err
	}
	if err := invalid(op, state.Validate()); err != nil {
		return nil, err
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
// state, judged at now (Redis's clock, milliseconds): one pipeline reads the
// states (the first bytes of each value), a second the records that match. A
// record still in the previous version's layout (a hash) is read through
// readScript, which renders it in this one.
func (s *Store) listBatch(ctx context.Context, tenant string, state kvstore.State, digests []string, now int64) ([]kvstore.Record, error) {
	if len(digests) == 0 {
		return nil, nil
	}
	want := byte(stClaimed)
	switch state {
	case kvstore.StateCompleted:
		want = stCompleted
	case kvstore.StateIndeterminate:
		want = stIndeterminate
	}
	heads := make([]*redis.StringCmd, len(digests))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range digests {
			heads[i] = p.GetRange(ctx, s.recKey(tenant, d), 0, 2)
		}
		return nil
	}); err != nil && !isWrongType(err) {
		return nil, err
	}
	var (
		matched []string // digests whose value is in state
		hashes  []string // digests of records in the previous layout
	)
	for i, d := range digests {
		switch h, err := heads[i].Result(); {
		case isWrongType(err):
			hashes = append(hashes, d)
		case err != nil:
			return nil, err
		case len(h) == 3 && h[2] == want:
			matched = append(matched, d)
		}
	}
	values := make([]*redis.StringCmd, len(matched))
	if _, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range matched {
			values[i] = p.Get(ctx, s.recKey(tenant, d))
		}
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, err
	}
	var out []kvstore.Record
	for i, d := range matched {
		v, err := values[i].Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue // expired or gone since its state was read
		case isWrongType(err):
			hashes = append(hashes, d) // released and claimed again by the previous version
			continue
		case err != nil:
			return nil, err
		}
		rec, _, err := decode(tenant, d, v, now)
		if err != nil {
			return nil, err
		}
		if rec.State == state {
			out = append(out, rec)
		}
	}
	for _, d := range hashes {
		found, at, v, err := s.readValue(ctx, readScript, tenant, d)
		if err != nil {
			return nil, err
		}
		if !found {
			continue
		}
		rec, _, err := decode(tenant, d, v, at)
		if err != nil {
			return nil, err
		}
		if rec.State == state {
			out = append(out, rec)
		}
	}
	return out, nil
}

// isWrongType reports whether err is Redis's answer to a command on a key of
// another type: here, a string command on a record in the previous layout.
func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}
