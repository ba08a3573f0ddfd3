package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// pgPool opens a pool of h.cfg.pgConns connections to the benchmark database.
func (h *harness) pgPool(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(h.cfg.pgURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(h.cfg.pgConns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL at %s: %w", h.cfg.pgURL, err)
	}
	return pool, nil
}

// pgSetting reads one server setting, for the table.
func pgSetting(ctx context.Context, pool *pgxpool.Pool, name string) string {
	var v string
	if err := pool.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v); err != nil {
		return "?"
	}
	return v
}

// runPGCycles measures the raw PostgreSQL claim cycle: the one-statement claim
// (INSERT … ON CONFLICT DO UPDATE … WHERE the old record expired, RETURNING)
// of a new key, then the UPDATE that records the outcome, each committed on its
// own, from conc goroutines over the pool. With notify each statement also
// calls pg_notify, as pgstore's writes do for its waiters.
func (h *harness) runPGCycles(ctx context.Context, id string, notify bool) Result {
	r := Result{ID: id, Group: groupRawStore, Name: "PostgreSQL: INSERT … ON CONFLICT + UPDATE", Concurrency: h.cfg.concurrency, dbServer: true}
	if notify {
		r.Name += ", each with pg_notify"
	}
	pool, err := h.pgPool(ctx)
	if err != nil {
		return failed(r, err)
	}
	defer pool.Close()
	r.Durability = "synchronous_commit=" + pgSetting(ctx, pool, "synchronous_commit") + fmt.Sprintf(", %d connections", h.cfg.pgConns)
	const schema = "toolexec_bench_raw"
	if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE; CREATE SCHEMA `+schema+`;
		CREATE TABLE `+schema+`.claims (
			key text PRIMARY KEY, state text NOT NULL, holder text NOT NULL, outcome text,
			lease_until timestamptz NOT NULL, expires_at timestamptz NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return failed(r, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pool.Exec(cctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
	}()
	// Both statements return one value, so that the cycle is the same with and
	// without the notification.
	ret := "true"
	if notify {
		ret = "pg_notify('toolexec_bench_raw', key) IS NOT NULL"
	}
	claim := `INSERT INTO ` + schema + `.claims AS t (key, state, holder, lease_until, expires_at)
		VALUES ($1, 'claimed', $2, now() + interval '15 seconds', now() + interval '24 hours')
		ON CONFLICT (key) DO UPDATE SET state = 'claimed', holder = EXCLUDED.holder, outcome = NULL,
			lease_until = EXCLUDED.lease_until, expires_at = EXCLUDED.expires_at, updated_at = now()
		WHERE t.expires_at <= now()
		RETURNING ` + ret
	record := `UPDATE ` + schema + `.claims SET state = 'completed', outcome = $3, updated_at = now(),
		expires_at = now() + interval '24 hours' WHERE key = $1 AND holder = $2 AND state = 'claimed'
		RETURNING ` + ret
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	return h.cycles(ctx, r, h.cfg.rawPG, func(ctx context.Context, i int) error {
		key := run + "." + strconv.Itoa(i)
		var ok bool
		if err := pool.QueryRow(ctx, claim, key, "bench-worker").Scan(&ok); err != nil {
			return fmt.Errorf("claim %s: %w", key, err)
		}
		if err := pool.QueryRow(ctx, record, key, "bench-worker", "K7Q2ZD").Scan(&ok); err != nil {
			return fmt.Errorf("record %s: %w", key, err)
		}
		return nil
	})
}

// redisClient opens a client with a pool of 64 connections (one per goroutine
// in flight).
func (h *harness) redisClient(ctx context.Context) (*redis.Client, error) {
	opt, err := redis.ParseURL(h.cfg.redisURL)
	if err != nil {
		return nil, err
	}
	opt.PoolSize = max(h.cfg.concurrency, 10)
	c := redis.NewClient(opt)
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("Redis at %s: %w", h.cfg.redisURL, err)
	}
	return c, nil
}

// redisPersistence describes Redis's persistence settings, for the table.
func redisPersistence(ctx context.Context, c *redis.Client) string {
	aof, err := c.ConfigGet(ctx, "appendonly").Result()
	if err != nil {
		return "?"
	}
	if aof["appendonly"] != "yes" {
		return "no AOF (a restart loses every record)"
	}
	fs, _ := c.ConfigGet(ctx, "appendfsync").Result()
	return "AOF, appendfsync " + fs["appendfsync"]
}

// unlinkPrefix removes every key under prefix.
func unlinkPrefix(ctx context.Context, c *redis.Client, prefix string) error {
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.Unlink(ctx, batch...).Err()
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	return flush()
}

// runRedisCycles measures the raw Redis claim cycle: SET NX PX of a new key,
// then SET XX PX with the outcome, from conc goroutines.
func (h *harness) runRedisCycles(ctx context.Context) Result {
	r := Result{ID: "raw-redis", Group: groupRawStore, Name: "Redis: SET NX + SET XX", Concurrency: h.cfg.concurrency, dbServer: true}
	c, err := h.redisClient(ctx)
	if err != nil {
		return failed(r, err)
	}
	defer c.Close()
	r.Durability = redisPersistence(ctx, c)
	prefix := "toolexec-bench-raw-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		_ = unlinkPrefix(cctx, c, prefix)
	}()
	claimV := `{"state":"claimed","holder":"bench-worker","claim":"c1f4a2","tool":"book","run":"run_1","call":"call_6705c7fa0eed"}`
	doneV := `{"state":"completed","holder":"bench-worker","claim":"c1f4a2","tool":"book","run":"run_1","call":"call_6705c7fa0eed","outcome":"K7Q2ZD"}`
	return h.cycles(ctx, r, h.cfg.rawRedis, func(ctx context.Context, i int) error {
		key := prefix + strconv.Itoa(i)
		ok, err := c.SetArgs(ctx, key, claimV, redis.SetArgs{Mode: "NX", TTL: 24 * time.Hour}).Result()
		if err != nil {
			return fmt.Errorf("SET NX %s: %w", key, err)
		}
		if ok != "OK" {
			return fmt.Errorf("SET NX %s: %q", key, ok)
		}
		ok, err = c.SetArgs(ctx, key, doneV, redis.SetArgs{Mode: "XX", TTL: 24 * time.Hour}).Result()
		if errors.Is(err, redis.Nil) || (err == nil && ok != "OK") {
			return fmt.Errorf("SET XX %s: not set", key)
		}
		if err != nil {
			return fmt.Errorf("SET XX %s: %w", key, err)
		}
		return nil
	})
}
