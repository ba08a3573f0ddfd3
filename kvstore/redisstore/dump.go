package redisstore

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/kvstore"
)

// DumpRaw returns, for each of the tenant's live records, the Redis key, a
// newline and the value exactly as stored (for a record still in the previous
// version's layout, a hash, one "field=value" line per field in field order). It
// is for inspection (the conformance suite uses it to show that no record holds a
// call's arguments); it walks the tenant's index, never the keyspace.
func (s *Store) DumpRaw(ctx context.Context, tenant string) ([][]byte, error) {
	const op = "dump"
	if err := s.closed(op); err != nil {
		return nil, err
	}
	if err := invalid(op, kvstore.CheckTenant(tenant)); err != nil {
		return nil, err
	}
	digests, err := s.client.ZRange(ctx, s.idxKey(tenant), 0, -1).Result()
	if err != nil {
		return nil, unavailable(op, err)
	}
	cmds := make([]*redis.StringCmd, len(digests))
	_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range digests {
			cmds[i] = p.Get(ctx, s.recKey(tenant, d))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) && !isWrongType(err) {
		return nil, unavailable(op, err)
	}
	var out [][]byte
	for i, c := range cmds {
		key := s.recKey(tenant, digests[i])
		var b bytes.Buffer
		b.WriteString(key)
		b.WriteByte('\n')
		v, err := c.Result()
		switch {
		case errors.Is(err, redis.Nil):
			continue // expired since it was indexed
		case isWrongType(err):
			fields, err := s.client.HGetAll(ctx, key).Result()
			if err != nil {
				return nil, unavailable(op, err)
			}
			if len(fields) == 0 {
				continue
			}
			for _, k := range slices.Sorted(maps.Keys(fields)) {
				b.WriteString(k)
				b.WriteByte('=')
				b.WriteString(fields[k])
				b.WriteByte('\n')
			}
		case err != nil:
			return nil, unavailable(op, err)
		default:
			b.WriteString(v)
		}
		out = append(out, b.Bytes())
	}
	return out, nil
}
