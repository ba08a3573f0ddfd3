package docs_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/tool/toolsfile"
)

// snippetFile is the package the Go snippets are compiled in. It exists only
// in the go command's overlay: nothing is written to the repository.
const snippetFile = "tests/docs/internal/snippets/snippets.go"

// TestGoSnippets compiles the README's Go snippets as written, each as the
// body of a function whose parameters are what the snippet takes from its
// surroundings (a context, a connection, a tool, the types and values its
// prose describes), and finds no result dropped with _.
func TestGoSnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	indent := func(b block) string {
		var out strings.Builder
		for _, l := range strings.SplitAfter(b.Text, "\n") {
			if strings.TrimSpace(l) != "" {
				out.WriteString("\t")
			}
			out.WriteString(l)
		}
		return out.String()
	}
	// A snippet is copied as it is: one that drops an error teaches dropping it.
	for _, id := range []string{"README.md#from-go:1", "README.md#from-go:2", "README.md#declaring-tools:1", "README.md#tool-bodies-in-any-language:1"} {
		for _, l := range strings.Split(docBlock(t, id).Text, "\n") {
			if regexp.MustCompile(`,\s*_\s*:?=`).MatchString(l) {
				t.Errorf("%s drops a result (an error, as like as not): %s", id, strings.TrimSpace(l))
			}
		}
	}
	src := `package snippets

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/worker"
)

var (
	_ = errors.As
	_ = fmt.Println
	_ = log.Fatal
	_ = os.Getenv
	_ = time.Second
	_ *nats.Conn
	_ = toolexec.NewClient
	_ events.Answer
	_ tool.Spec
	_ = worker.Serve
)

// From Go: a caller.
func caller(ctx context.Context) {
` + indent(docBlock(t, "README.md#from-go:1")) + `}

// From Go: an executor.
func executor(ctx context.Context, nc *nats.Conn, book *tool.Tool) {
` + indent(docBlock(t, "README.md#from-go:2")) + `	_ = err
}

// Declaring tools: what the prose around the snippet names.
type BookArgs struct {
	Flight string ` + "`json:\"flight\"`" + `
	Seats  int    ` + "`json:\"seats\"`" + `
}

var airline interface {
	Book(ctx context.Context, flight, idempotencyKey string) (string, error)
}

func declare() {
` + indent(docBlock(t, "README.md#declaring-tools:1")) + `	_, _ = book, err
}

// Tool bodies in any language: a Go worker of the tool declared above.
func serve(nc *nats.Conn, book *tool.Tool) {
` + indent(docBlock(t, "README.md#tool-bodies-in-any-language:1")) + `}
`
	dir := t.TempDir()
	file := filepath.Join(dir, "snippets.go")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(repoRoot(t), snippetFile): file}})
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "build", "-overlay", overlayFile, "./"+filepath.Dir(snippetFile))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		numbered := ""
		for i, l := range strings.Split(src, "\n") {
			numbered += fmt.Sprintf("%4d  %s\n", i+1, l)
		}
		t.Fatalf("the snippets do not compile: %v\n%s\n%s", err, out, numbered)
	}
}

// TestToolsFileBlock parses the README's tools file with the executor's
// parser and holds it to examples/tools.yaml, of which it is a short form:
// the same variables, and the same book (its kind, key and check arguments,
// timeout, URL and authorization).
func TestToolsFileBlock(t *testing.T) {
	parse := func(name string, data []byte) (*toolsfile.File, []string) {
		t.Helper()
		var used []string
		f, err := toolsfile.Parse(data, name, func(v string) (string, bool) {
			if !slices.Contains(used, v) {
				used = append(used, v)
			}
			return map[string]string{"AIRLINE_URL": "http://airline.test", "AIRLINE_TOKEN": "secret"}[v], true
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		slices.Sort(used)
		return f, used
	}
	b := docBlock(t, "README.md#declaring-tools:2")
	readme, readmeVars := parse(b.ID, []byte(b.Text))
	example, err := os.ReadFile(filepath.Join(root, "examples", "tools.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ex, exVars := parse("examples/tools.yaml", example)
	if !slices.Equal(readmeVars, exVars) {
		t.Errorf("the README's tools file reads %v, examples/tools.yaml %v", readmeVars, exVars)
	}
	find := func(f *toolsfile.File, name string) toolsfile.Declaration {
		for _, d := range f.Tools {
			if d.Spec.Name == name {
				return d
			}
		}
		t.Fatalf("%s declares no %s", f.Name, name)
		return toolsfile.Declaration{}
	}
	got, want := find(readme, "book"), find(ex, "book")
	if _, err := got.Build(); err != nil {
		t.Errorf("the README's book: %v", err)
	}
	gp, wp := got.Spec.Idempotency, want.Spec.Idempotency
	if gp == nil || wp == nil || gp.Kind != wp.Kind || !slices.Equal(gp.KeyArguments, wp.KeyArguments) || !slices.Equal(gp.CheckArguments, wp.CheckArguments) {
		t.Errorf("book's policy: the README %+v, examples/tools.yaml %+v", gp, wp)
	}
	if got.Spec.Timeout != want.Spec.Timeout {
		t.Errorf("book's timeout: the README %v, examples/tools.yaml %v", got.Spec.Timeout, want.Spec.Timeout)
	}
	if got.Endpoint.URL != want.Endpoint.URL || got.Endpoint.Headers["Authorization"] != want.Endpoint.Headers["Authorization"] {
		t.Errorf("book's endpoint: the README %s %v, examples/tools.yaml %s %v", got.Endpoint.URL, got.Endpoint.Headers, want.Endpoint.URL, want.Endpoint.Headers)
	}
}

// TestRedisConfigBlock: the README's Redis configuration is what
// internal/testkit/dbproc runs Redis with in the restart tests, as the README
// says, setting by setting.
func TestRedisConfigBlock(t *testing.T) {
	b := docBlock(t, "README.md#choosing-a-store:2")
	src, err := os.ReadFile(filepath.Join(root, "internal", "testkit", "dbproc", "redis.go"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(b.Text, "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			t.Errorf("not a Redis setting (name value): %q", line)
			continue
		}
		arg := regexp.MustCompile(`"--` + regexp.QuoteMeta(f[0]) + `",\s*"` + regexp.QuoteMeta(f[1]) + `"`)
		if !arg.Match(src) {
			t.Errorf("dbproc does not run Redis with %s %s", f[0], f[1])
		}
		n++
	}
	if n == 0 {
		t.Fatal("the block holds no setting")
	}
}

// TestWorkerToolsFileBlock parses the README's tools file of a tool served by
// workers with the executor's parser: one tool, rebook, whose body workers
// serve on toolexec.body.rebook, with the timeout the comment says.
func TestWorkerToolsFileBlock(t *testing.T) {
	b := docBlock(t, "README.md#tool-bodies-in-any-language:2")
	f, err := toolsfile.Parse([]byte(b.Text), b.ID, nil)
	if err != nil {
		t.Fatalf("%s: %v", b.ID, err)
	}
	if len(f.NATSTools) != 1 || len(f.Tools)+len(f.MCPTools) != 0 {
		t.Fatalf("%s declares %d nats tools and %d others, want rebook alone", b.ID, len(f.NATSTools), len(f.Tools)+len(f.MCPTools))
	}
	p := f.NATSTools[0].Pending()
	if p.Spec.Name != "rebook" || p.Subject() != "toolexec.body.rebook" || p.Spec.Timeout != 20*time.Second {
		t.Errorf("%s declares %s on %s, timeout %v", b.ID, p.Spec.Name, p.Subject(), p.Spec.Timeout)
	}
}
