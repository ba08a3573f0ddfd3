package redisstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// TestListWalksPages: List reads the tenant's index a page at a time; records
// beyond the first pages, and records that share an index score across a page
// boundary, are all found, each once.
func TestListWalksPages(t *testing.T) {
	s, c := newStore(t, redisstore.Config{})
	const n = 700 // more than two pages
	parked := map[string]bool{}
	for i := range n {
		req := claimReq("acme", fmt.Sprint("k", i), fmt.Sprint("w", i), time.Minute)
		l := mustClaim(t, s, req).Lease
		if i%3 == 0 {
			if err := s.MarkIndeterminate(ctx(t), l, "body_failed", true); err != nil {
				t.Fatal(err)
			}
			parked[req.Key] = true
			continue
		}
		if err := s.Record(ctx(t), l, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	// Many records in one millisecond share a score; force a long run of equal
	// scores across the page boundaries as well.
	idx := s.Config().Prefix + ":{acme}:idx"
	members, err := c.ZRange(ctx(t), idx, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	top, err := c.ZRangeWithScores(ctx(t), idx, -1, -1).Result()
	if err != nil || len(top) != 1 {
		t.Fatalf("index: %v %v", top, err)
	}
	for _, m := range members[200:600] {
		c.ZAdd(ctx(t), idx, redis.Z{Score: top[0].Score, Member: m})
	}

	got, err := s.List(ctx(t), "acme", kvstore.StateIndeterminate, 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range got {
		if !parked[r.Key] || seen[r.Key] || r.State != kvstore.StateIndeterminate {
			t.Fatalf("List returned %s (%s) unexpectedly or twice", r.Key, r.State)
		}
		seen[r.Key] = true
	}
	if len(seen) != len(parked) {
		t.Fatalf("List found %d of %d indeterminate records", len(seen), len(parked))
	}
	done, err := s.List(ctx(t), "acme", kvstore.StateCompleted, 10)
	if err != nil || len(done) != 10 {
		t.Fatalf("List(completed, 10) = %d records, %v", len(done), err)
	}
}
