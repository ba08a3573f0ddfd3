package conformance

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// Sizes of the test deployment. The server accepts messages up to
// serverMaxPayload, twice what the executor reads (1 MiB, its default), so that
// a message between the two reaches the executor and must be answered
// too_large. Outcomes are capped at maxOutcome so that the downstream can
// return one too large to record.
const (
	serverMaxPayload = 2 << 20
	executorMaxMsg   = 1 << 20
	maxOutcome       = 4096
)

// Names fixed by docs/PROTOCOL.md §3 and §4.
const (
	callStream  = "TOOLEXEC_CALLS_V2"
	eventStream = "TOOLEXEC_EVENTS"
	kvBucket    = "toolexec_idempotency"
	callType    = "io.tesserix.toolexec.call"
	typePrefix  = "io.tesserix.toolexec."
	structured  = "application/cloudevents+json"
)

// answerWait bounds the wait for one answer. Answers normally come in
// milliseconds; the bound is generous for loaded machines.
const answerWait = 20 * time.Second

// env is the deployment every test drives: one NATS server, one HTTP downstream,
// one executor process, and a client connection.
var env struct {
	bin       string // directory holding the executor and emitter binaries
	natsURL   string
	nc        *nats.Conn
	js        jetstream.JetStream
	down      *downstream
	exec      *process
	toolsFile string
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) (code int) {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "conformance: "+format+"\n", args...)
		return 1
	}
	tmp, err := os.MkdirTemp("", "toolexec-conformance-")
	if err != nil {
		return fail("temp dir: %v", err)
	}
	defer os.RemoveAll(tmp)
	// The programs it starts read NATS_* variables (and the emitter the
	// selected nats CLI context): keep the developer's out.
	cleanup, err := testenv.IsolateNATSConfig()
	if err != nil {
		return fail("%v", err)
	}
	defer cleanup()

	env.bin = filepath.Join(tmp, "bin")
	start := time.Now()
	if err := buildBinaries(env.bin); err != nil {
		return fail("%v", err)
	}
	fmt.Fprintf(os.Stderr, "conformance: built executor and emitter in %v (race detector: %v)\n",
		time.Since(start).Round(time.Millisecond), testenv.Race)

	s, err := natstest.RunServer(filepath.Join(tmp, "nats"), natstest.WithMaxPayload(serverMaxPayload))
	if err != nil {
		return fail("nats server: %v", err)
	}
	defer natstest.Shutdown(s)
	env.natsURL = s.ClientURL()

	env.down = newDownstream()
	defer env.down.srv.Close()
	defer env.down.releaseAll()

	toolsDir := filepath.Join(tmp, "tools")
	if err := os.MkdirAll(toolsDir, 0o750); err != nil {
		return fail("%v", err)
	}
	toolsFile := filepath.Join(toolsDir, "tools.yaml")
	env.toolsFile = toolsFile
	if err := os.WriteFile(toolsFile, []byte(toolsYAML), 0o600); err != nil {
		return fail("%v", err)
	}
	p, err := startExecutor(env.natsURL, filepath.Join(tmp, "data"), toolsFile)
	if err != nil {
		return fail("%v", err)
	}
	env.exec = p
	defer func() {
		// The executor must stop cleanly on SIGTERM, with no race report and no
		// panic in what it wrote.
		status, err := p.stop(45 * time.Second)
		out := p.stderr.String()
		switch {
		case err != nil:
			code = fail("executor: %v\n%s", err, out)
		case status != 0:
			code = fail("executor exited with status %d after SIGTERM\n%s", status, out)
		case strings.Contains(out, "DATA RACE") || strings.Contains(out, "panic:"):
			code = fail("executor reported a race or a panic\n%s", out)
		}
	}()

	nc, err := nats.Connect(env.natsURL, nats.Name("conformance-tests"))
	if err != nil {
		return fail("connect: %v", err)
	}
	defer nc.Close()
	env.nc = nc
	if env.js, err = jetstream.New(nc); err != nil {
		return fail("jetstream: %v", err)
	}
	return m.Run()
}

// buildBinaries builds cmd/executor and cmd/emitter into dir, with the race
// detector when this test binary has it.
func buildBinaries(dir string) error {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if testenv.Race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/tesserix/toolexec/cmd/executor", "github.com/tesserix/toolexec/cmd/emitter")
	cmd := exec.Command(goTool(), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// goTool returns the go command that runs these tests.
func goTool() string {
	if p := filepath.Join(os.Getenv("GOROOT"), "bin", "go"); os.Getenv("GOROOT") != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}

// toolsYAML declares the tools the executor serves, all reaching the test's
// downstream through ${DOWNSTREAM_URL}:
//
//   - book: effectful, keyed by flight, seats must not change between
//     duplicates; a strict schema (note accepts anything, so that hostile JSON
//     can reach the key derivation);
//   - book_loose: effectful, keyed by flight, which is optional, so that a call
//     without it has no derivable key;
//   - lookup: read-only;
//   - report and report_once: idempotent and effectful, keyed by id; their
//     endpoint answers with more than maxOutcome bytes.
const toolsYAML = `tools:
  - name: book
    description: Take seats on a flight.
    idempotency:
      kind: effectful
      key_arguments: [flight]
      check_arguments: [seats]
    timeout: 10s
    parameters:
      type: object
      properties:
        flight: {type: string}
        seats: {type: integer, minimum: 1, maximum: 9}
        request_id: {type: string}
        note: {}
      required: [flight]
      additionalProperties: false
    http:
      url: ${DOWNSTREAM_URL}/book
  - name: book_loose
    idempotency:
      kind: effectful
      key_arguments: [flight]
    timeout: 10s
    parameters:
      type: object
      properties:
        flight: {type: string}
        request_id: {type: string}
    http:
      url: ${DOWNSTREAM_URL}/book
  - name: lookup
    idempotency:
      kind: read_only
    timeout: 10s
    parameters:
      type: object
      properties:
        flight: {type: string}
    http:
      url: ${DOWNSTREAM_URL}/lookup
  - name: report
    idempotency:
      kind: idempotent
      key_arguments: [id]
    timeout: 10s
    retry: {max_attempts: 3, initial_backoff: 10ms, max_backoff: 50ms}
    parameters:
      type: object
      properties:
        id: {type: string}
      required: [id]
    http:
      url: ${DOWNSTREAM_URL}/big
  - name: report_once
    idempotency:
      kind: effectful
      key_arguments: [id]
    timeout: 10s
    parameters:
      type: object
      properties:
        id: {type: string}
      required: [id]
    http:
      url: ${DOWNSTREAM_URL}/big
`

// process is a running executor.
type process struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's error, set before done is closed
}

// startExecutor starts the executor binary against the NATS server at natsURL
// and the test's downstream, and returns once it prints its ready line.
func startExecutor(natsURL, dataDir, toolsFile string, extra ...string) (*process, error) {
	args := append([]string{
		"--nats-url", natsURL,
		"--tools-file", toolsFile,
		"--data-dir", dataDir,
		"--max-outcome-bytes", fmt.Sprint(maxOutcome),
		"--log-level", "warn",
	}, extra...)
	cmd := exec.Command(filepath.Join(env.bin, "executor"), args...)
	cmd.Env = append(os.Environ(), "DOWNSTREAM_URL="+env.down.srv.URL)
	p := &process{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the executor: %w", err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "ready") {
				close(ready)
				signalled = true
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	select {
	case <-ready:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("the executor exited before it was ready: %v\n%s", p.err, p.stderr)
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-p.done
		return nil, fmt.Errorf("the executor was not ready after 60s\n%s", p.stderr)
	}
}

// stop sends SIGTERM and waits for the process to exit, killing it after
// timeout. It returns the exit status.
func (p *process) stop(timeout time.Duration) (int, error) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		return -1, fmt.Errorf("did not stop within %v of SIGTERM", timeout)
	}
	return exitStatus(p.err)
}

// exitStatus turns Wait's error into an exit status.
func exitStatus(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	return -1, err
}

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type syncBuffer struct {
	mu sync.Mutex // protects b
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

// request is one request the downstream received.
type request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// downstream is the HTTP service behind the tools. It records every request
// and answers by path and by the flight in the body:
//
//	/book    200 {"booking":<flight>}; flight FAIL500 → 500; flight REFUSE409 → 409
//	/lookup  200 {"fare":120}
//	/big     200 with a body of 2*maxOutcome bytes
type downstream struct {
	srv *httptest.Server

	mu   sync.Mutex // protects reqs
	reqs []request
	// held holds, by tenant, a channel closed to let that tenant's bookings of
	// flight HOLD answer.
	held     map[string]chan struct{}
	released bool // every tenant's
}

// hold returns the channel that lets tenant's bookings of flight HOLD answer.
func (d *downstream) hold(tenant string) chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	ch, ok := d.held[tenant]
	if !ok {
		ch = make(chan struct{})
		if d.released {
			close(ch)
		}
		d.held[tenant] = ch
	}
	return ch
}

// release lets tenant's bookings of flight HOLD answer, now and from now on.
func (d *downstream) release(tenant string) {
	ch := d.hold(tenant)
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// releaseAll lets every booking of flight HOLD answer.
func (d *downstream) releaseAll() {
	d.mu.Lock()
	d.released = true
	tenants := make([]string, 0, len(d.held))
	for t := range d.held {
		tenants = append(tenants, t)
	}
	d.mu.Unlock()
	for _, t := range tenants {
		d.release(t)
	}
}

func newDownstream() *downstream {
	d := &downstream{held: map[string]chan struct{}{}}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	return d
}

func (d *downstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	d.reqs = append(d.reqs, request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	d.mu.Unlock()
	var args struct {
		Flight string `json:"flight"`
	}
	_ = json.Unmarshal(body, &args)
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/book":
		switch args.Flight {
		case "FAIL500":
			http.Error(w, "the booking system is down", http.StatusInternalServerError)
			return
		case "REFUSE409":
			http.Error(w, "flight closed", http.StatusConflict)
			return
		case "HOLD":
			select {
			case <-d.hold(r.Header.Get("Toolexec-Tenant")):
			case <-r.Context().Done():
				return
			}
		}
		b, _ := json.Marshal(map[string]string{"booking": args.Flight})
		_, _ = w.Write(b)
	case "/lookup":
		_, _ = io.WriteString(w, `{"fare":120}`)
	case "/big":
		_, _ = io.WriteString(w, `"`+strings.Repeat("x", 2*maxOutcome)+`"`)
	default:
		http.NotFound(w, r)
	}
}

// forTenant returns the requests made for tenant (by the tenant header the
// HTTP tools send).
func (d *downstream) forTenant(tenant string) []request {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []request
	for _, r := range d.reqs {
		if r.Header.Get("Toolexec-Tenant") == tenant {
			out = append(out, r)
		}
	}
	return out
}

// ctxT returns a context that ends with the test or after a minute.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
