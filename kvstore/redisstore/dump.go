package redisstore

import (
	"bytes"
	"context"
	"slices"

	"github.com/redis/go-redis/v9"
)

// DumpRaw returns, for each of the tenant's live records, the Redis key followed
// by the record hash's fields exactly as stored, one "field=value" line each in
// field order. It is for inspection (the conformance suite uses it to show that no
// record holds a call's arguments); it walks the tenant's index, never the
// keyspace.
func (s *Store) DumpRaw(ctx context.Context, tenant string) ([][]byte, error) {
	const op = "dump"
	if err := s.closed(op); err != nil {
		return nil, err
	}
	if err := validTenant(op, tenant); err != nil {
		return nil, err
	}
	digests, err := s.client.ZRange(ctx, s.idxKey(tenant), 0, -1).Result()
	if err != nil {
		return nil, unavailable(op, err)
	}
	cmds := make([]*redis.MapStringStringCmd, len(digests))
	_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range digests {
			cmds[i] = p.HGetAll(ctx, s.recKey(tenant, d))
		}
		return nil
	})
	if err != nil {
		return nil, unavailable(op, err)
	}
	var out [][]byte
	for i, c := range cmds {
		fields := c.Val()
		if len(fields) == 0 {
			continue // expired since it was indexed
		}
		var b bytes.Buffer
		b.WriteString(s.recKey(tenant, digests[i]))
		b.WriteByte('\n')
		names := make([]string, 0, len(fields))
		for k := range fields {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, k := range names {
			b.WriteString(k)
			b.WriteByte('=')
			b.WriteString(fields[k])
			b.WriteByte('\n')
		}
		out = append(out, b.Bytes())
	}
	return out, nil
}
