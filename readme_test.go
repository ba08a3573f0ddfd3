package toolexec_test

import (
	"bufio"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestREADMEPackageMap holds the README's package map to `go list ./...`:
// every package of the module stands in a row, and every package a row names
// exists.
func TestREADMEPackageMap(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(readme), "| package | job |")
	if !ok {
		t.Fatal("README.md has no package map (a table headed | package | job |)")
	}
	named := map[string]bool{} // package paths below the module, "" for the root
	prefixes := []string{}     // rows naming a folder with …
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(first, -1) {
			switch p := m[1]; {
			case p == "toolexec":
				named[""] = true
			case strings.HasSuffix(p, "/…"):
				prefixes = append(prefixes, strings.TrimSuffix(p, "…"))
			default:
				named[p] = true
			}
		}
	}
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Fatalf("go list ./...: %v", err)
	}
	const module = "github.com/tesserix/toolexec"
	listed := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(strings.TrimPrefix(p, module), "/")
		listed[rel] = true
		covered := named[rel]
		for _, pre := range prefixes {
			covered = covered || strings.HasPrefix(rel, pre)
		}
		if !covered {
			t.Errorf("package %s is missing from README.md's package map", p)
		}
	}
	for p := range named {
		if !listed[p] && p != "bench" { // bench is a module of its own
			t.Errorf("README.md's package map names %q, which go list ./... does not list", p)
		}
	}
}

// TestREADMERunItYourself runs the commands of the README's "Run it yourself"
// section in order, as written but for the port (a free one instead of 4222)
// and `go run ./cmd/X` (the built program): the executor in the background,
// then each emitter call. The first call books; the second, its retry, must be
// answered TOOL_DEDUPLICATED with the same PNR.
func TestREADMERunItYourself(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both programs")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "## Run it yourself\n")
	if !ok {
		t.Fatal(`README.md has no "## Run it yourself" section`)
	}
	_, block, ok := strings.Cut(section, "```sh\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 {
		t.Fatal(`the "Run it yourself" section has no sh block`)
	}
	var lines []string
	for _, l := range strings.Split(block, "\n") {
		if strings.HasPrefix(l, "go run ./cmd/") {
			lines = append(lines, l)
		}
	}
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "go run ./cmd/executor ") {
		t.Fatalf("want the executor, then emitter calls; the block has %q", lines)
	}

	bin := t.TempDir()
	for _, p := range []string{"executor", "emitter"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, p), "./cmd/"+p).CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", p, err, out)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	work := t.TempDir() // the executor's ./.toolexec goes here
	shell := func(line string) *exec.Cmd {
		line = strings.ReplaceAll(line, "4222", port)
		line = strings.Replace(line, "go run ./cmd/", bin+"/", 1)
		cmd := exec.Command("sh", "-c", line)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "NATS_URL=", "NATS_CONTEXT=", "HOME="+work, "XDG_CONFIG_HOME=")
		return cmd
	}

	exe := shell(lines[0])
	exe.Args[2] = "exec " + exe.Args[2] // so that the signal reaches the executor itself
	var exeOut strings.Builder
	pr, pw := io.Pipe()
	exe.Stdout, exe.Stderr = pw, &exeOut
	if err := exe.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = exe.Process.Signal(syscall.SIGTERM)
		_ = exe.Wait()
		_ = pw.Close()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "toolexec executor ready") {
				ready <- sc.Text()
			}
		}
	}()
	select {
	case line := <-ready:
		if !strings.Contains(line, "127.0.0.1:"+port) {
			t.Fatalf("the executor is not on port %s: %q", port, line)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the executor did not start within 60s: %s", exeOut.String())
	}

	var answers []string
	for _, line := range lines[1:] {
		if !strings.Contains(line, " call ") {
			continue // watch runs until stopped
		}
		out, err := shell(line).Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", line, err, out)
		}
		answers = append(answers, string(out))
	}
	if len(answers) != 2 {
		t.Fatalf("want two calls in the section, found %d", len(answers))
	}
	pnr := regexp.MustCompile(`(?m)^  outcome: (\S+)$`)
	first, second := pnr.FindStringSubmatch(answers[0]), pnr.FindStringSubmatch(answers[1])
	if !strings.HasPrefix(answers[0], "completed  book  ") || first == nil {
		t.Fatalf("the first call: %q, want completed with a PNR", answers[0])
	}
	if !strings.HasPrefix(answers[1], "TOOL_DEDUPLICATED  book  ") || second == nil || second[1] != first[1] {
		t.Fatalf("the retry: %q, want TOOL_DEDUPLICATED with the PNR %s", answers[1], first[1])
	}
}
