package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The Python rows: a Python caller (toolexec.Client) calls a tool through the
// executor binary, and a Python worker (toolexec.Worker) serves its body, each
// in a process of its own, run by python_row.py with the venv's interpreter.
const (
	pythonID   = "py"    // the caller keeps -concurrency calls in flight
	pythonC1ID = "py-c1" // one at a time
	// pythonTool is the tool the Python worker serves: a name of its own, so
	// that it is no conflict with the executor's demo tools.
	pythonTool = "pybench_book"
	// pythonC1Warmup is the warm-up of the run at concurrency 1 (the first
	// run warmed everything up already).
	pythonC1Warmup = 20
)

// pythonReport is what python_row.py caller prints.
type pythonReport struct {
	Calls          int            `json:"calls"`
	Answered       int            `json:"answered"`
	Answers        map[string]int `json:"answers"`
	DistinctKeys   int            `json:"distinct_keys"`
	Warmup         int            `json:"warmup"`
	ElapsedSeconds float64        `json:"elapsed_seconds"`
	Latency        struct {
		P50 float64 `json:"p50"`
		P99 float64 `json:"p99"`
		Max float64 `json:"max"`
	} `json:"latency_ms"`
}

// pythonWorker is python_row.py worker, running.
type pythonWorker struct {
	cmd     *exec.Cmd
	lines   chan string // its standard output, line by line
	errPath string
}

// runPython measures the Python rows: one NATS server (embedded in this
// process, lazy fsync), the executor binary (JetStream KV store, learning the
// workers' tools every 200 ms), a Python worker serving pythonTool, and the
// Python caller twice: -python-calls calls with -concurrency in flight, then
// -latency-calls one at a time. The check compares each run's answers with
// its distinct keys, and the bodies the worker says it entered, and the
// executor's own count, with the calls' distinct keys (warm-ups included).
func (h *harness) runPython(ctx context.Context) []Result {
	c := h.cfg
	rows := []Result{
		{ID: pythonID, Group: groupPython, Name: fmt.Sprintf("Python caller and worker, %d in flight", c.concurrency),
			Concurrency: c.concurrency, Duplicates: c.duplicates},
		{ID: pythonC1ID, Group: groupPython, Name: "Python caller and worker, 1 in flight",
			Concurrency: 1, Duplicates: c.duplicates},
	}
	fail := func(err error) []Result {
		for i := range rows {
			rows[i] = failed(rows[i], err)
		}
		return rows
	}
	if _, err := os.Stat(c.python); err != nil {
		return fail(fmt.Errorf("the Python interpreter: %w (make bench makes the venv)", err))
	}
	env, err := h.startNATS(pythonID, false)
	if err != nil {
		return fail(err)
	}
	defer env.stop()
	for i := range rows {
		rows[i].Durability = env.fsyncName()
	}
	ex, err := h.startExecutorProc(ctx, pythonID, "--nats-url", env.url, "--store", "jetstream",
		"--workers-interval", "200ms", "--workers-window", "100ms")
	if err != nil {
		return fail(fmt.Errorf("executor: %w", err))
	}
	defer ex.stop()
	w, err := h.startPythonWorker(ctx, env.url)
	if err != nil {
		return fail(fmt.Errorf("Python worker: %w", err))
	}
	defer w.kill()

	runs := []struct{ calls, concurrency, warmup int }{
		{c.pythonCalls, c.concurrency, c.warmup},
		{c.latencyCalls, 1, pythonC1Warmup},
	}
	want := 0 // bodies the worker should have entered: each distinct key once
	for i, run := range runs {
		rep, err := h.pythonCaller(ctx, env.url, run.calls, run.concurrency, run.warmup)
		if err != nil {
			rows[i] = failed(rows[i], err)
			continue
		}
		want += run.warmup + rep.DistinctKeys
		r := &rows[i]
		r.rate(rep.Answered, time.Duration(rep.ElapsedSeconds*float64(time.Second)))
		r.P50, r.P99, r.Max = rep.Latency.P50, rep.Latency.P99, rep.Latency.Max
		r.CheckOK = rep.Answered == run.calls && rep.Answers["completed"] == rep.DistinctKeys &&
			rep.Answers["deduplicated"] == run.calls-rep.DistinctKeys
		r.Check = fmt.Sprintf("%d of %d answered (%s), %d distinct keys", rep.Answered, run.calls, kinds(rep.Answers), rep.DistinctKeys)
	}
	m, err := ex.metrics(ctx)
	own := int64(-1)
	if err == nil {
		own = m.bodiesEntered()
	}
	entered, err := w.stop()
	for i := range rows {
		r := &rows[i]
		if r.Err != "" {
			continue
		}
		if err != nil {
			r.CheckOK = false
			r.Check += "; the worker's count: " + err.Error()
			continue
		}
		r.CheckOK = r.CheckOK && entered == want && own == int64(want)
		r.Check += fmt.Sprintf("; both runs, warm-ups included: %d distinct keys, the Python body entered %d times, the executor's own count %d", want, entered, own)
	}
	return rows
}

// startPythonWorker starts python_row.py worker and waits until it serves.
func (h *harness) startPythonWorker(ctx context.Context, url string) (*pythonWorker, error) {
	errPath := h.profilePath("python-worker") + ".log"
	errf, err := os.Create(errPath)
	if err != nil {
		return nil, err
	}
	defer errf.Close() // the child holds its own descriptor
	cmd := exec.Command(h.cfg.python, h.cfg.pythonScript, "worker", url, pythonTool)
	cmd.Env = executorEnv(os.Environ())
	cmd.Stderr = errf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	w := &pythonWorker{cmd: cmd, lines: make(chan string, 16), errPath: errPath}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, stdout)
		close(w.lines)
	}()
	select {
	case line, ok := <-w.lines:
		if ok && strings.HasPrefix(line, "ready ") {
			return w, nil
		}
		w.kill()
		return nil, fmt.Errorf("said %q, not ready: %s", line, tail(errPath))
	case <-time.After(30 * time.Second):
		w.kill()
		return nil, fmt.Errorf("not ready after 30s: %s", tail(errPath))
	case <-ctx.Done():
		w.kill()
		return nil, ctx.Err()
	}
}

// stop stops the worker gracefully (SIGTERM) and returns the bodies it says
// it entered.
func (w *pythonWorker) stop() (int, error) {
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				return 0, fmt.Errorf("the worker exited without its count (%v): %s", w.cmd.Wait(), tail(w.errPath))
			}
			if n, found := strings.CutPrefix(line, "entered "); found {
				entered, err := strconv.Atoi(n)
				if werr := w.cmd.Wait(); werr != nil && err == nil {
					err = fmt.Errorf("the worker exited: %w", werr)
				}
				return entered, err
			}
		case <-timeout:
			w.kill()
			return 0, fmt.Errorf("the worker did not stop within 30s of SIGTERM")
		}
	}
}

// kill ends the worker if it still runs.
func (w *pythonWorker) kill() {
	if w.cmd.ProcessState == nil {
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
	}
}

// pythonCaller runs python_row.py caller once and reads its report.
func (h *harness) pythonCaller(ctx context.Context, url string, calls, concurrency, warmup int) (pythonReport, error) {
	var rep pythonReport
	cmd := exec.CommandContext(ctx, h.cfg.python, h.cfg.pythonScript, "caller", url, pythonTool,
		"--calls", strconv.Itoa(calls), "--concurrency", strconv.Itoa(concurrency),
		"--warmup", strconv.Itoa(warmup), "--duplicates", strconv.FormatFloat(h.cfg.duplicates, 'f', -1, 64))
	cmd.Env = executorEnv(os.Environ())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return rep, fmt.Errorf("python_row.py caller: %w: %s", err, lastLines(stderr.String(), 5))
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return rep, fmt.Errorf("python_row.py caller printed %q: %w", out, err)
	}
	return rep, nil
}
