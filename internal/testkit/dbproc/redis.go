package dbproc

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis is a Redis server of one test's own, on a free port of 127.0.0.1, with
// the append-only file on and synced before every reply (appendonly yes,
// appendfsync always) and no RDB snapshots: what it acknowledged survives a
// crash. Its methods are safe for concurrent use.
type Redis struct {
	bin  string // redis-server
	dir  string // the AOF directory and server.log
	port int

	mu sync.Mutex // protects p
	p  *proc      // the running server; nil while stopped
}

// StartRedis starts redis-server. It is stopped and its files removed when the
// test ends. Without redis-server on PATH the test is skipped, or fails under
// CI=true.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		missing(t, "redis-server", err, "install it (apt-get install redis-server)")
	}
	u, _ := serverUser("") // Redis runs as whoever starts it; this never fails
	r := &Redis{bin: bin}
	r.dir = privateDir(t, "dbproc-redis-", u)
	t.Cleanup(r.shutdown)
	for attempt := 1; ; attempt++ {
		if r.port, err = freePort(); err == nil {
			err = r.start()
		}
		if err == nil {
			return r
		}
		if attempt == 3 {
			t.Fatalf("dbproc: starting Redis: %v", err)
		}
	}
}

func (r *Redis) logPath() string { return filepath.Join(r.dir, "server.log") }

// URL returns the server's URL (database 0).
func (r *Redis) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// Addr returns the server's host:port.
func (r *Redis) Addr() string { return fmt.Sprintf("127.0.0.1:%d", r.port) }

// URLVia returns the server's URL with addr (a proxy's host:port) in place of
// its own address.
func (r *Redis) URLVia(addr string) string { return fmt.Sprintf("redis://%s/0", addr) }

// Running reports whether the server process is up.
func (r *Redis) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.p != nil && !r.p.exited()
}

// Start starts the server again after Stop or Crash, on the same port, loading
// the append-only file, and waits until it answers PING.
func (r *Redis) Start(t testing.TB) {
	t.Helper()
	if err := r.start(); err != nil {
		t.Fatalf("dbproc: starting Redis: %v", err)
	}
}

// Stop shuts the server down politely (SIGTERM: it syncs the append-only file
// and exits) and waits for it to exit.
func (r *Redis) Stop(t testing.TB) {
	t.Helper()
	if err := r.stop(syscall.SIGTERM); err != nil {
		t.Fatalf("dbproc: stopping Redis: %v", err)
	}
}

// Crash kills the server (SIGKILL: nothing is flushed on the way out) and waits
// for it to exit.
func (r *Redis) Crash(t testing.TB) {
	t.Helper()
	if err := r.stop(syscall.SIGKILL); err != nil {
		t.Fatalf("dbproc: killing Redis: %v", err)
	}
}

// Restart is Stop then Start.
func (r *Redis) Restart(t testing.TB) {
	t.Helper()
	r.Stop(t)
	r.Start(t)
}

func (r *Redis) start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p != nil && !r.p.exited() {
		return errors.New("already running")
	}
	p, err := startProc(r.bin, []string{
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--dir", r.dir,
		"--appendonly", "yes",
		"--appendfsync", "always",
		"--save", "",
		"--daemonize", "no",
		"--maxmemory-policy", "noeviction",
		"--logfile", "",
	}, nil, r.logPath())
	if err != nil {
		return err
	}
	if err := waitReady(p, r.ping); err != nil {
		_ = p.stop(syscall.SIGKILL)
		return fmt.Errorf("%w\nserver log:\n%s", err, logTail(r.logPath(), 2000))
	}
	r.p = p
	return nil
}

func (r *Redis) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	// A server still loading its append-only file answers LOADING: not ready.
	return c.Ping(ctx).Err()
}

func (r *Redis) stop(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p == nil {
		return nil
	}
	err := r.p.stop(sig)
	r.p = nil
	return err
}

func (r *Redis) shutdown() { _ = r.stop(syscall.SIGTERM) }
