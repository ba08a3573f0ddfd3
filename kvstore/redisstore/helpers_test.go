package redisstore_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// newClient connects to the test Redis (skipping, or failing under CI=true, when
// it is not there) and closes the client when the test ends.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	u := testenv.RedisURL(t)
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("parse %s: %v", u, err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// proxiedClient returns a client that reaches Redis through a proxy the test
// can black-hole, with 300 ms dial, read and write timeouts, so that a lost
// connection fails fast, and maxRetries (0: go-redis's default).
func proxiedClient(t *testing.T, maxRetries int) (*redis.Client, *tcpproxy.Proxy) {
	t.Helper()
	u, err := url.Parse(testenv.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	px := tcpproxy.Start(t, u.Host)
	opt, err := redis.ParseURL(u.String())
	if err != nil {
		t.Fatal(err)
	}
	opt.Addr = px.Addr()
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	opt.MaxRetries = maxRetries
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return c, px
}

// uniquePrefix returns a key prefix no other test uses, and removes every key
// under it when the test ends.
func uniquePrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	p := "toolexec-test-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { deleteUnder(t, c, p) })
	return p
}

// deleteUnder removes every key starting with prefix (test cleanup only: the store
// itself never scans the keyspace).
func deleteUnder(t testing.TB, c redis.UniversalClient, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Logf("cleanup scan %s: %v", prefix, err)
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := c.Unlink(ctx, keys[:n]...).Err(); err != nil {
			t.Logf("cleanup unlink: %v", err)
			return
		}
		keys = keys[n:]
	}
}

// newStore returns a store on the test Redis under a unique prefix, and its client.
func newStore(t testing.TB, cfg redisstore.Config) (*redisstore.Store, *redis.Client) {
	t.Helper()
	return storeOn(t, newClient(t), cfg)
}

// storeOn returns a store over client c, under a unique prefix unless cfg
// names one, closed when the test ends.
func storeOn(t testing.TB, c *redis.Client, cfg redisstore.Config) (*redisstore.Store, *redis.Client) {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = uniquePrefix(t, c)
	}
	s, err := redisstore.New(c, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, c
}

// digest returns a well-formed 64-hex key derived from name.
func digest(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:])
}

func claimReq(tenant, name, holder string, lease time.Duration) kvstore.ClaimRequest {
	return kvstore.ClaimRequest{
		Tenant: tenant, Key: digest(name), Holder: holder, Lease: lease,
		CheckDigest: "chk-" + name, Tool: "book", RunID: "run-1", CallID: "call-" + holder,
	}
}

// mustClaim claims req and fails the test unless it got the key.
func mustClaim(t testing.TB, s kvstore.Store, req kvstore.ClaimRequest) kvstore.ClaimResult {
	t.Helper()
	res, err := s.Claim(ctx(t), req)
	if err != nil {
		t.Fatalf("Claim(%s): %v", req.Holder, err)
	}
	if !res.Claimed {
		t.Fatalf("Claim(%s): not claimed; record held by %q in state %s", req.Holder, res.Record.Holder, res.Record.State)
	}
	return res
}

// ctx returns a context that ends with the test (or after a minute).
func ctx(t testing.TB) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return c
}

// wantErr fails unless errors.Is(err, want) for every want.
func wantErr(t testing.TB, what string, err error, wants ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got nil error, want %v", what, wants)
	}
	for _, w := range wants {
		if !errors.Is(err, w) {
			t.Fatalf("%s: got %v, want errors.Is %v", what, err, w)
		}
	}
}

// waitLimit is how long these tests wait for what they poll.
const waitLimit = 10 * time.Second

// redisNow reads Redis's clock.
func redisNow(t testing.TB, c redis.UniversalClient) time.Time {
	t.Helper()
	now, err := c.Time(ctx(t)).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return now
}

// storedRecord is a record value split as the store lays it out: the flags
// ("2", waiter, state, body entered), the numbers (revision, top reserved
// revision, lease ms, lease deadline, created, updated, expires, indexed until,
// identity length), and the identity and tail after them.
type storedRecord struct {
	flags   string
	numbers []string
	rest    string
}

// readStored reads key's value behind the store's back.
func readStored(t testing.TB, c redis.UniversalClient, key string) storedRecord {
	t.Helper()
	v, err := c.Get(ctx(t), key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	head, rest, ok := strings.Cut(v, "\n")
	fields := strings.Fields(head)
	if !ok || len(fields) != 10 || len(fields[0]) != 4 || fields[0][0] != '2' {
		t.Fatalf("value of %s is not in the store's layout: %q", key, v)
	}
	return storedRecord{flags: fields[0], numbers: fields[1:], rest: rest}
}

// writeStored writes r as key's value behind the store's back, keeping its TTL.
func writeStored(t testing.TB, c redis.UniversalClient, key string, r storedRecord) {
	t.Helper()
	v := r.flags + " " + strings.Join(r.numbers, " ") + "\n" + r.rest
	if err := c.Set(ctx(t), key, v, redis.KeepTTL).Err(); err != nil {
		t.Fatalf("SET %s: %v", key, err)
	}
}

// The positions of storedRecord.numbers.
const (
	numRev = iota
	numTop
	numLeaseMS
	numLeaseUntil
	numCreated
	numUpdated
	numExpires
	numIndexedUntil
	numIdentityLen
)
