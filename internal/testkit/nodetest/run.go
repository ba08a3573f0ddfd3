package nodetest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// waitDelay bounds how long a harness program's output pipes may stay open
// after it exits or is killed: a server it spawned may hold them a little
// longer.
const waitDelay = 5 * time.Second

// RunError reports a harness program that could not start or ended with a
// non-zero exit status. Stderr holds what it wrote on standard error, which
// names the cause (the client prints the exception that ended it).
type RunError struct {
	Program string // the script or package that ran
	Stderr  string
	Err     error // from os/exec: *exec.ExitError, or why it could not start
}

// Error returns the program, the exit status and the last lines of stderr.
func (e *RunError) Error() string {
	return fmt.Sprintf("nodetest: %s: %v: %s", e.Program, e.Err, tail(e.Stderr, 2000))
}

// Unwrap returns the error from os/exec.
func (e *RunError) Unwrap() error { return e.Err }

// run runs node with args in dir, feeding it stdin, and returns its standard
// output; it is killed when ctx ends.
func run(ctx context.Context, program, node, dir string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitDelay
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), &RunError{Program: program, Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// tail returns the last n bytes of s, trimmed.
func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}
