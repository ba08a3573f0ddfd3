package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus/embedded"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

func TestApplyEnv(t *testing.T) {
	var cfg config
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	cfg.register(fs)
	if err := fs.Parse([]string{"--concurrency", "8"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"TOOLEXEC_CONCURRENCY": "99", // the flag wins
		"TOOLEXEC_STORE":       "redis",
		"TOOLEXEC_REDIS_URL":   "redis://127.0.0.1:6379/0",
		"TOOLEXEC_LEASE":       "5s",
		"TOOLEXEC_DEMO":        "true",
	}
	if err := applyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	if cfg.concurrency != 8 || cfg.store.Kind != "redis" || cfg.store.RedisURL == "" || cfg.lease != 5*time.Second || !cfg.demo {
		t.Fatalf("config = %+v", cfg)
	}
	if err := cfg.check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	err := applyEnv(fs, func(k string) (string, bool) {
		if k == "TOOLEXEC_RETENTION" {
			return "a day", true
		}
		return "", false
	})
	if err == nil || !strings.Contains(err.Error(), "TOOLEXEC_RETENTION") {
		t.Fatalf("bad variable: %v", err)
	}
}

func TestCheck(t *testing.T) {
	base := func() config {
		var c config
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		c.register(fs)
		c.demo = true
		return c
	}
	tests := []struct {
		name string
		edit func(*config)
		want string
	}{
		{"no tools", func(c *config) { c.demo, c.workers.on = false, false }, "no tools"},
		{"zero workers interval", func(c *config) { c.workers.interval = 0 }, "--workers-interval"},
		{"negative workers window", func(c *config) { c.workers.window = -time.Second }, "--workers-window"},
		{"unknown store", func(c *config) { c.store.Kind = "etcd" }, "etcd"},
		{"postgres without url", func(c *config) { c.store.Kind = "postgres" }, "--postgres-url"},
		{"redis without url", func(c *config) { c.store.Kind = "redis" }, "--redis-url"},
		{"lease not below retention", func(c *config) { c.lease = c.store.Retention }, "shorter"},
		{"zero concurrency", func(c *config) { c.concurrency = 0 }, "concurrency"},
		{"zero postgres batch", func(c *config) { c.store.PostgresMaxBatch = 0 }, "--postgres-max-batch"},
		{"log format", func(c *config) { c.logFormat = "xml" }, "log-format"},
		{"zero max members", func(c *config) { c.limits.Members = 0 }, "--max-members"},
		{"zero max elements", func(c *config) { c.limits.Elements = 0 }, "--max-elements"},
		{"negative max values", func(c *config) { c.limits.Values = -1 }, "--max-values"},
		{"zero in-flight memory", func(c *config) { c.inflightMiB = 0 }, "--max-inflight-memory-mib"},
		{"negative nats wait", func(c *config) { c.natsWait = -time.Second }, "--nats-wait"},
		{"negative awaiting interval", func(c *config) { c.awaitingInterval = -time.Second }, "--awaiting-interval"},
		{"admin account on the embedded server", func(c *config) { c.adminAccount = "ADMIN" }, "--admin-account needs --server"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := base()
			tt.edit(&c)
			if err := c.check(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("check() = %v; want an error mentioning %q", err, tt.want)
			}
		})
	}
	c := base()
	if err := c.check(); err != nil {
		t.Fatalf("defaults with --demo: %v", err)
	}
	c.demo = false
	if err := c.check(); err != nil {
		t.Fatalf("no tools of its own, learning the workers' (the default): %v", err)
	}
	c = base()
	c.conn.Server, c.adminAccount = "nats://127.0.0.1:4222", "ADMIN"
	if err := c.check(); err != nil {
		t.Fatalf("--admin-account with --nats-url: %v", err)
	}
}

// TestPortTaken: the embedded server refuses an occupied port and says how to
// choose another or use the server that holds it.
func TestPortTaken(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--demo", "--data-dir", t.TempDir(), "--nats-port", fmt.Sprint(port)})
	err = cmd.ExecuteContext(context.Background())
	if !errors.Is(err, embedded.ErrPortInUse) {
		t.Fatalf("err = %v; want ErrPortInUse", err)
	}
	for _, hint := range []string{fmt.Sprint(port), "--nats-port", "--server"} {
		if !strings.Contains(err.Error(), hint) {
			t.Errorf("error %q does not mention %q", err, hint)
		}
	}
}

// syncBuffer is an io.Writer safe for the executor's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startExecutor runs the executor command with args (plus an embedded server on
// a free port) and returns the client URL once it is ready, and a stop function
// that shuts it down gracefully and returns Run's error.
func startExecutor(t *testing.T, args ...string) (string, func() error) {
	t.Helper()
	return startExecutorWith(t, nil, args...)
}

// startExecutorWith is startExecutor with the executor's log writer chosen by
// setLog (default os.Stderr).
func startExecutorWith(t *testing.T, setLog func(*io.Writer), args ...string) (string, func() error) {
	t.Helper()
	l := launchExecutor(t, setLog, args...)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(l.out.String(), "ready") {
		select {
		case <-l.done:
			t.Fatalf("executor exited before it was ready: %v\n%s", l.err, l.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("executor not ready after 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	line := l.out.String()
	i := strings.Index(line, "nats=")
	url := strings.Fields(line[i+len("nats="):])[0]
	return url, l.stop
}

// launched is an executor command running in-process.
type launched struct {
	out    *syncBuffer // its standard output
	cancel context.CancelFunc
	done   chan struct{} // closed when the command has returned
	err    error         // what it returned, once done is closed
}

// launchExecutor starts the executor command with args (plus an embedded server
// on a free port, unless args give --nats-url) and returns at once; the test's
// end stops it.
func launchExecutor(t *testing.T, setLog func(*io.Writer), args ...string) *launched {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := newCommand()
	l := &launched{out: &syncBuffer{}, cancel: cancel, done: make(chan struct{})}
	cmd.SetOut(l.out)
	var logOut io.Writer = os.Stderr
	if setLog != nil {
		setLog(&logOut)
	}
	cmd.SetErr(logOut)
	cmd.SetArgs(append([]string{"--data-dir", t.TempDir(), "--nats-port", "-1", "--log-level", "warn"}, args...))
	go func() {
		defer close(l.done)
		l.err = cmd.ExecuteContext(ctx)
	}()
	t.Cleanup(func() { _ = l.stop() })
	return l
}

// result returns what the command returned, or an error if it has not
// returned within timeout.
func (l *launched) result(timeout time.Duration) error {
	select {
	case <-l.done:
		return l.err
	case <-time.After(timeout):
		return fmt.Errorf("executor still running after %v", timeout)
	}
}

// stop shuts the executor down gracefully and returns what it returned.
func (l *launched) stop() error {
	l.cancel()
	return l.result(45 * time.Second)
}

func client(t *testing.T, url string) *toolexec.Client {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := toolexec.NewClient(nc, toolexec.WithDefaultRunID("run_1"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// call calls book for acme and returns the answer, whatever its kind.
func call(t *testing.T, c *toolexec.Client, callID, args string) events.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := c.Call(ctx, "acme", "book", json.RawMessage(args), toolexec.WithFreshCallID(callID))
	if a == nil {
		t.Fatalf("call %s: %v", callID, err)
	}
	return *a
}

// threeOutcomes drives the demo airline through a running executor: a booking,
// its retry, and a booking whose answer is lost.
func threeOutcomes(t *testing.T, url string) {
	t.Helper()
	c := client(t, url)
	if a := call(t, c, "c1", `{"flight":"BA117","seats":1,"request_id":"a"}`); a.Kind != events.KindCompleted {
		t.Fatalf("first booking: %+v", a)
	}
	if a := call(t, c, "c2", `{"flight":"BA117","seats":1,"request_id":"b"}`); a.Kind != events.KindDeduplicated {
		t.Fatalf("retry: %+v", a)
	}
	if a := call(t, c, "c3", `{"flight":"BA999","seats":1,"request_id":"c","fail_after_effect":true}`); a.Kind != events.KindIndeterminate || a.Reason != events.ReasonBodyFailed {
		t.Fatalf("lost answer: %+v", a)
	}
}

func TestRunEmbeddedDemo(t *testing.T) {
	url, stop := startExecutor(t, "--demo", "--health-addr", "127.0.0.1:0")
	threeOutcomes(t, url)
	if err := stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
}

func TestHealth(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	startExecutor(t, "--demo", "--health-addr", addr)
	for _, path := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", path, resp.StatusCode, body)
		}
	}
}

func TestRunWithPostgres(t *testing.T) {
	pgURL := testenv.PostgresURL(t)
	schema := fmt.Sprintf("toolexec_exec_%d", time.Now().UnixNano())
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), pgURL)
		if err == nil {
			_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			conn.Close(context.Background())
		}
	})
	addr := testenv.FreeAddr(t)
	url, _ := startExecutor(t, "--demo", "--store", "postgres", "--postgres-url", pgURL, "--postgres-schema", schema, "--ensure-schema", "--metrics-addr", addr)
	threeOutcomes(t, url)
	// One call at a time: every write went alone, and the group commit
	// counters say so.
	_, body := httpGet(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		`toolexec_store_group_commits_total{store="postgres"} 0`,
		`toolexec_store_group_commit_writes_total{store="postgres"} 0`,
		`toolexec_store_group_commits_refused_total{store="postgres"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestRunWithRedis(t *testing.T) {
	redisURL := testenv.RedisURL(t)
	url, _ := startExecutor(t, "--demo", "--store", "redis", "--redis-url", redisURL, "--redis-prefix", fmt.Sprintf("toolexec-exec-%d", time.Now().UnixNano()))
	threeOutcomes(t, url)
}

func TestBadConfigExitsBeforeStarting(t *testing.T) {
	cmd := newCommand()
	cmd.SetOut(io.Discard)
	cmd.SetArgs([]string{"--store", "postgres", "--demo"})
	err := cmd.ExecuteContext(context.Background())
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--postgres-url") {
		t.Fatalf("err = %v; want a usage error naming --postgres-url", err)
	}
}
