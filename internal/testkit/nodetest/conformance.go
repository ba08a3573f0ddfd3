package nodetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ErrUnknownScenario is returned by [Suite.Run] for a name that is not in
// [Scenarios].
var ErrUnknownScenario = errors.New("nodetest: unknown conformance scenario")

// The statuses of a conformance check. Only FAILURE fails a scenario (and
// makes the suite exit with status 1); WARNING marks an unmet SHOULD and
// INFO a note, such as a request the suite sent.
const (
	StatusSuccess = "SUCCESS"
	StatusFailure = "FAILURE"
	StatusWarning = "WARNING"
	StatusInfo    = "INFO"
)

// Suite runs the official MCP conformance suite on node 26.
type Suite struct {
	node  string
	entry string
	dir   string // the harness: the working directory of every run
	out   string // a directory of the test's own for the suite's results
}

// Conformance returns the conformance suite after checking that the harness
// has it and node 26 at their pinned versions; see the package documentation
// for what happens when they are missing.
func Conformance(t testing.TB) *Suite {
	t.Helper()
	node := NewerNode(t)
	entry := filepath.Join(Package(t, ConformancePackage), "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		missing(t, fixHarness, "%s has no dist/index.js (%v)", ConformancePackage, err)
	}
	return &Suite{node: node, entry: entry, dir: Dir(t), out: t.TempDir()}
}

// Check is one check of a scenario, as the suite writes it to checks.json.
type Check struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	Status       string          `json:"status"`
	ErrorMessage string          `json:"errorMessage"`
	Details      json.RawMessage `json:"details"`
}

// ScenarioResult is the outcome of one scenario.
type ScenarioResult struct {
	Scenario string
	Checks   []Check
	// Output is what the suite printed: every check, and the reasons of the
	// failed ones.
	Output string
}

// Count returns how many checks have status.
func (r ScenarioResult) Count(status string) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == status {
			n++
		}
	}
	return n
}

// Passed reports whether the scenario passed: at least one check succeeded
// and none failed.
func (r ScenarioResult) Passed() bool {
	return r.Count(StatusSuccess) > 0 && r.Count(StatusFailure) == 0
}

// Failures returns the failed checks.
func (r ScenarioResult) Failures() []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Status == StatusFailure {
			out = append(out, c)
		}
	}
	return out
}

// Run runs each scenario against the MCP server at url (Streamable HTTP), one
// after another, and returns their results in order. A failed scenario is a
// result, not an error; Run returns an error ([ErrUnknownScenario], or a
// [*RunError] when the suite could not run a scenario and wrote no results)
// with the results of the scenarios before it.
func (s *Suite) Run(ctx context.Context, url string, scenarios ...string) ([]ScenarioResult, error) {
	for _, name := range scenarios {
		if _, ok := Lookup(name); !ok {
			return nil, fmt.Errorf("%w: %q", ErrUnknownScenario, name)
		}
	}
	results := make([]ScenarioResult, 0, len(scenarios))
	for _, name := range scenarios {
		r, err := s.runOne(ctx, url, name)
		if err != nil {
			return results, err
		}
		results = append(results, r)
	}
	return results, nil
}

// runOne runs one scenario with its results written under a directory of its
// own, and reads them back. The suite exits with status 1 when a check
// failed, which is a result; only a run that left no checks.json is an error.
func (s *Suite) runOne(ctx context.Context, url, name string) (ScenarioResult, error) {
	out, err := os.MkdirTemp(s.out, name+"-")
	if err != nil {
		return ScenarioResult{}, err
	}
	stdout, runErr := run(ctx, ConformancePackage+" "+name, s.node, s.dir, nil,
		s.entry, "server", "--url", url, "--scenario", name, "--output-dir", out)
	// The suite writes <out>/server-<scenario>-<timestamp>/checks.json.
	files, err := filepath.Glob(filepath.Join(out, "server-"+name+"-*", "checks.json"))
	if err != nil {
		return ScenarioResult{}, err
	}
	if len(files) != 1 {
		if runErr != nil {
			return ScenarioResult{}, runErr
		}
		return ScenarioResult{}, fmt.Errorf("nodetest: conformance %s: %d checks.json files in %s", name, len(files), out)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		return ScenarioResult{}, err
	}
	r := ScenarioResult{Scenario: name, Output: string(stdout)}
	if err := json.Unmarshal(b, &r.Checks); err != nil {
		return ScenarioResult{}, fmt.Errorf("nodetest: %s: %w", files[0], err)
	}
	return r, nil
}

// List returns the names of the server scenarios the installed suite has
// (`conformance list --server`), in its order.
func (s *Suite) List(ctx context.Context) ([]string, error) {
	out, err := run(ctx, ConformancePackage+" list", s.node, s.dir, nil, s.entry, "list", "--server")
	if err != nil {
		return nil, err
	}
	// Lines look like "  - tools-list [2025-06-18,2025-11-25]".
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		rest, ok := strings.CutPrefix(line, "  - ")
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, " ")
		names = append(names, name)
	}
	return names, nil
}
