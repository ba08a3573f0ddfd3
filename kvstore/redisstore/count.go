package redisstore

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/kvstore"
)

var _ kvstore.Census = (*Store)(nil)

// countScan is the COUNT hint of each SCAN step that looks for tenants' indexes.
const countScan = 1000

// Count returns, per tenant, how many live records are in state and when the
// oldest of them was last written. Redis keeps no list of tenants, so it finds
// them by SCANning the keyspace for the tenants' indexes (<prefix>:{*}:idx, on
// every primary of a cluster), then walks each index as List does. One call
// therefore costs a SCAN over every key of the database (in steps that never
// block the server) plus a read of the first bytes of each live record of
// every tenant. It returns kvstore.ErrInvalid for an unknown state and an
// error wrapping kvstore.ErrUnavailable when Redis cannot be reached. It
// implements kvstore.Census.
func (s *Store) Count(ctx context.Context, state kvstore.State) (map[string]kvstore.TenantCount, error) {
	const op = "count"
	if err := s.closed(op); err != nil {
		return nil, err
	}
	if err := invalid(op, state.Validate()); err != nil {
		return nil, err
	}
	tenants, err := s.tenants(ctx)
	if err != nil {
		return nil, unavailable(op, err)
	}
	out := map[string]kvstore.TenantCount{}
	for _, t := range tenants {
		recs, err := s.List(ctx, t, state, 0)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			out[t] = out[t].Add(r)
		}
	}
	return out, nil
}

// tenants returns the tenants that have an index under the store's prefix.
func (s *Store) tenants(ctx context.Context) ([]string, error) {
	head := s.cfg.Prefix + ":{"
	pattern := globEscape(head) + "*}:idx"
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
		out  []string
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		it := c.ScanType(ctx, 0, pattern, countScan, "zset").Iterator()
		for it.Next(ctx) {
			t, ok := strings.CutPrefix(it.Val(), head)
			if !ok {
				continue
			}
			t, ok = strings.CutSuffix(t, "}:idx")
			if !ok || kvstore.CheckTenant(t) != nil {
				continue
			}
			mu.Lock()
			if !seen[t] {
				seen[t] = true
				out = append(out, t)
			}
			mu.Unlock()
		}
		return it.Err()
	}
	if cc, ok := s.client.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
		return out, err
	}
	return out, scan(ctx, s.client)
}

// globEscape quotes the characters SCAN's MATCH pattern gives a meaning to.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
