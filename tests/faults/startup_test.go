package faults_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

// TestExecutorsStartBeforeNATS starts three executor processes while nothing
// listens at their NATS URL, as docker-compose and Kubernetes often do. Each
// one waits: /healthz answers 200, /readyz 503 naming the URL it waits for
// and why, and that its store has not started. Then the server starts on that
// port: every executor connects, turns ready, and the calls published from
// then on are all answered — none indeterminate, since no fault is recorded —
// and the checker passes. The long suite waits long enough for the pauses
// between attempts to reach their ceiling (5 s).
func TestExecutorsStartBeforeNATS(t *testing.T) {
	parallel(t)
	ports := freeTCPPorts(t, 4)
	url := fmt.Sprintf("nats://127.0.0.1:%d", ports[0])
	s := prepareScenario(t, "startup", url, 1)
	ctx := ctxFor(t, pick(2*time.Minute, 10*time.Minute))
	wait := pick(2*time.Second, 12*time.Second)
	keys, perKey, rate := pick(100, 1000), 4, pick(200, 300)

	// The server stops after the executors (cleanups run last first): an
	// executor told to stop drains its calls over NATS.
	var srv *server.Server
	t.Cleanup(func() { natstest.Shutdown(srv) })
	ops := make([]string, 3)
	execs := make([]*executor, 3)
	for i := range execs {
		ops[i] = fmt.Sprintf("127.0.0.1:%d", ports[i+1])
		execs[i] = s.launch(fmt.Sprintf("x%d", i), "--concurrency", "16", "--metrics-addr", ops[i])
	}
	for i, addr := range ops {
		code, body := waitReadyz(t, addr, func(code int, body string) bool {
			return code == http.StatusServiceUnavailable && strings.Contains(body, "nats: waiting for first connection to "+url+" (")
		})
		if !strings.Contains(body, "store: not started (waiting for NATS)") {
			t.Errorf("x%d /readyz while NATS is down: %d %q, want the store not started", i, code, body)
		}
		if code, body := get(addr, "/healthz"); code != http.StatusOK {
			t.Errorf("x%d /healthz while NATS is down: %d %q", i, code, body)
		}
		s.step("x%d waits: /readyz %d %q", i, code, strings.TrimSpace(body))
	}
	time.Sleep(wait)
	for i, e := range execs {
		select {
		case <-e.ready:
			t.Fatalf("x%d ready with no NATS server", i)
		case <-e.exited:
			t.Fatalf("x%d exited while waiting for NATS: %v\n%s", i, e.waitErr, tail(e.logPath, 20))
		default:
		}
	}

	up := time.Now()
	srv, err := natstest.RunServer(t.TempDir(), natstest.SyncAlways(), func(o *server.Options) { o.Port = ports[0] })
	if err != nil {
		t.Fatal(err)
	}
	s.step("NATS started on port %d, %v after the executors", ports[0], wait)
	for i, e := range execs {
		e.waitReady(t, time.Minute)
		waitReadyz(t, ops[i], func(code int, body string) bool { return code == http.StatusOK && body == "ready\n" })
		s.step("x%d ready %v after NATS started", i, time.Since(up).Round(time.Millisecond))
	}
	s.connect(1)

	calls := plan("u", keys, perKey)
	s.pub.Rate = rate
	if err := <-s.publish(ctx, calls); err != nil {
		t.Fatal(err)
	}
	s.step("all %d calls published (%d retries)", len(calls), s.pub.Retries())
	rep := s.finish(ctx)
	if rep.Calls != len(calls) {
		t.Errorf("recorded %d calls, want %d", rep.Calls, len(calls))
	}
	if n := rep.Answered() - rep.Answers["completed"] - rep.Answers["deduplicated"]; n != 0 {
		t.Errorf("%d answers neither completed nor deduplicated", n)
	}
	for _, e := range execs {
		b, err := os.ReadFile(e.logPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`msg="NATS not reachable; waiting for it"`, `msg="connected to NATS after `} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s's log lacks %s", e.name, want)
			}
		}
		if _, after, ok := strings.Cut(string(b), `msg="connected to NATS after `); ok {
			line, _, _ := strings.Cut(after, `"`)
			s.step("%s connected after %s", e.name, line)
		}
	}
}

// waitReadyz polls /readyz on addr until ok accepts its answer, and returns
// that answer; it fails the test after 30 s.
func waitReadyz(t *testing.T, addr string, ok func(code int, body string) bool) (int, string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get(addr, "/readyz")
		if ok(code, body) {
			return code, body
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz on %s: %d %q after 30s", addr, code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get GETs path on addr; a failed request is status 0 with the error as body.
func get(addr, path string) (int, string) {
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
