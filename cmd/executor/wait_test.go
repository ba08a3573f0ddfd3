package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/tesserix/toolexec/internal/clock"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/tool"
)

func TestRedactNATSURL(t *testing.T) {
	tests := []struct{ give, want string }{
		{"nats://n1:4222", "nats://n1:4222"},
		{"nats://exec:s3cret@n1:4222", "nats://exec:xxxxx@n1:4222"},
		{"nats://tok3n@n1:4222", "nats://xxxxx@n1:4222"},
		{"n1:4222", "n1:4222"},
		{"exec:s3cret@n1:4222", "nats://exec:xxxxx@n1:4222"},
		{"nats://a:pw@n1:4222, tls://n2:4222,nats://tok@n3:4222", "nats://a:xxxxx@n1:4222,tls://n2:4222,nats://xxxxx@n3:4222"},
		{"nats://a:pw@[::1", "(unparsable URL)"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got := redactNATSURL(tt.give)
			if got != tt.want {
				t.Errorf("redactNATSURL(%q) = %q, want %q", tt.give, got, tt.want)
			}
			for _, secret := range []string{"s3cret", "tok3n", ":pw@", "tok@"} {
				if strings.Contains(got, secret) {
					t.Errorf("redactNATSURL(%q) = %q shows %q", tt.give, got, secret)
				}
			}
		})
	}
}

// fakeNATS is a connection whose state the test sets.
type fakeNATS struct{ up bool }

func (f fakeNATS) IsConnected() bool { return f.up }

func (f fakeNATS) Status() nats.Status {
	if f.up {
		return nats.CONNECTED
	}
	return nats.RECONNECTING
}

// TestReadinessStages: /readyz through the executor's start: before the first
// connection (with and without a reported wait), connected but not yet set up,
// running, and running with the connection lost.
func TestReadinessStages(t *testing.T) {
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { store.Close() })
	tests := []struct {
		name      string
		wait      string
		nc        natsStatus
		store     kvstore.Store
		conflicts fakeConflicts
		code      int
		want      string
	}{
		{"nothing yet", "", nil, nil, nil, http.StatusServiceUnavailable,
			"nats: not connected yet\nstore: not started (waiting for NATS)\n"},
		{"waiting", "waiting for first connection to nats://n1:4222 (3 attempts; last error: nats: no servers available for connection)", nil, nil, nil,
			http.StatusServiceUnavailable,
			"nats: waiting for first connection to nats://n1:4222 (3 attempts; last error: nats: no servers available for connection)\nstore: not started (waiting for NATS)\n"},
		{"connected, setting up", "waiting for first connection to nats://n1:4222 (3 attempts; last error: x)", fakeNATS{up: true}, nil, nil,
			http.StatusServiceUnavailable, "store: not started (setting up the streams and the store)\n"},
		{"running", "", fakeNATS{up: true}, store, nil, http.StatusOK, "ready\n"},
		{"running, connection lost", "", fakeNATS{up: false}, store, nil, http.StatusServiceUnavailable, "nats: RECONNECTING\n"},
		{"running, a tool in conflict", "", fakeNATS{up: true}, store, fakeConflicts{{Tool: "book", Msg: "workers differ"}}, http.StatusOK,
			"ready\ntool conflict: tool \"book\" is not served while its declarations conflict: workers differ\n"},
		{"connection lost, two tools in conflict", "", fakeNATS{up: false}, store,
			fakeConflicts{{Tool: "book", Msg: "a"}, {Tool: "echo", Msg: "b"}}, http.StatusServiceUnavailable,
			"nats: RECONNECTING\ntool conflict: tool \"book\" is not served while its declarations conflict: a\n" +
				"tool conflict: tool \"echo\" is not served while its declarations conflict: b\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &readiness{}
			if tt.wait != "" {
				r.waiting(tt.wait)
			}
			if tt.nc != nil {
				r.connected(tt.nc)
			}
			if tt.store != nil {
				r.running(tt.store, tt.conflicts)
			}
			h := httptest.NewServer(opsHandler(r, prometheus.NewRegistry()))
			defer h.Close()
			if code, body := httpGet(t, h.URL+"/readyz"); code != tt.code || body != tt.want {
				t.Errorf("/readyz: %d %q, want %d %q", code, body, tt.code, tt.want)
			}
			if code, body := httpGet(t, h.URL+"/healthz"); code != http.StatusOK || body != "ok\n" {
				t.Errorf("/healthz: %d %q", code, body)
			}
		})
	}
}

// fakeConflicts stands for an executor withholding these tools.
type fakeConflicts []*tool.ConflictError

func (f fakeConflicts) Conflicts() []*tool.ConflictError { return f }

// runningWith is the readiness of an executor running on nc and store.
func runningWith(nc natsStatus, store kvstore.Store) *readiness {
	r := &readiness{}
	r.connected(nc)
	r.running(store, fakeConflicts(nil))
	return r
}

// TestWaitReport: the first failure is logged at once, then one line at most
// every waitLogInterval however often the attempts fail; /readyz always has
// the latest; the connection is logged with the attempts and the wait.
func TestWaitReport(t *testing.T) {
	var logs bytes.Buffer
	fake := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ready := &readiness{}
	w := &waitReport{url: "nats://n1:4222", log: slog.New(slog.NewTextHandler(&logs, nil)), ready: ready, clock: fake, start: fake.Now()}
	for n := 1; n <= 20; n++ { // 20 failures 5s apart: 95s of waiting
		w.failed(n, fmt.Errorf("failure %d", n))
		fake.Advance(5 * time.Second)
	}
	w.connected()
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	want := []string{
		`level=WARN msg="NATS not reachable; waiting for it" url=nats://n1:4222 error="failure 1"`,
		`level=WARN msg="still waiting for NATS" url=nats://n1:4222 attempts=7 waited=30s last_error="failure 7"`,
		`level=WARN msg="still waiting for NATS" url=nats://n1:4222 attempts=13 waited=1m0s last_error="failure 13"`,
		`level=WARN msg="still waiting for NATS" url=nats://n1:4222 attempts=19 waited=1m30s last_error="failure 19"`,
		`level=INFO msg="connected to NATS after 21 attempts, waited 1m40s" url=nats://n1:4222`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d log lines, want %d:\n%s", len(lines), len(want), logs.String())
	}
	for i, line := range lines {
		if !strings.HasSuffix(line, want[i]) {
			t.Errorf("line %d: %s\nwant it to end with %s", i+1, line, want[i])
		}
	}
	if problems := ready.problems(context.Background()); problems[0] != "nats: waiting for first connection to nats://n1:4222 (20 attempts; last error: failure 20)" {
		t.Errorf("readiness: %q", problems)
	}

	logs.Reset()
	(&waitReport{url: "nats://n1:4222", log: slog.New(slog.NewTextHandler(&logs, nil)), ready: ready, clock: fake}).connected()
	if logs.Len() != 0 {
		t.Errorf("a first-time connection was logged as the end of a wait: %s", logs.String())
	}
}

// tryGet is httpGet that reports a failed request as status 0, for polling a
// server that may not listen yet.
func tryGet(url string) (int, string) {
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitLimit is how long these tests wait for what they poll.
const waitLimit = 30 * time.Second

// onAddr starts a test server on addr's port.
func onAddr(t *testing.T, addr string) natstest.Option {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return func(o *server.Options) { _, _ = fmt.Sscan(port, &o.Port) }
}

// readyzWaiting waits until /readyz on opsAddr is 503 and names the wait for
// the first connection to url.
func readyzWaiting(t *testing.T, opsAddr, url string) {
	t.Helper()
	var code int
	var body string
	wait.Eventually(t, waitLimit, "/readyz to name the wait", func() bool {
		code, body = tryGet("http://" + opsAddr + "/readyz")
		return code == http.StatusServiceUnavailable &&
			strings.Contains(body, "nats: waiting for first connection to "+url+" (") &&
			strings.Contains(body, "attempts; last error: nats: no servers available for connection)") &&
			strings.Contains(body, "store: not started (waiting for NATS)")
	})
	if code, body := tryGet("http://" + opsAddr + "/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz while waiting: %d %q", code, body)
	}
}

// TestWaitsForNATS starts the executor before its NATS server: it waits,
// /readyz says so, and once the server is up on that port the executor
// connects, turns ready and answers calls.
func TestWaitsForNATS(t *testing.T) {
	natsAddr, opsAddr := testenv.FreeAddr(t), testenv.FreeAddr(t)
	url := "nats://" + natsAddr
	var logs syncBuffer
	l := launchExecutor(t, func(w *io.Writer) { *w = &logs }, "--demo", "--nats-url", url, "--metrics-addr", opsAddr, "--log-level", "info")
	readyzWaiting(t, opsAddr, url)
	if strings.Contains(l.out.String(), "ready") {
		t.Fatalf("ready before NATS is up: %s", l.out)
	}

	natstest.Start(t, onAddr(t, natsAddr))
	wait.Eventually(t, waitLimit, "/readyz to turn 200", func() bool {
		code, body := tryGet("http://" + opsAddr + "/readyz")
		return code == http.StatusOK && body == "ready\n"
	})
	threeOutcomes(t, url)
	if err := l.stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	for _, want := range []string{
		`level=WARN msg="NATS not reachable; waiting for it" url=` + url + ` error="nats: no servers available for connection"`,
		`level=INFO msg="connected to NATS after `,
		"toolexec executor ready: nats=" + url,
	} {
		if !strings.Contains(logs.String()+l.out.String(), want) {
			t.Errorf("output lacks %s:\n%s%s", want, logs.String(), l.out)
		}
	}
}

// TestStopWhileWaitingForNATS: told to stop while it waits, the executor
// returns no error, leaves no goroutine behind, and frees its ops address.
func TestStopWhileWaitingForNATS(t *testing.T) {
	before := runtime.NumGoroutine()
	opsAddr := testenv.FreeAddr(t)
	url := "nats://" + testenv.FreeAddr(t)
	var logs syncBuffer
	l := launchExecutor(t, func(w *io.Writer) { *w = &logs }, "--demo", "--nats-url", url, "--metrics-addr", opsAddr, "--log-level", "info")
	readyzWaiting(t, opsAddr, url)
	l.cancel()
	// The bound only fences a hang: a wait ends within its current pause (5s at
	// most) and attempt.
	if err := l.result(20 * time.Second); err != nil {
		t.Fatalf("stopped while waiting: %v", err)
	}
	if !strings.Contains(logs.String(), `msg="stopped before NATS could be reached"`) || strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("log:\n%s", logs.String())
	}
	if strings.Contains(l.out.String(), "ready") {
		t.Errorf("said ready: %s", l.out)
	}
	if code, body := tryGet("http://" + opsAddr + "/healthz"); code != 0 {
		t.Errorf("the ops endpoint still answers: %d %q", code, body)
	}
	if !wait.Until(10*time.Second, func() bool { return runtime.NumGoroutine() <= before }) {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
	}
}

// TestNATSErrorsFailAtOnce: what waiting cannot cure ends the executor at once
// with an error (exit status 1) that names it, whether a server listens or not.
func TestNATSErrorsFailAtOnce(t *testing.T) {
	srv := natstest.Start(t, func(o *server.Options) { o.Username, o.Password = "exec", "pw" })
	down := "nats://" + testenv.FreeAddr(t)
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name string
		args []string
		is   error  // nil: no sentinel
		want string // in the message
	}{
		{"wrong password", []string{"--nats-url", srv.ClientURL(), "--nats-user", "exec", "--nats-password", "guess"}, nats.ErrAuthorization, "Authorization Violation"},
		{"no credentials", []string{"--nats-url", srv.ClientURL()}, nats.ErrAuthorization, "Authorization Violation"},
		{"creds file missing", []string{"--nats-url", down, "--nats-creds", missing}, os.ErrNotExist, missing},
		{"client certificate missing", []string{"--nats-url", down, "--tls-cert", missing, "--tls-key", missing}, os.ErrNotExist, "client certificate"},
		{"bad URL", []string{"--nats-url", "nats://127.0.0.1:port"}, nil, `invalid port ":port"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs syncBuffer
			l := launchExecutor(t, func(w *io.Writer) { *w = &logs }, append([]string{"--demo", "--log-level", "info"}, tt.args...)...)
			// Not stopped: it must end by itself (the bound fences a wait).
			err := l.result(30 * time.Second)
			var ue usageError
			if err == nil || errors.As(err, &ue) || !strings.Contains(err.Error(), "connecting to NATS at ") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v; want a run error (exit 1) naming %q", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v; want it to match %v", err, tt.is)
			}
			if strings.Contains(logs.String(), "waiting") {
				t.Errorf("it waited:\n%s", logs.String())
			}
		})
	}
}

// TestNATSWaitGivesUp: with --nats-wait, the executor gives up after that long
// with an error (exit status 1) naming the flag and the last failure.
func TestNATSWaitGivesUp(t *testing.T) {
	url := "nats://" + testenv.FreeAddr(t)
	l := launchExecutor(t, nil, "--demo", "--nats-url", url, "--nats-wait", "300ms")
	err := l.result(30 * time.Second)
	var ue usageError
	if err == nil || errors.As(err, &ue) {
		t.Fatalf("err = %v; want a run error (exit 1)", err)
	}
	for _, want := range []string{"NATS at " + url + " not reachable within --nats-wait 300ms", "no servers available"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nats.ErrNoServers) {
		t.Errorf("err = %v; want DeadlineExceeded and ErrNoServers", err)
	}
}

// TestReadyLineHidesThePassword: a password in --nats-url never reaches the
// log or the ready line, which name the server with the password masked.
func TestReadyLineHidesThePassword(t *testing.T) {
	const secret = "s3cret-pw"
	natsAddr := testenv.FreeAddr(t)
	natstest.Start(t, onAddr(t, natsAddr), func(o *server.Options) { o.Username, o.Password = "exec", secret })
	url := "nats://exec:" + secret + "@" + natsAddr
	var logs syncBuffer
	l := launchExecutor(t, func(w *io.Writer) { *w = &logs }, "--demo", "--nats-url", url, "--log-level", "info")
	wait.Eventually(t, waitLimit, "the ready line", func() bool { return strings.Contains(l.out.String(), "toolexec executor ready") })
	if err := l.stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	all := logs.String() + l.out.String()
	if strings.Contains(all, secret) {
		t.Fatalf("the output shows the password:\n%s", all)
	}
	for _, want := range []string{`msg="executor ready" nats=nats://exec:xxxxx@` + natsAddr, "toolexec executor ready: nats=nats://exec:xxxxx@" + natsAddr} {
		if !strings.Contains(all, want) {
			t.Errorf("output lacks %s:\n%s", want, all)
		}
	}
}
