package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// execProc is the executor binary (cmd/executor) running as a process of its
// own, serving the demo tools, with its Prometheus endpoint on a port of the
// benchmark's range.
type execProc struct {
	cmd        *exec.Cmd
	metricsURL string
	logPath    string
	exited     chan error // receives cmd.Wait's error once the process is gone
}

// readyLine starts the line cmd/executor prints once it takes calls.
const readyLine = "toolexec executor ready"

// freePort returns the next port of the range that nothing listens on.
func (h *harness) freePort() (int, error) {
	for range 50 {
		p := h.nextPort()
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue
		}
		ln.Close()
		return p, nil
	}
	return 0, fmt.Errorf("no free port from %d on", h.cfg.portBase)
}

// startExecutorProc starts the executor with args plus --demo, a metrics
// address and --log-level warn, and waits until it says it is ready. Its log
// goes to executor-<name>.log in the work directory.
func (h *harness) startExecutorProc(ctx context.Context, name string, args ...string) (*execProc, error) {
	mport, err := h.freePort()
	if err != nil {
		return nil, err
	}
	maddr := "127.0.0.1:" + strconv.Itoa(mport)
	args = append(args, "--demo", "--metrics-addr", maddr, "--log-level", "warn")
	logPath := filepath.Join(h.cfg.work, "executor-"+name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	cmd := exec.Command(h.cfg.executor, args...)
	cmd.Env = executorEnv(os.Environ())
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", h.cfg.executor, err)
	}
	p := &execProc{cmd: cmd, metricsURL: "http://" + maddr + "/metrics", logPath: logPath, exited: make(chan error, 1)}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if ready != nil && strings.HasPrefix(sc.Text(), readyLine) {
				close(ready)
				ready = nil
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.exited <- cmd.Wait()
	}()
	select {
	case <-ready:
		return p, nil
	case err := <-p.exited:
		p.exited <- err
		return nil, fmt.Errorf("executor exited before it was ready (%v): %s", err, tail(logPath))
	case <-time.After(60 * time.Second):
		p.stop()
		return nil, fmt.Errorf("executor not ready after 60s: %s", tail(logPath))
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

// executorEnv is env without the variables that would configure the executor
// behind the benchmark's back (TOOLEXEC_*, NATS_URL).
func executorEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		if strings.HasPrefix(kv, envPrefixExecutor) || strings.HasPrefix(kv, "NATS_URL=") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// envPrefixExecutor starts the variables cmd/executor reads as flags.
const envPrefixExecutor = "TOOLEXEC_"

// stop asks the executor to drain and stop (SIGTERM), and kills it if it has
// not stopped within 30 seconds.
func (p *execProc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		p.exited <- err
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		p.exited <- <-p.exited
	}
}

// memory reads the executor's resident set size and its peak from
// /proc/<pid>/status, in KiB.
func (p *execProc) memory() (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	return parseProcStatus(string(b))
}

// parseProcStatus returns VmRSS and VmHWM of a /proc/<pid>/status text, in KiB.
func parseProcStatus(text string) (rss, hwm int64, err error) {
	found := 0
	for line := range strings.SplitSeq(text, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("%s: unexpected %q", k, v)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", k, err)
		}
		if k == "VmRSS" {
			rss = n
		} else {
			hwm = n
		}
		found++
	}
	if found != 2 {
		return 0, 0, errors.New("no VmRSS and VmHWM in the process status")
	}
	return rss, hwm, nil
}

// metrics scrapes the executor's Prometheus endpoint.
func (p *execProc) metrics(ctx context.Context) (promSamples, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", p.metricsURL, resp.Status)
	}
	return parsePromText(resp.Body)
}

// promSamples maps a sample's name with its labels, as the text format prints
// them (toolexec_bodies_entered_total{tool="book"}), to its value.
type promSamples map[string]float64

// parsePromText reads the Prometheus text exposition format.
func parsePromText(r io.Reader) (promSamples, error) {
	m := promSamples{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		m[strings.TrimSpace(line[:i])] = v
	}
	return m, sc.Err()
}

// sum adds up the samples of metric name, whatever their labels.
func (m promSamples) sum(name string) float64 {
	var s float64
	for k, v := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			s += v
		}
	}
	return s
}

// bodiesEntered is the executor's own count of tool bodies entered.
func (m promSamples) bodiesEntered() int64 {
	return int64(m.sum("toolexec_bodies_entered_total"))
}

// tail returns the last lines of the file at path, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], " / ")
}
