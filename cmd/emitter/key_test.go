package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/tesserix/toolexec/internal/testkit/keyvectors"
)

type vector = keyvectors.Vector

// keyArgs is the emitter key command line for v, without the program name.
func keyArgs(v vector, extra ...string) []string {
	args := []string{"key", "--tenant", v.Tenant, "--run", v.RunID, "--tool", v.Tool, "--args", v.ArgumentsJSON}
	if v.KeyArguments != nil {
		args = append(args, "--key-arguments", strings.Join(v.KeyArguments, ","))
	}
	return append(args, extra...)
}

type result struct {
	code           int
	stdout, stderr string
}

func runInProcess(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

// checkResult checks the outcome of emitter key for v (with --canonical or not).
func checkResult(t *testing.T, v vector, canonical bool, r result) {
	t.Helper()
	if v.Error != "" {
		if r.code != exitUsage || r.stdout != "" {
			t.Fatalf("exit %d, stdout %q; want exit 2 and nothing on stdout", r.code, r.stdout)
		}
		if !strings.Contains(r.stderr, v.Error) {
			t.Fatalf("stderr %q does not name the code %s", r.stderr, v.Error)
		}
		return
	}
	want := v.Key + "\n"
	if canonical {
		want = v.Canonical + "\n"
	}
	if r.code != exitOK || r.stdout != want || r.stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit 0, stdout %q", r.code, r.stdout, r.stderr, want)
	}
}

// TestKeyVectors runs every vector, shared and published, through emitter key, with
// and without --canonical.
func TestKeyVectors(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"../../idemkey/testdata/keys.json", "../../schemas/vectors/keys.json"} {
		for _, v := range keyvectors.Read(t, path).Vectors {
			t.Run(filepath.Base(filepath.Dir(path))+"/"+v.Name, func(t *testing.T) {
				t.Parallel()
				checkResult(t, v, false, runInProcess(t, "", keyArgs(v)...))
				checkResult(t, v, true, runInProcess(t, "", keyArgs(v, "--canonical")...))
			})
		}
	}
}

func TestKeyCommandLine(t *testing.T) {
	t.Parallel()
	const (
		seedKey       = "dcaca72c477ec402dd504f145eb9fa54d2964d52f26edc7cd656608baca21496"
		allKey        = "29784ea55b80353aed6df19c278516905351b03db7dd199d05408c0bffd8ea18"
		noneKey       = "01faa1a86fd1fca32c1799117171139fe7f84ffc5d854780a893a7bb5397ae67"
		noneCanonical = `{"arguments":{},"run_id":"run_1","tenant":"acme","tool":"book"}`
	)
	base := []string{"key", "--tenant", "acme", "--run", "run_1", "--tool", "book"}
	with := func(args ...string) []string { return append(append([]string{}, base...), args...) }
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string // substring; "" means stderr must be empty
	}{
		{"key argument", with("--args", `{"flight":"BA117","request_id":"a"}`, "--key-arguments", "flight"), "", 0, seedKey + "\n", ""},
		{"equals form", with("--args={\"flight\":\"BA117\",\"request_id\":\"b\"}", "--key-arguments=flight"), "", 0, seedKey + "\n", ""},
		{"every argument without the flag", with("--args", `{"seats":2,"flight":"BA117"}`), "", 0, allKey + "\n", ""},
		{"empty key arguments", with("--args", `{"flight":"BA117"}`, "--key-arguments", ""), "", 0, noneKey + "\n", ""},
		{"empty key arguments, equals form", with("--args", `{"flight":"BA117"}`, "--key-arguments="), "", 0, noneKey + "\n", ""},
		{"canonical", with("--args", `{"flight":"BA117"}`, "--key-arguments", "", "--canonical"), "", 0, noneCanonical + "\n", ""},
		{"arguments from stdin", with("--args", "-", "--key-arguments", "flight"), "{\"request_id\":\"z\",\n\"flight\":\"BA117\"}\n", 0, seedKey + "\n", ""},
		{"empty stdin", with("--args", "-"), "", exitUsage, "", "invalid_json"},
		{"underivable", with("--args", `{"request_id":"a"}`, "--key-arguments", "flight"), "", exitUsage, "", `key_underivable`},
		{"underivable names the argument", with("--args", `{}`, "--key-arguments", "flight,seats"), "", exitUsage, "", `"flight"`},
		{"invalid JSON", with("--args", `{"flight":`), "", exitUsage, "", "invalid_json"},
		{"not an object", with("--args", `[1,2]`), "", exitUsage, "", "arguments_not_object"},
		{"number out of range", with("--args", `{"n":1e999999999}`), "", exitUsage, "", "number_out_of_range"},
		{"lone surrogate", with("--args", `{"s":"\ud800"}`), "", exitUsage, "", "invalid_unicode"},
		{"invalid UTF-8 tenant", []string{"key", "--tenant", "a\xff", "--run", "r", "--tool", "t", "--args", "{}"}, "", exitUsage, "", "invalid_unicode"},
		{"missing flags", []string{"key", "--tenant", "acme", "--args", "{}"}, "", exitUsage, "", `required flag(s) "run", "tool" not set`},
		{"no flags", []string{"key"}, "", exitUsage, "", "required flag"},
		{"unknown flag", with("--args", "{}", "--bogus"), "", exitUsage, "", "unknown flag: --bogus"},
		{"stray argument", with("--args", "{}", "extra"), "", exitUsage, "", `unexpected argument "extra"`},
		{"unknown command", []string{"nope"}, "", exitUsage, "", `unknown command "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := runInProcess(t, tt.stdin, tt.args...)
			if r.code != tt.wantCode || r.stdout != tt.wantStdout {
				t.Fatalf("exit %d, stdout %q (stderr %q); want exit %d, stdout %q", r.code, r.stdout, r.stderr, tt.wantCode, tt.wantStdout)
			}
			if tt.wantStderr == "" && r.stderr != "" {
				t.Fatalf("stderr %q, want none", r.stderr)
			}
			if !strings.Contains(r.stderr, tt.wantStderr) {
				t.Fatalf("stderr %q does not contain %q", r.stderr, tt.wantStderr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	r := runInProcess(t, "", "key", "--help")
	if r.code != exitOK || !strings.Contains(r.stdout, "--key-arguments") || !strings.Contains(r.stdout, "(required)") {
		t.Fatalf("key --help: exit %d, stdout %q", r.code, r.stdout)
	}
	r = runInProcess(t, "")
	if r.code != exitOK || !strings.Contains(r.stdout, "key") {
		t.Fatalf("emitter: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestRunErrorStatus checks the exit status of errors that running commands return:
// their own status when they carry one, 1 otherwise.
func TestRunErrorStatus(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want int
	}{
		{errors.New("backend down"), exitFailure},
		{badInput(errors.New("bad")), exitUsage},
	} {
		root := newRootCmd()
		failErr := tt.err
		root.AddCommand(&cobra.Command{Use: "fail", RunE: func(*cobra.Command, []string) error { return failErr }})
		markRunErrors(root)
		var stderr bytes.Buffer
		root.SetArgs([]string{"fail"})
		root.SetErr(&stderr)
		_, err := root.ExecuteC()
		var ee *exitError
		if !errors.As(err, &ee) || ee.code != tt.want {
			t.Errorf("error %v: got %v, want exit status %d", tt.err, err, tt.want)
		}
	}
}

var hexKey = regexp.MustCompile(`^[0-9a-f]{64}\n$`)

// TestBinary builds emitter and runs it as a process, as clients in other languages
// do.
func TestBinary(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "emitter")
	build := exec.Command(goTool, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	exe := func(t *testing.T, stdin string, args ...string) result {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Stdin = strings.NewReader(stdin)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			code = exitErr.ExitCode()
		} else if err != nil {
			t.Fatalf("run %s: %v", bin, err)
		}
		return result{code, stdout.String(), stderr.String()}
	}

	vectors := keyvectors.Read(t, "../../idemkey/testdata/keys.json").Vectors
	picked := map[string]bool{
		"seed example": true, "all arguments when key_arguments is null": true,
		"empty key_arguments: tenant+run+tool alone": true, "NFC: decomposed spelling is the same key": true,
		"a missing key argument makes the key underivable": true, "numbers beyond a double are refused": true,
		"lone surrogates are refused": true, "arguments must be an object": true, "duplicate member names are refused": true,
	}
	ran := 0
	for _, v := range vectors {
		if !picked[v.Name] {
			continue
		}
		ran++
		t.Run(v.Name, func(t *testing.T) {
			r := exe(t, "", keyArgs(v)...)
			if v.Error == "" && !hexKey.MatchString(r.stdout) {
				t.Fatalf("stdout %q is not 64 hex digits and a newline", r.stdout)
			}
			if v.Error != "" && r.stderr == "" {
				t.Fatal("no explanation on stderr")
			}
			checkResult(t, v, false, r)
			checkResult(t, v, true, exe(t, "", keyArgs(v, "--canonical")...))
			// The same call with the arguments on stdin.
			stdinArgs := keyArgs(vector{Tenant: v.Tenant, RunID: v.RunID, Tool: v.Tool, ArgumentsJSON: "-", KeyArguments: v.KeyArguments})
			checkResult(t, v, false, exe(t, v.ArgumentsJSON, stdinArgs...))
		})
	}
	if ran != len(picked) {
		t.Fatalf("ran %d of the %d picked vectors: a name changed in the shared file", ran, len(picked))
	}
	t.Run("missing required flag", func(t *testing.T) {
		r := exe(t, "", "key", "--tenant", "acme", "--run", "run_1", "--args", "{}")
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, `"tool"`) {
			t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 naming --tool", r.code, r.stdout, r.stderr)
		}
	})
}
