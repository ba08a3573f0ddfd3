package redisstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testenv"
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
	claim := func(holder, token string) string {
		t.Helper()
		v, err := s.run(ctx, claimScript, "acme", digest, "acme", holder, int64(30000), token, "", "book", "run_1", "call_1")
		if err != nil {
			t.Fatal(err)
		}
		status, _, err := parseReply(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(status)
	}
	if got := claim("w1", "tok-1"); got != string(statusOK) {
		t.Fatalf("first run: %s", got)
	}
	if got := claim("w1", "tok-1"); got != string(statusOK) {
		t.Fatalf("the same script again: %s, want the claim recognised as granted", got)
	}
	if got := claim("w1", "tok-2"); got != string(statusExists) {
		t.Fatalf("another claim by the same holder: %s, want exists", got)
	}
	if got := claim("w2", "tok-1"); got != string(statusExists) {
		t.Fatalf("another holder with the same token: %s, want exists", got)
	}
	client.Del(ctx, s.recKey("acme", digest))
}
