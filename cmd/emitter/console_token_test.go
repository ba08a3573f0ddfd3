package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/internal/app/console"
)

// TestConsoleToken: console-token draws a token and the operators-file line
// that holds its digest and scope, which the console's operators file
// accepts; --operators-file collects lines in a private file; an operator who
// would see nothing, or a bad name, is refused.
func TestConsoleToken(t *testing.T) {
	e := newBareEnv(t, false)
	r := e.emit(t, "", "console-token", "--operator", "bob", "--tenants", "acme,globex", "--json")
	mustExit(t, r, exitOK)
	var out struct {
		Operator string `json:"operator"`
		Token    string `json:"token"`
		Line     string `json:"operators_file_line"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("output %q: %v", r.stdout, err)
	}
	if out.Operator != "bob" || !regexp.MustCompile(`^tco_[0-9a-f]{64}$`).MatchString(out.Token) || strings.Contains(out.Line, out.Token) {
		t.Fatalf("console-token printed %q", r.stdout)
	}
	ops, err := console.ParseOperators(strings.NewReader(out.Line+"\n"), "operators")
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := ops.Lookup(out.Token); !ok || id.Name != "bob" || id.Admin || !id.Sees("globex") || id.Sees("initech") {
		t.Fatalf("the line makes the token %+v, %v", id, ok)
	}
	file := filepath.Join(t.TempDir(), "operators")
	var tokens []string
	for _, args := range [][]string{{"--operator", "ada", "--admin"}, {"--operator", "cy", "--tenants", "acme"}} {
		r := e.emit(t, "", append([]string{"console-token", "--operators-file", file}, args...)...)
		mustExit(t, r, exitOK)
		tokens = append(tokens, strings.TrimSpace(r.stdout))
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("operators file: %v, %v; want mode 0600", fi, err)
	}
	ops, err = console.LoadOperators(file)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := ops.Lookup(tokens[0]); !ok || id.Name != "ada" || !id.Admin {
		t.Errorf("ada's token: %+v, %v", id, ok)
	}
	if id, ok := ops.Lookup(tokens[1]); !ok || id.Name != "cy" || id.Admin || !id.Sees("acme") {
		t.Errorf("cy's token: %+v, %v", id, ok)
	}
	mustExit(t, e.emit(t, "", "console-token", "--operator", "dee"), exitUsage)
	mustExit(t, e.emit(t, "", "console-token", "--operator", "dee", "--admin", "--tenants", "acme"), exitUsage)
	mustExit(t, e.emit(t, "", "console-token", "--operator", "d e", "--admin"), exitUsage)
	mustExit(t, e.emit(t, "", "console-token", "--operator", "dee", "--tenants", "a.b"), exitUsage)
}
