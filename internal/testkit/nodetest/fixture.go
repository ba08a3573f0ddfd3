package nodetest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The client scenarios of the conformance suite whose fixture server a test
// can import as an upstream: each serves MCP over Streamable HTTP and checks
// what its client does.
const (
	// FixtureSSERetry serves test_reconnection: the server closes the stream
	// of its tools/call after a priming event (an id and retry: 500) and
	// sends the result on the GET that resumes it. Its checks: the client
	// resumed with GET, waited the retry, and sent Last-Event-ID.
	FixtureSSERetry = "sse-retry"
	// FixtureElicitationDefaults serves test_client_elicitation_defaults,
	// with sessions (the TypeScript SDK's server): the tool sends
	// elicitation/create on the session's standalone stream (the GET, not the
	// stream of the tools/call), with a schema whose five fields (string,
	// integer, number, enum, boolean) all have defaults and none is required.
	// Its checks, client-elicitation-sep1034-{string,integer,number,enum,
	// boolean}-default: the client accepted with each field present, its
	// default applied where the answer left it out.
	FixtureElicitationDefaults = "elicitation-sep1034-client-defaults"
	// FixtureToolsCall serves add_numbers (a and b), without sessions; its
	// check is that the client called it.
	FixtureToolsCall = "tools_call"
)

// stopWait is how long a stopped fixture server may take to exit.
const stopWait = 5 * time.Second

// FixtureServer is a fixture server of the conformance suite, started in the
// suite's interactive mode (`conformance client --scenario <name>` without
// a client command), which serves until it is stopped and then writes its
// checks.
type FixtureServer struct {
	// URL is the server's address, as the suite printed it.
	URL string

	scenario string
	cmd      *exec.Cmd
	out      string
	stderr   *strings.Builder

	once   sync.Once
	checks []Check
	err    error
}

// Fixture starts the fixture server of a client scenario of the suite and
// returns once it listens. It is stopped when the test ends if [FixtureServer.Checks]
// has not stopped it before. See the package documentation for what happens
// when node 26 or the suite is missing.
func Fixture(t testing.TB, scenario string) *FixtureServer {
	t.Helper()
	node := NewerNode(t)
	entry := filepath.Join(Package(t, ConformancePackage), "dist", "index.js")
	f := &FixtureServer{scenario: scenario, out: t.TempDir(), stderr: &strings.Builder{}}
	f.cmd = exec.Command(node, entry, "client", "--scenario", scenario, "--output-dir", f.out)
	f.cmd.Dir = Dir(t)
	f.cmd.Stderr = f.stderr
	f.cmd.WaitDelay = waitDelay
	stdout, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatalf("nodetest: starting the %s fixture: %v", scenario, err)
	}
	t.Cleanup(func() { _, _ = f.Checks() })
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "Server URL: "); ok {
				urls <- strings.TrimSpace(u)
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case f.URL = <-urls:
		return f
	case <-time.After(time.Minute):
		_, _ = f.Checks()
		t.Fatalf("nodetest: the %s fixture printed no URL within a minute: %s", scenario, tail(f.stderr.String(), 2000))
		return nil
	}
}

// Checks stops the server (SIGTERM, on which the suite writes its checks;
// SIGKILL if it has not exited 5 seconds later) and returns its checks: what
// it saw its client do. Later calls return the same.
func (f *FixtureServer) Checks() ([]Check, error) {
	f.once.Do(func() {
		// The suite writes the checks, then closes its server, which waits
		// for the connections its clients still hold: it is killed if it
		// has not exited within stopWait.
		_ = f.cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan error, 1)
		go func() { exited <- f.cmd.Wait() }()
		var runErr error
		select {
		case runErr = <-exited:
		case <-time.After(stopWait):
			_ = f.cmd.Process.Kill()
			<-exited
		}
		files, _ := filepath.Glob(filepath.Join(f.out, "*", "checks.json"))
		if len(files) != 1 {
			if runErr != nil {
				f.err = &RunError{Program: ConformancePackage + " client " + f.scenario, Stderr: f.stderr.String(), Err: runErr}
				return
			}
			f.err = fmt.Errorf("nodetest: the %s fixture wrote %d checks.json files in %s", f.scenario, len(files), f.out)
			return
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			f.err = err
			return
		}
		if err := json.Unmarshal(b, &f.checks); err != nil {
			f.err = fmt.Errorf("nodetest: the %s fixture's checks: %w", f.scenario, err)
		}
	})
	return f.checks, f.err
}
