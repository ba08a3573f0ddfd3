package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/app/storeflags"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore/memstore"
)

func httpGet(t *testing.T, url string, header ...string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const argSentinel = "ARG-SENTINEL-4471"

// sentinelCalls makes the demo's three outcomes, and a rejection, with the
// sentinel among every call's arguments.
func sentinelCalls(t *testing.T, url string) {
	t.Helper()
	c := client(t, url)
	for _, tc := range []struct {
		id, args string
		kind     events.Kind
	}{
		{"c1", `{"flight":"BA117","seats":1,"request_id":"` + argSentinel + `"}`, events.KindCompleted},
		{"c2", `{"flight":"BA117","seats":1,"request_id":"` + argSentinel + `-2"}`, events.KindDeduplicated},
		{"c3", `{"flight":"BA999","seats":1,"request_id":"` + argSentinel + `","fail_after_effect":true}`, events.KindIndeterminate},
		{"c4", `{"flight":"BA117","seats":"` + argSentinel + `"}`, events.KindRejected},
	} {
		if a := call(t, c, tc.id, tc.args); a.Kind != tc.kind {
			t.Fatalf("call %s: %+v, want %s", tc.id, a, tc.kind)
		}
	}
}

// TestMetricsEndpoint: /metrics on --metrics-addr counts the calls by tool and
// kind, the indeterminate ones by reason, and times every store operation;
// no label holds arguments, keys, run ids or call ids.
func TestMetricsEndpoint(t *testing.T) {
	addr := testenv.FreeAddr(t)
	url, _ := startExecutor(t, "--demo", "--metrics-addr", addr)
	sentinelCalls(t, url)
	code, body := httpGet(t, "http://"+addr+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`toolexec_calls_total{kind="completed",tool="book"} 1`,
		`toolexec_calls_total{kind="deduplicated",tool="book"} 1`,
		`toolexec_calls_total{kind="indeterminate",tool="book"} 1`,
		`toolexec_calls_total{kind="rejected",tool="book"} 1`,
		`toolexec_deduplicated_total{tool="book"} 1`,
		`toolexec_indeterminate_total{reason="body_failed",tool="book"} 1`,
		`toolexec_bodies_entered_total{tool="book"} 2`,
		`toolexec_calls_in_flight{tool="book"} 0`,
		`toolexec_messages_received_total 4`,
		`toolexec_store_operation_duration_seconds_count{operation="claim",store="jetstream"} 3`,
		`toolexec_store_operation_duration_seconds_count{operation="record",store="jetstream"} 1`,
		`go_goroutines`,
		`process_cpu_seconds_total`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	labels := regexp.MustCompile(`\{[^}]*\}`)
	var series []string
	for _, line := range strings.Split(body, "\n") {
		// The gauges of keys awaiting decision are by tenant, on purpose.
		if !strings.HasPrefix(line, "toolexec_keys_awaiting_decision") {
			series = append(series, line)
		}
	}
	for _, set := range labels.FindAllString(strings.Join(series, "\n"), -1) {
		for _, bad := range []string{argSentinel, "run_1", `"c1"`, `"c3"`, "acme", "BA117"} {
			if strings.Contains(set, bad) {
				t.Errorf("a label set holds %q: %s", bad, set)
			}
		}
		if regexp.MustCompile(`[0-9a-f]{64}`).MatchString(set) {
			t.Errorf("a label set holds a key: %s", set)
		}
	}
}

// TestHealthAddrAlias: --health-addr and TOOLEXEC_HEALTH_ADDR still set the
// address, unless the new name is given.
func TestHealthAddrAlias(t *testing.T) {
	parse := func(args []string, env map[string]string) config {
		t.Helper()
		var c config
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		c.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := applyEnv(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"old flag", []string{"--health-addr", "a:1"}, nil, "a:1"},
		{"new flag", []string{"--metrics-addr", "b:2"}, nil, "b:2"},
		{"old variable", nil, map[string]string{"TOOLEXEC_HEALTH_ADDR": "c:3"}, "c:3"},
		{"new variable wins", nil, map[string]string{"TOOLEXEC_HEALTH_ADDR": "c:3", "TOOLEXEC_METRICS_ADDR": "d:4"}, "d:4"},
		{"old flag over new variable", []string{"--health-addr", "a:1"}, map[string]string{"TOOLEXEC_METRICS_ADDR": "d:4"}, "a:1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := parse(tt.args, tt.env).metricsAddr; got != tt.want {
				t.Errorf("metrics address %q, want %q", got, tt.want)
			}
		})
	}
}

// TestReadiness: /readyz is 200 while NATS is connected and the store
// answers, and 503, naming the cause, when the store cannot be reached or the
// NATS connection is lost; /healthz stays 200.
func TestReadiness(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	store := memstore.New(memstore.Config{})
	h := httptest.NewServer(opsHandler(runningWith(nc, store), prometheus.NewRegistry()))
	defer h.Close()

	if code, body := httpGet(t, h.URL+"/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Fatalf("/readyz while all is well: %d %q", code, body)
	}
	store.Close() // the store can no longer be reached
	if code, body := httpGet(t, h.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "store:") {
		t.Fatalf("/readyz with the store away: %d %q", code, body)
	}

	store2 := memstore.New(memstore.Config{})
	t.Cleanup(func() { store2.Close() })
	h2 := httptest.NewServer(opsHandler(runningWith(nc, store2), prometheus.NewRegistry()))
	defer h2.Close()
	natstest.Shutdown(srv)
	wait.Until(10*time.Second, func() bool { return !nc.IsConnected() })
	if code, body := httpGet(t, h2.URL+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "nats:") {
		t.Fatalf("/readyz with NATS gone: %d %q", code, body)
	}
	if code, _ := httpGet(t, h2.URL+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d", code)
	}
}

// TestLogsNeverHoldArguments runs calls of every kind through the executor
// with JSON logs at debug level: every line is JSON, none holds an argument,
// and every answer is logged with tenant, tool, run, call, kind (and reason and
// key where it has them).
func TestLogsNeverHoldArguments(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			var logs syncBuffer
			url, stop := startExecutorLogging(t, &logs, "--demo", "--log-format", format, "--log-level", "debug")
			sentinelCalls(t, url)
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			answered := map[string]string{}
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				if strings.Contains(line, argSentinel) || strings.Contains(line, "BA117") {
					t.Errorf("a log line holds the call's arguments: %s", line)
				}
				fields := map[string]string{}
				if format == "json" {
					var m map[string]any
					if err := json.Unmarshal([]byte(line), &m); err != nil {
						t.Fatalf("not a JSON line: %s", line)
					}
					for k, v := range m {
						fields[k] = fmt.Sprint(v)
					}
				} else {
					for _, kv := range regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`).FindAllStringSubmatch(line, -1) {
						fields[kv[1]] = strings.Trim(kv[2], `"`)
					}
				}
				if fields["kind"] == "" || fields["call_id"] == "" {
					continue
				}
				if fields["tenant"] != "acme" || fields["tool"] != "book" || fields["run_id"] != "run_1" {
					t.Errorf("answer logged without its addressing: %s", line)
				}
				if fields["kind"] != "rejected" && len(fields["key"]) != 64 {
					t.Errorf("answer logged without its key: %s", line)
				}
				if fields["kind"] == "indeterminate" && fields["reason"] != "body_failed" {
					t.Errorf("indeterminate answer logged without its reason: %s", line)
				}
				answered[fields["call_id"]] = fields["kind"]
			}
			want := map[string]string{"c1": "completed", "c2": "deduplicated", "c3": "indeterminate", "c4": "rejected"}
			for id, kind := range want {
				if answered[id] != kind {
					t.Errorf("call %s logged as %q, want %q", id, answered[id], kind)
				}
			}
		})
	}
}

// startExecutorLogging is startExecutor with the executor's log going to logs.
func startExecutorLogging(t *testing.T, logs io.Writer, args ...string) (string, func() error) {
	t.Helper()
	return startExecutorWith(t, func(cmdErr *io.Writer) { *cmdErr = logs }, args...)
}

// TestConsole: --console-addr needs a token; the console it serves lets no
// one in without it, and lets the token in.
func TestConsole(t *testing.T) {
	c := config{console: consoleFlags{addr: "127.0.0.1:0"}, store: storeflags.Flags{Kind: storeflags.Memory, Retention: time.Hour}, demo: true, concurrency: 1, lease: time.Second, logFormat: "text"}
	if err := c.check(); err == nil || !strings.Contains(err.Error(), "TOOLEXEC_CONSOLE_TOKEN") {
		t.Fatalf("check without a console token = %v", err)
	}
	c.console.token = "tok-123"
	if err := c.check(); err == nil || !strings.Contains(err.Error(), "at least 24") {
		t.Fatalf("check with a 7-character console token = %v", err)
	}
	addr := testenv.FreeAddr(t)
	t.Setenv("TOOLEXEC_CONSOLE_TOKEN", "tok-123-of-twenty-four-characters")
	startExecutor(t, "--demo", "--console-addr", addr)
	if code, body := httpGet(t, "http://"+addr+"/login"); code != http.StatusOK || !strings.Contains(body, `name="token"`) {
		t.Fatalf("/login: %d", code)
	}
	if code, _ := httpGet(t, "http://"+addr+"/?tenant=acme"); code != http.StatusSeeOther {
		t.Fatalf("/ without the token: %d, want a redirect to sign in", code)
	}
	if code, _ := httpGet(t, "http://"+addr+"/?tenant=acme", "Authorization", "Bearer wrong"); code == http.StatusOK {
		t.Fatal("/ with a wrong token: 200")
	}
	if code, body := httpGet(t, "http://"+addr+"/?tenant=acme", "Authorization", "Bearer tok-123-of-twenty-four-characters"); code != http.StatusOK || !strings.Contains(body, "nothing of acme waits") {
		t.Fatalf("/ with the token: %d", code)
	}
}
