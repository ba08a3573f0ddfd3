package opskit_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// root is the repository, from this package's directory.
var root = filepath.Join("..", "..")

// tool returns the path of the named program: the variable env if set, else
// the one on PATH. Missing, it skips the test, or under CI=true fails it.
func tool(t *testing.T, name, env, fix string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if testenv.InCI() {
		t.Fatalf("%s is not installed (CI=true): %s", name, fix)
	}
	t.Skipf("%s is not installed: %s", name, fix)
	return ""
}

// run runs a program in dir and returns its standard output and error.
func run(t *testing.T, dir, prog string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(prog, args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

var (
	buildOnce     sync.Once
	executorPath  string
	executorBuild error
)

// executorHelp returns the executor's --help text, from a binary built once.
func executorHelp(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "opskit-executor")
		if err != nil {
			executorBuild = err
			return
		}
		executorPath = filepath.Join(dir, "executor")
		cmd := exec.Command("go", "build", "-o", executorPath, "./cmd/executor")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			executorBuild = &buildError{err: err, out: string(out)}
		}
	})
	if executorBuild != nil {
		t.Fatalf("building the executor: %v", executorBuild)
	}
	out, errOut, err := run(t, ".", executorPath, "--help")
	if err != nil {
		t.Fatalf("executor --help: %v\n%s", err, errOut)
	}
	return out + errOut
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + strings.TrimSpace(e.out) }

func TestMain(m *testing.M) {
	code := m.Run()
	if executorPath != "" {
		_ = os.RemoveAll(filepath.Dir(executorPath))
	}
	os.Exit(code)
}
