package docs_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// TestScripts runs the scripts under testdata: each runs the commands of the
// blocks it names and checks what they print.
func TestScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both programs and runs them")
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata",
		// The scripts' folders, under one the test removes (testscript's own
		// is left behind when -run picks some of the scripts).
		WorkdirRoot:         t.TempDir(),
		Setup:               setup(t),
		Cmds:                commands(),
		Condition:           condition,
		RequireExplicitExec: true,
	})
}

// tools are the programs a script may need beyond Go: how to get each.
var tools = map[string]string{
	"node":         "apt-get install nodejs npm (.ci/run does)",
	"promtool":     "apt-get install --no-install-recommends prometheus (.ci/run does)",
	"helm":         "make tools, and its directory on PATH (.ci/run does both)",
	"nats":         "make tools, and its directory on PATH (.ci/run does both)",
	"make":         "apt-get install make",
	"python3":      "apt-get install python3 python3-venv (.ci/run makes sure python3 -m venv works)",
	"psql":         "apt-get install postgresql-client (.ci/run installs postgresql, which brings it)",
	"initdb":       "apt-get install postgresql (.ci/run does); initdb is looked for in /usr/lib/postgresql/*/bin or TEST_PG_BIN",
	"redis-server": "apt-get install redis-server (.ci/run does)",
	"setsid":       "apt-get install util-linux",
}

// condition answers [have:TOOL]: whether TOOL is on PATH. Under CI=true a
// missing tool is an error, which fails the script, never a skip.
func condition(cond string) (bool, error) {
	name, ok := strings.CutPrefix(cond, "have:")
	if !ok {
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	fix, known := tools[name]
	if !known {
		return false, fmt.Errorf("no remedy known for %s: add it to tools", name)
	}
	if name == "node" {
		// The pages' client imports the MCP SDK the npm harness pins.
		if _, err := os.Stat(filepath.Join(root, "tests/mcp/node/node_modules/@modelcontextprotocol/sdk/package.json")); err != nil {
			if testenv.InCI() {
				return false, fmt.Errorf("the npm packages of tests/mcp/node are not installed (CI=true): npm ci there (.ci/run does)")
			}
			return false, nil
		}
	}
	if name == "initdb" {
		// PostgreSQL's server programs are not on PATH: dbproc looks where
		// Debian puts them.
		found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
		if d := os.Getenv("TEST_PG_BIN"); d != "" {
			found, _ = filepath.Glob(filepath.Join(d, "initdb"))
		}
		if len(found) == 0 {
			if testenv.InCI() {
				return false, fmt.Errorf("initdb is not installed (CI=true): %s", fix)
			}
			return false, nil
		}
		return true, nil
	}
	if _, err := exec.LookPath(name); err != nil {
		if testenv.InCI() {
			return false, fmt.Errorf("%s is not installed (CI=true): %s", name, fix)
		}
		return false, nil
	}
	return true, nil
}

// checkedElsewhere are the blocks a test of another package checks.
var checkedElsewhere = map[string]struct{ pkg, test, how string }{
	"README.md#with-docker-compose:1": {"tests/compose", "TestREADMEShowsTheHeader",
		"the block is the header of docker-compose.yml word for word; TestComposeConfig runs its lines that make .env and docker-compose config, TestExecutorAsComposed runs the executor with the file's environment and the header's emitter call against it (no Docker daemon: the images are neither pulled nor started)"},
}

// notRun are the blocks that are neither commands nor programs a reader
// runs, and why.
var notRun = map[string]string{
	"docs/PROTOCOL.md#6-the-idempotency-key:1": "a formula, not a command; the derivation it states is held by the key vectors (schemas/vectors/keys.json, idemkey's tests)",
}

var goUse = regexp.MustCompile(`docBlock\(t, "([^"]+)"\)`)

// goChecks returns, for each block a Go test of this package checks, the
// tests that name it.
func goChecks(t *testing.T) map[string][]string {
	t.Helper()
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	testFunc := regexp.MustCompile(`(?m)^func (Test\w+)\(`)
	out := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src := string(b)
		funcs := testFunc.FindAllStringSubmatchIndex(src, -1)
		for _, m := range goUse.FindAllStringSubmatchIndex(src, -1) {
			name := "(a helper)"
			for _, fn := range funcs {
				if fn[0] < m[0] {
					name = src[fn[2]:fn[3]]
				}
			}
			id := src[m[2]:m[3]]
			out[id] = append(out[id], name)
		}
	}
	return out
}

// TestEveryBlockChecked: every block of the pages is checked, by a script
// (which runs every command of a shell block it names, or says why not), a
// Go test of this package, the console runner, a test of another package, or
// is listed as not runnable, with its reason; and nothing names a
// block that is gone. It logs how each block is checked (go test -v).
func TestEveryBlockChecked(t *testing.T) {
	blocks := allBlocks(t)
	ids := map[string]block{}
	for _, b := range blocks {
		ids[b.ID] = b
	}
	how := map[string][]string{}
	for _, u := range readScripts(t) {
		for id := range u.used {
			if _, ok := ids[id]; !ok {
				t.Errorf("%s uses %s, which is no block of the pages", u.file, id)
			}
		}
		for id, used := range u.blocks {
			b, ok := ids[id]
			if !ok {
				t.Errorf("%s names %s, which is no block of the pages", u.file, id)
				continue
			}
			if !b.shell() {
				how[id] = append(how[id], "checked by "+u.file)
				continue
			}
			var notes []string
			for _, c := range b.commands() {
				switch v := used[c.N]; {
				case v == "":
					t.Errorf("%s names %s but leaves its command %d unrun (run it, or say why with notrun):\n%s", u.file, id, c.N, c.Text)
				case v == "dryrun":
					notes = append(notes, fmt.Sprintf("%d: make -n", c.N))
				case v == "built":
					notes = append(notes, fmt.Sprintf("%d: run before the scripts (BIN moved)", c.N))
				case strings.HasPrefix(v, "not run"):
					notes = append(notes, fmt.Sprintf("%d: %s", c.N, v))
				}
			}
			for n := range used {
				if n < 1 || n > len(b.commands()) {
					t.Errorf("%s uses command %d of %s, which has %d", u.file, n, id, len(b.commands()))
				}
			}
			desc := "run by " + u.file
			if len(notes) > 0 {
				desc += " (" + strings.Join(notes, "; ") + ")"
			}
			how[id] = append(how[id], desc)
		}
	}
	for id, tests := range goChecks(t) {
		if _, ok := ids[id]; !ok {
			t.Errorf("%s names %s, which is no block of the pages", strings.Join(tests, ", "), id)
			continue
		}
		how[id] = append(how[id], "checked by "+strings.Join(tests, ", "))
	}
	for _, b := range blocks {
		if b.Lang == "console" {
			how[b.ID] = append(how[b.ID], "run by TestConsoleBlocks (each $ command, its output compared)")
		}
	}
	for id, e := range checkedElsewhere {
		files, _ := filepath.Glob(filepath.Join(root, e.pkg, "*_test.go"))
		found := false
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			found = found || strings.Contains(string(b), "func "+e.test+"(")
		}
		if !found {
			t.Errorf("%s: %s has no test %s", id, e.pkg, e.test)
		}
		if _, ok := ids[id]; !ok {
			t.Errorf("checkedElsewhere names %s, which is no block of the pages", id)
		}
		how[id] = append(how[id], fmt.Sprintf("checked as far as one machine allows by %s %s: %s", e.pkg, e.test, e.how))
	}
	for _, list := range []struct {
		name    string
		entries map[string]string
	}{{"notRun", notRun}} {
		for id, why := range list.entries {
			if _, ok := ids[id]; !ok {
				t.Errorf("%s names %s, which is no block of the pages", list.name, id)
				continue
			}
			if len(how[id]) > 0 {
				t.Errorf("%s is in %s but also %s: take it out of %s", id, list.name, strings.Join(how[id], "; "), list.name)
			}
			if strings.TrimSpace(why) == "" {
				t.Errorf("%s is in %s without a reason", id, list.name)
			}
			how[id] = append(how[id], list.name+": "+why)
		}
	}
	var lines []string
	for _, b := range blocks {
		if len(how[b.ID]) == 0 {
			t.Errorf("%s is checked by nothing: give it a script under testdata (or a Go test calling docBlock), or list it in notRun with the reason\n%s", b, b.Text)
			continue
		}
		lines = append(lines, fmt.Sprintf("%s: %s", b, strings.Join(how[b.ID], "; ")))
	}
	t.Logf("how each block is checked:\n%s", strings.Join(lines, "\n"))
}
