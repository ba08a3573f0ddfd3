package dbproc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/kvstore/pgstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// cleanupTimeout bounds what a cleanup does against a server.
const cleanupTimeout = 10 * time.Second

func randomName(t testing.TB, prefix string) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b[:])
}

// FreshSchema returns a PostgreSQL schema name no other test uses, and drops
// that schema (if it was created) from the database at url when the test ends.
// A server that is gone by then is not an error: its data went with it.
func FreshSchema(t testing.TB, url string) string {
	t.Helper()
	name := randomName(t, "dbproc_t_")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("dbproc: not dropping schema %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+name+` CASCADE`); err != nil {
			t.Logf("dbproc: dropping schema %s: %v", name, err)
		}
	})
	return name
}

// FreshPrefix returns a Redis key prefix no other test uses, and removes every
// key under it from the server at url when the test ends.
func FreshPrefix(t testing.TB, url string) string {
	t.Helper()
	prefix := randomName(t, "dbproc-t-")
	t.Cleanup(func() {
		opts, err := redis.ParseURL(url)
		if err != nil {
			t.Logf("dbproc: %v", err)
			return
		}
		c := redis.NewClient(opts)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		// A test-only scan; the store itself never scans the keyspace.
		iter := c.Scan(ctx, 0, prefix+":*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Logf("dbproc: not removing keys under %s: %v", prefix, err)
			return
		}
		for len(keys) > 0 {
			n := min(len(keys), 500)
			if err := c.Unlink(ctx, keys[:n]...).Err(); err != nil {
				t.Logf("dbproc: removing keys under %s: %v", prefix, err)
				return
			}
			keys = keys[n:]
		}
	})
	return prefix
}

// PostgresPool connects a pool to url. It is closed when the test ends.
func PostgresPool(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("dbproc: connecting to %s: %v", url, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// PostgresStore opens a store on the database at url in a fresh schema (see
// FreshSchema; cfg.Schema, when set, is used instead and left in place), runs
// EnsureSchema and returns the store and its pool. The store is closed, then the
// pool, when the test ends.
func PostgresStore(t testing.TB, url string, cfg pgstore.Config) (*pgstore.Store, *pgxpool.Pool) {
	t.Helper()
	if cfg.Schema == "" {
		cfg.Schema = FreshSchema(t, url)
	}
	pool := PostgresPool(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := pgstore.New(ctx, pool, cfg)
	if err != nil {
		t.Fatalf("dbproc: pgstore.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.EnsureSchema(ctx); err != nil {
		t.Fatalf("dbproc: EnsureSchema: %v", err)
	}
	return s, pool
}

// RedisClient connects a client to url, with opts applied to its options (nil:
// go-redis's defaults). It is closed when the test ends.
func RedisClient(t testing.TB, url string, opts func(*redis.Options)) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(url)
	if err != nil {
		t.Fatalf("dbproc: %v", err)
	}
	if opts != nil {
		opts(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// RedisStore opens a store on the server at url under a fresh prefix (see
// FreshPrefix; cfg.Prefix, when set, is used instead and left in place) and
// returns it with its client. The store is closed, then the client, when the
// test ends.
func RedisStore(t testing.TB, url string, cfg redisstore.Config) (*redisstore.Store, *redis.Client) {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = FreshPrefix(t, url)
	}
	c := RedisClient(t, url, nil)
	s, err := redisstore.New(c, cfg)
	if err != nil {
		t.Fatalf("dbproc: redisstore.New: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, c
}
