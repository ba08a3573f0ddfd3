package mcptool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/time/rate"
)

// InheritedEnv lists the variables a stdio server inherits from the executor's
// environment; [Config.Env] adds to them (and overrides them). Everything else
// the executor has, its credentials included, stays out of the child.
var InheritedEnv = []string{"HOME", "LANG", "LC_ALL", "LOGNAME", "PATH", "SHELL", "TERM", "TMPDIR", "TZ", "USER"}

// process is one run of a stdio server's command.
type process struct {
	cmd    *exec.Cmd
	stdin  *stdinWriter
	stdout *os.File
	exited chan struct{} // closed once the process has exited and been waited for
	err    error         // what Wait returned; read after exited is closed
}

// startProcess starts cfg's command with its standard streams on pipes of our
// own: a response the server writes just before it exits is still read, since
// no Wait closes our end of its standard output. Its standard error goes to
// log, line by line, within lim.
func startProcess(cfg *Config, log *slog.Logger, lim *stderrLimiter) (*process, error) {
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	cmd := exec.Command(cfg.Command[0], cfg.Command[1:]...)
	cmd.Env = environment(cfg.Env)
	cmd.Dir = cfg.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	// The child has its copies; ours would keep the pipes open after it exits.
	inR.Close()
	outW.Close()
	errW.Close()
	p := &process{cmd: cmd, stdin: &stdinWriter{f: inW}, stdout: outR, exited: make(chan struct{})}
	go logStderr(errR, log.With("pid", cmd.Process.Pid), lim)
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// environment is the child's environment: InheritedEnv from ours, then extra,
// sorted so that the child sees the same order every time.
func environment(extra map[string]string) []string {
	env := map[string]string{}
	for _, k := range InheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// stop ends the process as the MCP specification asks a client to: close its
// standard input, wait up to grace for it to exit, then SIGTERM, wait again,
// then SIGKILL. It returns once the process has exited.
func (p *process) stop(grace time.Duration) {
	p.stdin.Close()
	wait := func() bool {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.exited:
			return true
		case <-t.C:
			return false
		}
	}
	if !wait() {
		if p.cmd.Process.Signal(syscall.SIGTERM) == nil && wait() {
			return
		}
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// describeExit says how a process ended, for logs.
func (p *process) describeExit() string {
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return "exit status 0"
	case errors.As(p.err, &ee):
		return ee.String()
	}
	return p.err.Error()
}

// maxStderrLine bounds one logged line of a server's standard error; the rest
// of a longer line is dropped.
const maxStderrLine = 4 << 10

// stderrLimiter bounds how fast one upstream's standard error is logged, over
// all its processes: a server that floods its standard error costs a bounded
// amount of log, and the lines dropped are counted.
type stderrLimiter struct {
	lim *rate.Limiter
}

func newStderrLimiter() *stderrLimiter {
	return &stderrLimiter{lim: rate.NewLimiter(rate.Limit(20), 100)} // 20 lines a second, bursts of 100
}

// logStderr logs each line read from r until it ends, then closes r. Every
// line is read, so the child never blocks on a full pipe, but at most lim's
// rate of them are logged.
func logStderr(r *os.File, log *slog.Logger, lim *stderrLimiter) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 1024)
	var dropped int
	for {
		line, err := readLine(br, maxStderrLine)
		if len(line) > 0 {
			if lim.lim.Allow() {
				if dropped > 0 {
					log.Warn("upstream stderr: lines dropped", "lines", dropped)
					dropped = 0
				}
				log.Info("upstream stderr", "line", line)
			} else {
				dropped++
			}
		}
		if err != nil {
			if dropped > 0 {
				log.Warn("upstream stderr: lines dropped", "lines", dropped)
			}
			return
		}
	}
}

// readLine reads one line from br without its end of line, keeping at most
// limit bytes of it (a longer line is marked as cut). The error is that of the
// reader, io.EOF at the end.
func readLine(br *bufio.Reader, limit int) (string, error) {
	var line []byte
	total := 0
	for {
		chunk, err := br.ReadSlice('\n')
		total += len(chunk)
		// Keep two bytes more than the limit: room for the end of line.
		if room := limit + 2 - len(line); room > 0 {
			line = append(line, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		s := strings.TrimRight(string(line), "\r\n")
		if total > len(line) || len(s) > limit {
			s = strings.ToValidUTF8(s[:min(len(s), limit)], "") + " …(cut)"
		}
		if err != nil && !errors.Is(err, io.EOF) {
			err = fmt.Errorf("reading the server's standard error: %w", err)
		}
		return s, err
	}
}
