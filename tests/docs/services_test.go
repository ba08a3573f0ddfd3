package docs_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/tesserix/toolexec/internal/testkit/dbproc"
)

// scriptTB lets a script start what testing.TB helpers start: failures fail
// the script, cleanups run when it ends. What it does not override is the
// test's own (its name, its deadline).
type scriptTB struct {
	testing.TB
	ts *testscript.TestScript
}

func (s scriptTB) Helper()                         {}
func (s scriptTB) Cleanup(f func())                { s.ts.Defer(f) }
func (s scriptTB) Logf(format string, args ...any) { s.ts.Logf(format, args...) }
func (s scriptTB) Log(args ...any)                 { s.ts.Logf("%s", fmt.Sprint(args...)) }
func (s scriptTB) Errorf(format string, args ...any) {
	s.ts.Fatalf(format, args...)
}
func (s scriptTB) Fatalf(format string, args ...any) { s.ts.Fatalf(format, args...) }
func (s scriptTB) Fatal(args ...any)                 { s.ts.Fatalf("%s", fmt.Sprint(args...)) }

// Skips happen outside CI only (dbproc fails under CI=true); a script that
// would skip fails instead, naming what is missing.
func (s scriptTB) Skipf(format string, args ...any) {
	s.ts.Fatalf("missing (guard the script with a condition): "+format, args...)
}
func (s scriptTB) Skip(args ...any) { s.Skipf("%s", fmt.Sprint(args...)) }

func (s scriptTB) TempDir() string {
	dir, err := os.MkdirTemp(s.ts.Getenv("WORK"), "tmp")
	s.ts.Check(err)
	return dir
}

// setenv sets a variable for the script's commands, background ones included.
func setenv(ts *testscript.TestScript, k, v string) {
	ts.Setenv(k, v)
	s := state(ts)
	s.env = append(s.env, k+"="+v)
}

// servicesCommands are the script commands that start servers of the
// script's own and talk to them.
//
//	postgres                 a PostgreSQL server of its own (dbproc): PG_ADDR, and
//	                         PGHOST, PGPORT and PGUSER for the client programs
//	redis                    a Redis server of its own (dbproc): REDIS_ADDR
//	http [-status N] [-H 'Name: value']... URL OUT
//	                         GET URL (no redirect followed); the status must be N
//	                         (200); the body goes to OUT
var servicesCommands = map[string]func(*testscript.TestScript, bool, []string){
	"postgres": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 0 {
			ts.Fatalf("usage: postgres")
		}
		pg := dbproc.StartPostgres(scriptTB{TB: state(ts).t, ts: ts})
		host, port, _ := strings.Cut(pg.Addr(), ":")
		setenv(ts, "PG_ADDR", pg.Addr())
		setenv(ts, "PGHOST", host)
		setenv(ts, "PGPORT", port)
		setenv(ts, "PGUSER", "postgres")
	},
	"redis": func(ts *testscript.TestScript, neg bool, args []string) {
		if neg || len(args) != 0 {
			ts.Fatalf("usage: redis")
		}
		r := dbproc.StartRedis(scriptTB{TB: state(ts).t, ts: ts})
		setenv(ts, "REDIS_ADDR", r.Addr())
	},
	"http": func(ts *testscript.TestScript, neg bool, args []string) {
		status := 200
		var headers [][2]string
		for len(args) > 2 {
			switch args[0] {
			case "-status":
				v, err := strconv.Atoi(args[1])
				ts.Check(err)
				status, args = v, args[2:]
			case "-H":
				k, v, ok := strings.Cut(args[1], ":")
				if !ok {
					ts.Fatalf("-H wants 'Name: value'")
				}
				headers, args = append(headers, [2]string{k, strings.TrimSpace(v)}), args[2:]
			default:
				ts.Fatalf("unknown option %q", args[0])
			}
		}
		if neg || len(args) != 2 {
			ts.Fatalf("usage: http [-status N] [-H 'Name: value']... URL OUT")
		}
		req, err := http.NewRequest(http.MethodGet, args[0], nil)
		ts.Check(err)
		for _, h := range headers {
			req.Header.Set(h[0], h[1])
		}
		client := &http.Client{
			Timeout:       30 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		resp, err := client.Do(req)
		ts.Check(err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		ts.Check(err)
		ts.Check(os.WriteFile(ts.MkAbs(args[1]), body, 0o600))
		if resp.StatusCode != status {
			ts.Fatalf("GET %s: %s, want %d:\n%s", args[0], resp.Status, status, body)
		}
	},
}
