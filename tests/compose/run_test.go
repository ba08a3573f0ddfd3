package compose_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// binaries builds the executor and the emitter once for the package's tests.
func binaries(t *testing.T) (executor, emitter string) {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "toolexec-compose-bin")
		for _, pkg := range []string{"./cmd/executor", "./cmd/emitter"} {
			if binErr != nil {
				return
			}
			cmd := exec.Command(goTool(), "build", "-o", filepath.Join(binDir, filepath.Base(pkg)), pkg)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				binErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return filepath.Join(binDir, "executor"), filepath.Join(binDir, "emitter")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// executorHelp is `executor --help`.
func executorHelp(t *testing.T) string {
	t.Helper()
	exe, _ := binaries(t)
	out, err := exec.Command(exe, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("executor --help: %v\n%s", err, out)
	}
	return string(out)
}

// dockerCompose returns the docker-compose command; without it the test
// fails under CI=true (.ci/run installs it) and is skipped elsewhere.
func dockerCompose(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("docker-compose")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("docker-compose is not installed (Debian's docker-compose package; .ci/run installs it)")
		}
		t.Skip("docker-compose is not installed: apt-get install --no-install-recommends docker-compose")
	}
	return p
}

// composeConfig runs `docker-compose --env-file envFile config` on the
// repository's file with no other variables than PATH and HOME.
func composeConfig(t *testing.T, envFile string) (string, error) {
	t.Helper()
	cmd := exec.Command(dockerCompose(t), "-f", filepath.Join(root, "docker-compose.yml"), "--env-file", envFile, "config")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return errOut.String(), err
	}
	return out.String(), nil
}

// setUpEnv runs the header's lines that make .env (those before `docker
// compose`) in a temporary folder holding a copy of .env.example, and returns
// the .env they made.
func setUpEnv(t *testing.T, cmds []string) string {
	t.Helper()
	dir := t.TempDir()
	example, err := os.ReadFile(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".env.example"), example, 0o600); err != nil {
		t.Fatal(err)
	}
	var script []string
	for _, c := range cmds {
		if strings.HasPrefix(c, "docker compose") {
			break
		}
		script = append(script, c)
	}
	if len(script) == 0 {
		t.Fatal("the header has no commands making .env before docker compose")
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", strings.Join(script, "\n"))
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the header's set-up %q: %v\n%s", script, err, out)
	}
	return filepath.Join(dir, ".env")
}

// TestComposeConfig: docker-compose accepts the file once .env is made as the
// header says, and refuses it, naming the variable, without .env or with
// .env.example copied unchanged: there is no default password.
func TestComposeConfig(t *testing.T) {
	dockerCompose(t)
	_, text := loadCompose(t)
	empty := filepath.Join(t.TempDir(), "empty.env")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, envFile := range map[string]string{"no .env": empty, ".env.example unchanged": filepath.Join(root, ".env.example")} {
		out, err := composeConfig(t, envFile)
		if err == nil || !strings.Contains(out, "PASSWORD in .env") {
			t.Errorf("%s: docker-compose config = %v\n%s\nwant a refusal naming the password to set", name, err, out)
		}
	}

	envFile := setUpEnv(t, header(t, text))
	env := readEnvFile(t, envFile)
	for _, k := range []string{"POSTGRES_PASSWORD", "REDIS_PASSWORD", "GRAFANA_ADMIN_PASSWORD"} {
		if len(env[k]) < 32 {
			t.Errorf("the header's set-up left %s = %q", k, env[k])
		}
	}
	if env["POSTGRES_PASSWORD"] == env["REDIS_PASSWORD"] {
		t.Error("the header's set-up gave two services one password")
	}
	out, err := composeConfig(t, envFile)
	if err != nil {
		t.Fatalf("docker-compose config with the header's .env: %v\n%s", err, out)
	}
	if !strings.Contains(out, "postgres://postgres:"+env["POSTGRES_PASSWORD"]+"@postgres:5432/") {
		t.Errorf("the resolved file does not carry .env's password into the executor's URL:\n%s", out)
	}
	if strings.Contains(out, "${") {
		t.Errorf("variables left unresolved:\n%s", out)
	}
}

// executorEnv is the executor service's environment, resolved with env, with
// the compose network's addresses replaced by this machine's.
func executorEnv(t *testing.T, env map[string]string, natsURL, metricsAddr, pgURL, redisURL string) []string {
	t.Helper()
	f, _ := loadCompose(t)
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range f.Services["executor"].Environment {
		v = resolve(v, env)
		switch k {
		case "TOOLEXEC_NATS_URL":
			v = natsURL
		case "TOOLEXEC_METRICS_ADDR":
			_, port, _ := strings.Cut(v, ":")
			if port != "8080" {
				t.Errorf("metrics port %s", port)
			}
			v = metricsAddr
		case "TOOLEXEC_POSTGRES_URL":
			v = pgURL
		case "TOOLEXEC_REDIS_URL":
			v = redisURL
		}
		out = append(out, k+"="+v)
	}
	return out
}

// TestExecutorAsComposed runs the executor with the environment the compose
// file gives it (only the addresses of the compose network replaced), with
// the JetStream store and with PostgreSQL in a schema nobody created: it
// becomes ready (the container's healthcheck command says so), the schema is
// ensured, and the header's `emitter call` books once, its retry with a fresh
// request_id answered from the record.
func TestExecutorAsComposed(t *testing.T) {
	exe, emitter := binaries(t)
	_, text := loadCompose(t)
	var call []string
	for _, c := range header(t, text) {
		if rest, ok := strings.CutPrefix(c, "docker compose run --rm emitter "); ok {
			call = shellWords(t, rest)
		}
	}
	if len(call) == 0 || call[0] != "call" {
		t.Fatalf("the header has no `docker compose run --rm emitter call` line")
	}
	pgBase := testenv.PostgresURL(t)
	redisURL := testenv.RedisURL(t)
	for _, store := range []string{"jetstream", "postgres"} {
		t.Run(store, func(t *testing.T) {
			srv := natstest.Start(t)
			schema := fmt.Sprintf("compose_%d", time.Now().UnixNano())
			metrics := testenv.FreeAddr(t)
			env := executorEnv(t, map[string]string{"TOOLEXEC_STORE": store, "POSTGRES_PASSWORD": "x", "REDIS_PASSWORD": "x"},
				srv.ClientURL(), metrics, pgBase, redisURL)
			env = append(env, "TOOLEXEC_POSTGRES_SCHEMA="+schema, "TOOLEXEC_DATA_DIR="+t.TempDir())
			cmd := exec.Command(exe)
			cmd.Env = env
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			var logs testenv.LogBuffer
			cmd.Stderr = &logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			ready := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					if strings.Contains(sc.Text(), "ready") {
						ready <- sc.Text()
					}
				}
				_, _ = io.Copy(io.Discard, stdout)
			}()
			select {
			case line := <-ready:
				if !strings.Contains(line, "store="+store) {
					t.Fatalf("ready line %q; want store=%s", line, store)
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("the executor was not ready within 60s:\n%s", logs.String())
			}

			// The container's healthcheck: the same command, the same environment.
			f, _ := loadCompose(t)
			hc := f.Services["executor"].Healthcheck.Test
			probe := exec.Command(exe, hc[2:]...)
			probe.Env = env
			if out, err := probe.CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "ready" {
				t.Errorf("healthcheck %v: %v\n%s", hc[1:], err, out)
			}

			if store == "postgres" {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				conn, err := pgx.Connect(ctx, pgBase)
				if err != nil {
					t.Fatal(err)
				}
				defer conn.Close(context.Background())
				t.Cleanup(func() { _, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
				var tables int
				if err := conn.QueryRow(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1", schema).Scan(&tables); err != nil || tables == 0 {
					t.Fatalf("schema %s has %d tables (%v): TOOLEXEC_ENSURE_SCHEMA did not create it", schema, tables, err)
				}
			}

			run := func(args []string) map[string]any {
				t.Helper()
				c := exec.Command(emitter, append(args, "--json")...)
				c.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "NATS_URL=" + srv.ClientURL()}
				out, err := c.Output()
				if err != nil {
					t.Fatalf("emitter %q: %v\n%s", args, err, out)
				}
				var a map[string]any
				if err := json.Unmarshal(out, &a); err != nil {
					t.Fatalf("emitter %q printed %q", args, out)
				}
				return a
			}
			first := run(call)
			if first["kind"] != "completed" {
				t.Fatalf("the header's call: %v", first)
			}
			retry := append([]string(nil), call...)
			for i, a := range retry {
				if strings.Contains(a, `"request_id"`) {
					retry[i] = strings.Replace(a, `"request_id":"`, `"request_id":"again-`, 1)
				}
			}
			if again := run(retry); again["kind"] != "deduplicated" || again["outcome"] != first["outcome"] {
				t.Errorf("its retry: %v; want deduplicated with the first outcome %v", again, first["outcome"])
			}
		})
	}
}

// shellWords splits a command line the way the shell would for the header's
// quoting: single quotes and plain words.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case quoted && r == '\'':
			quoted = false
		case quoted:
			cur.WriteRune(r)
		case r == '\'':
			quoted, inWord = true, true
		case r == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		t.Fatalf("unbalanced quote in %q", s)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
