package faults_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/clienttest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/tests/faults"
	"github.com/tesserix/toolexec/tool"
)

// The tools every scenario serves, both pointing at the witness.
const (
	toolBook = "book"     // Effectful, keyed by flight
	toolSeat = "set_seat" // Idempotent, keyed by passenger
	tenant   = "acme"
	runID    = "r1"
)

var policies = map[string]faults.Policy{
	toolBook: {Kind: tool.Effectful, KeyArguments: []string{"flight"}},
	toolSeat: {Kind: tool.Idempotent, KeyArguments: []string{"passenger"}},
}

// Timing every executor of the suite runs with: short leases and ack waits, so
// that a dead holder is noticed in seconds.
const (
	lease   = 2 * time.Second
	ackWait = 2 * time.Second
)

// pick returns short in the short suite and long in the long one.
func pick[T any](short, lng T) T {
	if long {
		return lng
	}
	return short
}

// parallel runs the scenario beside the others in the short suite, where time
// is short; the long suite runs them one after another, so that each one's
// figures are its own.
func parallel(t *testing.T) {
	if !long {
		t.Parallel()
	}
}

// toolsYAML is the tools file of the executor named executor: both tools at its
// own URLs of the witness.
func toolsYAML(w *faults.Witness, executor string) string {
	return fmt.Sprintf(`tools:
  - name: %s
    description: Take a seat; a second request is a second booking.
    idempotency: {kind: effectful, key_arguments: [flight]}
    timeout: 60s
    parameters:
      type: object
      properties: {flight: {type: string}, request_id: {type: string}}
      required: [flight]
    http: {url: %q}
  - name: %s
    description: Set a passenger's seat; repeating it lands the same state.
    idempotency: {kind: idempotent, key_arguments: [passenger]}
    timeout: 60s
    retry: {max_attempts: 3, initial_backoff: 100ms, max_backoff: 1s}
    parameters:
      type: object
      properties: {passenger: {type: string}, seat: {type: string}, request_id: {type: string}}
      required: [passenger, seat]
    http: {url: %q}
`, toolBook, w.URL(executor, toolBook), toolSeat, w.URL(executor, toolSeat))
}

// plan returns keys×perKey calls named after prefix: even keys book, odd keys
// set_seat. Keys come in blocks of eight: every key of a block gets its n-th
// call before any gets its (n+1)-th, so that duplicates of a key arrive while
// its first call is still running, and new keys keep arriving throughout.
func plan(prefix string, keys, perKey int) []events.Call {
	return planFrom(prefix, keys, 0, perKey)
}

// planFrom is plan for the calls numbered from first to perKey-1 of each key.
func planFrom(prefix string, keys, first, perKey int) []events.Call {
	const block = 8
	out := make([]events.Call, 0, keys*(perKey-first))
	for b := 0; b < keys; b += block {
		for n := first; n < perKey; n++ {
			for k := b; k < min(b+block, keys); k++ {
				out = append(out, newCall(prefix, k, n))
			}
		}
	}
	return out
}

// newCall returns the n-th call of key k of the plan named prefix.
func newCall(prefix string, k, n int) events.Call {
	c := events.Call{Tenant: tenant, RunID: runID, CallID: fmt.Sprintf("%s-%d-%d", prefix, k, n)}
	req := fmt.Sprintf("%s-%d-%d-%d", prefix, k, n, time.Now().UnixNano())
	if k%2 == 0 {
		c.Tool = toolBook
		c.Arguments = mustJSON(map[string]string{"flight": fmt.Sprintf("F-%s-%d", prefix, k), "request_id": req})
	} else {
		c.Tool = toolSeat
		c.Arguments = mustJSON(map[string]string{"passenger": fmt.Sprintf("P-%s-%d", prefix, k), "seat": "12A", "request_id": req})
	}
	return c
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// The executor binary, built once per test run.
var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
	if natsBuild.dir != "" {
		_ = os.RemoveAll(natsBuild.dir)
	}
	os.Exit(code)
}

// executorBinary builds cmd/executor (once per test run) and returns its path.
// It is built with the race detector when the tests are (the packages are then
// compiled once for both), or when FAULTS_RACE is set.
func executorBinary(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "toolexec-faults-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		goBin, err := exec.LookPath("go")
		if err != nil {
			goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
		}
		path := filepath.Join(dir, "executor")
		args := []string{"build", "-o", path}
		if testenv.Race || os.Getenv("FAULTS_RACE") != "" {
			args = append(args, "-race")
		}
		args = append(args, "github.com/tesserix/toolexec/cmd/executor")
		cmd := exec.Command(goBin, args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build ./cmd/executor: %v\n%s", err, out)
			return
		}
		build.path = path
	})
	if build.err != nil {
		t.Fatalf("faults: %v", build.err)
	}
	return build.path
}

// executor is one executor process.
type executor struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process has been waited for
	ready   chan struct{} // closed once the executor has printed that it is ready
	waitErr error
}

// startExecutor runs the executor binary with args and returns once it prints
// that it is ready. The process is stopped (SIGTERM, then SIGKILL) when the test
// ends; if the test failed, the tail of its log is logged.
func startExecutor(t *testing.T, name string, args ...string) *executor {
	t.Helper()
	e := launchExecutor(t, name, args...)
	e.waitReady(t, 60*time.Second)
	return e
}

// launchExecutor is startExecutor without the wait for the executor to be
// ready (see waitReady).
func launchExecutor(t *testing.T, name string, args ...string) *executor {
	t.Helper()
	bin := executorBinary(t)
	e := &executor{name: name, logPath: filepath.Join(t.TempDir(), name+".log"), exited: make(chan struct{}), ready: make(chan struct{})}
	logf, err := os.Create(e.logPath)
	if err != nil {
		t.Fatal(err)
	}
	e.cmd = exec.Command(bin, args...)
	e.cmd.Env = cleanEnv()
	e.cmd.Stderr = logf
	stdout, err := e.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.cmd.Start(); err != nil {
		t.Fatalf("starting executor %s: %v", name, err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(stdout)
		seen := false
		for sc.Scan() {
			if !seen && strings.Contains(sc.Text(), "executor ready") {
				seen = true
				close(e.ready)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		<-read
		e.waitErr = e.cmd.Wait()
		logf.Close()
		close(e.exited)
	}()
	t.Cleanup(func() {
		e.stop()
		if t.Failed() {
			t.Logf("executor %s log (tail):\n%s", name, tail(e.logPath, 40))
		}
	})
	return e
}

// waitReady waits until the executor prints that it is ready, and fails the
// test if it exits first or timeout passes.
func (e *executor) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-e.ready:
	case <-e.exited:
		t.Fatalf("executor %s exited before it was ready: %v\n%s", e.name, e.waitErr, tail(e.logPath, 40))
	case <-time.After(timeout):
		t.Fatalf("executor %s not ready after %v\n%s", e.name, timeout, tail(e.logPath, 40))
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (e *executor) kill() {
	select {
	case <-e.exited:
		return
	default:
	}
	_ = e.cmd.Process.Signal(syscall.SIGKILL)
	<-e.exited
}

// stop asks the executor to drain (SIGTERM) and kills it if it takes too long.
func (e *executor) stop() {
	select {
	case <-e.exited:
		return
	default:
	}
	_ = e.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.exited:
	case <-time.After(15 * time.Second):
		e.kill()
	}
}

// cleanEnv is the test's environment without the variables the executor reads,
// so that nothing from the developer's shell changes a scenario.
func cleanEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "TOOLEXEC_") || strings.HasPrefix(kv, "NATS_URL=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

func tail(path string, lines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// scenario is the common part of every scenario: a client connection, the
// streams, the witness, the recorder and the publisher.
type scenario struct {
	t       *testing.T
	name    string
	natsURL string // what executors are given with --nats-url
	nc      *nats.Conn
	js      jetstream.JetStream
	client  clienttest.Client
	witness *faults.Witness
	rec     *faults.Recorder
	pub     *faults.Publisher
	dir     string
	flags   []string // every executor's flags
	start   time.Time
	answers []faults.StoredAnswer // read back by finish
	execs   []*executor           // the processes started, for their logs
	// serverStops is set by scenarios that stop or kill nats-server, the only
	// ones where it may keep acknowledged calls in the work queue.
	serverStops bool
}

// newScenario connects to natsURL (a comma-separated list for a cluster),
// creates the streams with the given replicas, and starts a witness.
func newScenario(t *testing.T, name, natsURL string, replicas int) *scenario {
	t.Helper()
	s := prepareScenario(t, name, natsURL, replicas)
	s.connect(replicas)
	return s
}

// prepareScenario is newScenario without the connection: executors can be
// launched before NATS is up, and connect follows once it is.
func prepareScenario(t *testing.T, name, natsURL string, replicas int) *scenario {
	t.Helper()
	w := faults.NewWitness()
	t.Cleanup(w.Close)
	s := &scenario{t: t, name: name, natsURL: natsURL, witness: w, rec: &faults.Recorder{}, dir: t.TempDir(), start: time.Now()}
	s.flags = []string{
		"--nats-url", natsURL, "--replicas", strconv.Itoa(replicas),
		"--lease", lease.String(), "--ack-wait", ackWait.String(),
		"--log-level", "info", "--drain-timeout", "5s",
	}
	return s
}

// connect connects the scenario to its NATS URL, creates the streams with the
// given replicas and sets up the publisher.
func (s *scenario) connect(replicas int) {
	t := s.t
	t.Helper()
	nc, err := nats.Connect(s.natsURL, nats.Name("faults-"+s.name), nats.MaxReconnects(-1),
		nats.ReconnectWait(100*time.Millisecond), nats.RetryOnFailedConnect(false),
		// Faults make asynchronous errors; nats.go would print each on stderr.
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	if err != nil {
		t.Fatalf("connect %s: %v", s.natsURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{Replicas: replicas}); err != nil {
		t.Fatalf("EnsureStreams: %v", err)
	}
	client := clienttest.New(t, nc, toolexec.WithLogger(discardLogger()))
	s.nc, s.js, s.client = nc, js, client
	s.pub = &faults.Publisher{Client: client.Client, Recorder: s.rec, Policies: policies}
}

// executor starts an executor process named name (its tools at its own witness
// URLs) with the scenario's flags and extra, and waits until it is ready.
func (s *scenario) executor(name string, extra ...string) *executor {
	s.t.Helper()
	e := s.launch(name, extra...)
	e.waitReady(s.t, 60*time.Second)
	return e
}

// launch is executor without the wait for the executor to be ready.
func (s *scenario) launch(name string, extra ...string) *executor {
	s.t.Helper()
	path := filepath.Join(s.dir, name+".yaml")
	if err := os.WriteFile(path, []byte(toolsYAML(s.witness, name)), 0o600); err != nil {
		s.t.Fatal(err)
	}
	args := append(append([]string{}, s.flags...), "--tools-file", path, "--data-dir", filepath.Join(s.dir, name))
	e := launchExecutor(s.t, name, append(args, extra...)...)
	s.execs = append(s.execs, e)
	return e
}

// publish publishes calls in the background and returns a channel that gets
// the publisher's error (nil once all are acknowledged).
func (s *scenario) publish(ctx context.Context, calls []events.Call) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.pub.Publish(ctx, calls) }()
	return done
}

// waitPublished waits until n calls are acknowledged in all.
func (s *scenario) waitPublished(ctx context.Context, n int) {
	s.t.Helper()
	for s.pub.Published() < n {
		select {
		case <-ctx.Done():
			s.t.Fatalf("only %d of %d calls published: %v", s.pub.Published(), n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// clientURLs returns the client URLs of servers, comma-separated, as
// --nats-url and nats.Connect take them.
func clientURLs(servers []*server.Server) string {
	urls := make([]string, len(servers))
	for i, srv := range servers {
		urls[i] = srv.ClientURL()
	}
	return strings.Join(urls, ",")
}

// finishPublished waits for the publisher (done) to have published every
// call, then finishes the scenario (see finish) and checks that all calls
// were recorded.
func (s *scenario) finishPublished(ctx context.Context, done <-chan error, calls int) faults.Report {
	s.t.Helper()
	if err := <-done; err != nil {
		s.t.Fatal(err)
	}
	s.step("all %d calls published (%d retries)", calls, s.pub.Retries())
	rep := s.finish(ctx)
	if rep.Calls != calls {
		s.t.Errorf("recorded %d calls, want %d", rep.Calls, calls)
	}
	return rep
}

// finish waits for the executors to settle, reads the answers back, checks
// the history, logs its figures on a line starting with FIGURES, and fails the
// test for every violation.
func (s *scenario) finish(ctx context.Context) faults.Report {
	s.t.Helper()
	if err := s.settle(ctx); err != nil {
		s.t.Errorf("%v", err)
	}
	rctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	answers, err := faults.ReadAnswers(rctx, s.js)
	if err != nil {
		s.t.Errorf("reading answers: %v", err)
	}
	s.answers = answers
	rep := faults.Check(s.rec.History(answers, s.witness.Effects()))
	first, _, _ := strings.Cut(rep.String(), "\n")
	p50, p99, worst := s.latencies()
	s.t.Logf("FIGURES %s: %s publish_retries=%d answer_latency_p50=%v p99=%v max=%v elapsed=%v", s.name, first,
		s.pub.Retries(), p50, p99, worst, time.Since(s.start).Round(100*time.Millisecond))
	if !rep.OK() {
		s.t.Errorf("the checker found violations:\n%s", rep)
		s.logCalls(rep.Violations)
	}
	if len(s.execs) > 0 {
		s.t.Logf("executor logs: %s", s.logCounts())
	}
	return rep
}

// logLines are the executor log messages worth counting in a scenario's
// figures.
var logLines = []struct{ name, msg string }{
	{"store_unavailable", `msg="idempotency store unavailable"`},
	{"takeovers", `msg="took over an expired claim"`},
	{"record_failed", `msg="recording the outcome failed"`},
	{"lease_lost", `msg="lease lost while the claim was held"`},
	{"claims_withdrawn", `msg="withdrew a claim whose grant was lost; nothing ran under it"`},
	{"answer_publish_retries", `msg="publishing an answer failed; retrying"`},
	{"nats_reconnects", `msg="NATS reconnected"`},
}

// logCounts counts logLines in every executor's log.
func (s *scenario) logCounts() string {
	counts := make([]int, len(logLines))
	for _, e := range s.execs {
		b, err := os.ReadFile(e.logPath)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			for i, l := range logLines {
				if strings.Contains(line, l.msg) {
					counts[i]++
				}
			}
		}
	}
	parts := make([]string, len(logLines))
	for i, l := range logLines {
		parts[i] = fmt.Sprintf("%s=%d", l.name, counts[i])
	}
	return strings.Join(parts, " ")
}

// latencies returns the median, 99th percentile and largest time from a
// call's acknowledgement to its answer's storage, over the answered calls.
func (s *scenario) latencies() (p50, p99, worst time.Duration) {
	stored := map[string]time.Time{}
	for _, a := range s.answers {
		if t, ok := stored[a.CallID]; !ok || a.Stored.Before(t) {
			stored[a.CallID] = a.Stored
		}
	}
	var ds []time.Duration
	for _, c := range s.rec.Calls() {
		if t, ok := stored[c.CallID]; ok {
			ds = append(ds, max(t.Sub(c.Acked), 0))
		}
	}
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration { return ds[int(q*float64(len(ds)-1))].Round(time.Millisecond) }
	return at(0.5), at(0.99), ds[len(ds)-1].Round(time.Millisecond)
}

// logCalls logs what the executors' logs say about the calls of the first
// violations.
func (s *scenario) logCalls(vs []faults.Violation) {
	s.t.Helper()
	for i, v := range vs {
		if i == 10 {
			break
		}
		if v.CallID == "" {
			continue
		}
		for _, e := range s.execs {
			b, err := os.ReadFile(e.logPath)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, "call_id="+v.CallID+" ") {
					s.t.Logf("%s: %s", e.name, line)
				}
			}
		}
	}
}

// step logs what the scenario is doing, with the time since it started.
// settle waits until the executors have nothing left to do. Calls nats-server
// kept after the consumer had acknowledged them are logged in a scenario that
// stops the server, and an error in any other.
func (s *scenario) settle(ctx context.Context) error {
	s.t.Helper()
	got, err := faults.WaitSettled(ctx, s.js)
	if err != nil || got.Kept == 0 {
		return err
	}
	if !s.serverStops {
		return fmt.Errorf("faults: the work queue kept %d calls its consumer counts as acknowledged, and nats-server never stopped", got.Kept)
	}
	s.step("settled; nats-server still holds %d acknowledged calls in the work queue", got.Kept)
	return nil
}

func (s *scenario) step(format string, args ...any) {
	s.t.Helper()
	s.t.Logf("%6.2fs %s", time.Since(s.start).Seconds(), fmt.Sprintf(format, args...))
}

// effectsByKey counts the witness's effects per key.
func effectsByKey(es []faults.Effect) map[string][]faults.Effect {
	out := map[string][]faults.Effect{}
	for _, e := range es {
		out[e.Key] = append(out[e.Key], e)
	}
	return out
}

// ctxFor returns a context that ends after d or with the test.
func ctxFor(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
