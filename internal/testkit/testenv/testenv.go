// Package testenv tells tests where the external services they need are, and what to
// do when one is missing: skip with a message naming the fix, or, under CI=true,
// fail — a CI run must never report "ok" for a test that silently did nothing.
package testenv

import (
	"context"
	"net"
	"net/url"
	"os"
	"testing"
	"time"
)

// Defaults used when the TEST_* variables are unset: the services this project's
// machines run on localhost.
const (
	DefaultPostgresURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
)

// PostgresURL returns TEST_POSTGRES_URL (or DefaultPostgresURL) after checking that
// the server accepts TCP connections; see Require for what happens when it does not.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := env("TEST_POSTGRES_URL", DefaultPostgresURL)
	Require(t, "PostgreSQL", u, "start it (pg_ctlcluster 15 main start) or set TEST_POSTGRES_URL")
	return u
}

// RedisURL returns TEST_REDIS_URL (or DefaultRedisURL) after checking that the
// server accepts TCP connections; see Require for what happens when it does not.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := env("TEST_REDIS_URL", DefaultRedisURL)
	Require(t, "Redis", u, "start it (redis-server --daemonize yes) or set TEST_REDIS_URL")
	return u
}

// InCI reports whether the tests run under CI (CI=true), where a missing service is
// a failure rather than a skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Require checks that the host:port of rawURL accepts a TCP connection. If it does
// not, the test is skipped with fix as the remedy, or failed under CI=true.
func Require(t testing.TB, service, rawURL, fix string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("testenv: %s URL %q: %v", service, rawURL, err)
	}
	host := u.Host
	if u.Port() == "" {
		t.Fatalf("testenv: %s URL %q has no port", service, rawURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", host)
	if err == nil {
		_ = c.Close()
		return
	}
	if InCI() {
		t.Fatalf("testenv: %s is required under CI=true but %s is unreachable: %v (%s)", service, host, err, fix)
	}
	t.Skipf("testenv: %s unreachable at %s: %v; %s", service, host, err, fix)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// FreeAddr returns a 127.0.0.1 address, host and port, that nothing listens
// on (yet): for a server a test starts there, or one it expects to find dead.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
