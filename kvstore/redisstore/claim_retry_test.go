package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/kvstore"
)

// TestClaimScriptRetried: go-redis runs a script again after a network timeout.
// When the first run had landed, the second must recognise the claim as its own
// (same holder and token) instead of reporting somebody else's claim, which
// would leave the key to run out as holder_lost with nobody running the tool.
func TestClaimScriptRetried(t *testing.T) {
	opts, err := redis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opts)
	defer client.Close()
	prefix := fmt.Sprintf("toolexec-retry-%d", time.Now().UnixNano())
	s, err := New(client, Config{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	digest := "ab" + fmt.Sprintf("%062x", time.Now().UnixNano())
	claim := func(holder, token string) bool {
		t.Helper()
		req := kvstore.ClaimRequest{Tenant: "acme", Key: digest, Holder: holder, Lease: 30 * time.Second, Tool: "book", RunID: "run_1", CallID: "call_1"}
		res, err := s.claim(ctx, req, token)
		if err != nil {
			t.Fatal(err)
		}
		if res.Claimed && (res.Lease.Token != token || res.Record.Holder != holder || res.Record.State != kvstore.StateClaimed) {
			t.Fatalf("claim by %s with %s: lease %+v, record %+v", holder, token, res.Lease, res.Record)
		}
		return res.Claimed
	}
	if !claim("w1", "tok-1") {
		t.Fatal("first run: not claimed")
	}
	if !claim("w1", "tok-1") {
		t.Fatal("the same script again: not claimed, want the claim recognised as granted")
	}
	if claim("w1", "tok-2") {
		t.Fatal("another claim by the same holder: claimed, want the existing record")
	}
	if claim("w2", "tok-1") {
		t.Fatal("another holder with the same token: claimed, want the existing record")
	}
	client.Del(ctx, s.recKey("acme", digest))
}
