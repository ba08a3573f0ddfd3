package dbproc_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testkit/dbproc"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/kvstore/pgstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func refused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		_ = c.Close()
		t.Fatalf("%s still accepts connections", addr)
	}
}

// TestPostgresKeepsCommittedRowsAcrossStopAndCrash writes a row, stops the
// server politely, then crashes it, and reads the rows back after each start.
func TestPostgresKeepsCommittedRowsAcrossStopAndCrash(t *testing.T) {
	t.Parallel()
	pg := dbproc.StartPostgres(t)
	if !pg.Running() || !strings.Contains(pg.URL(), pg.Addr()) {
		t.Fatalf("started server: running %v, URL %s, addr %s", pg.Running(), pg.URL(), pg.Addr())
	}
	exec := func(sql string) {
		t.Helper()
		c, err := pgx.Connect(ctxT(t), pg.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctxT(t))
		if _, err := c.Exec(ctxT(t), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	count := func() int {
		t.Helper()
		c, err := pgx.Connect(ctxT(t), pg.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctxT(t))
		var n int
		if err := c.QueryRow(ctxT(t), `SELECT count(*) FROM kept`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec(`CREATE TABLE kept (n int)`)
	exec(`INSERT INTO kept VALUES (1)`)

	pg.Stop(t)
	if pg.Running() {
		t.Fatal("Running after Stop")
	}
	refused(t, pg.Addr())
	pg.Start(t)
	if n := count(); n != 1 {
		t.Fatalf("after a stop: %d rows, want 1", n)
	}

	exec(`INSERT INTO kept VALUES (2)`)
	pg.Crash(t)
	refused(t, pg.Addr())
	pg.Start(t)
	if n := count(); n != 2 {
		t.Fatalf("after a crash: %d rows, want 2", n)
	}
	pg.Restart(t)
	if n := count(); n != 2 {
		t.Fatalf("after a restart: %d rows, want 2", n)
	}
}

// TestRedisKeepsAcknowledgedWritesAcrossKill kills the server right after a
// write was acknowledged: with appendfsync always the write is on disk.
func TestRedisKeepsAcknowledgedWritesAcrossKill(t *testing.T) {
	t.Parallel()
	r := dbproc.StartRedis(t)
	c := dbproc.RedisClient(t, r.URL(), nil)
	if err := c.Set(ctxT(t), "k", "v1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	get := func() string {
		t.Helper()
		v, err := c.Get(ctxT(t), "k").Result()
		if err != nil {
			t.Fatalf("GET after restart: %v", err)
		}
		return v
	}
	r.Crash(t)
	if r.Running() {
		t.Fatal("Running after Crash")
	}
	refused(t, r.Addr())
	r.Start(t)
	if v := get(); v != "v1" {
		t.Fatalf("after a kill: %q, want v1", v)
	}
	if err := c.Set(ctxT(t), "k", "v2", 0).Err(); err != nil {
		t.Fatal(err)
	}
	r.Restart(t)
	if v := get(); v != "v2" {
		t.Fatalf("after a stop: %q, want v2", v)
	}
	if got, err := c.ConfigGet(ctxT(t), "appendfsync").Result(); err != nil || got["appendfsync"] != "always" {
		t.Fatalf("appendfsync = %v (%v), want always", got, err)
	}
}

func TestFreshSchemaIsDroppedAtCleanup(t *testing.T) {
	url := testenv.PostgresURL(t)
	var schema string
	t.Run("user", func(t *testing.T) {
		s, _ := dbproc.PostgresStore(t, url, pgstore.Config{})
		schema = s.Config().Schema
		if !strings.HasPrefix(schema, "dbproc_t_") {
			t.Fatalf("schema %q", schema)
		}
	})
	c, err := pgx.Connect(ctxT(t), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctxT(t))
	var n int
	if err := c.QueryRow(ctxT(t), `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("schema %s still exists after the test", schema)
	}
}

func TestFreshPrefixIsEmptiedAtCleanup(t *testing.T) {
	url := testenv.RedisURL(t)
	var prefix string
	t.Run("user", func(t *testing.T) {
		_, c := dbproc.RedisStore(t, url, redisstore.Config{})
		prefix = dbproc.FreshPrefix(t, url)
		if err := c.Set(ctxT(t), prefix+":{x}:k", "v", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	})
	c := dbproc.RedisClient(t, url, nil)
	if err := c.Get(ctxT(t), prefix+":{x}:k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("key under %s after the test: %v, want redis.Nil", prefix, err)
	}
}

func TestMissingBinariesSkip(t *testing.T) {
	if testenv.InCI() {
		t.Skip("under CI=true a missing binary fails the test instead; nothing to check here")
	}
	t.Setenv("TEST_PG_BIN", t.TempDir())
	ran := false
	t.Run("inner", func(t *testing.T) {
		dbproc.StartPostgres(t)
		ran = true
	})
	if ran {
		t.Fatal("StartPostgres returned without binaries")
	}
}
