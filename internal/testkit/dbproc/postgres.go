package dbproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Postgres is a PostgreSQL server of one test's own: a fresh cluster on a free
// port of 127.0.0.1, the user postgres trusted without a password. Its methods
// are safe for concurrent use.
type Postgres struct {
	bin  string // the directory holding initdb and postgres
	dir  string // data/, the unix socket and server.log
	port int
	user osUser

	mu sync.Mutex // protects p
	p  *proc      // the running server; nil while stopped
}

// StartPostgres creates a cluster with initdb and starts a server on it. The
// server is stopped and its files removed when the test ends. Without the
// binaries (or, running as root, without the postgres user) the test is skipped,
// or fails under CI=true.
func StartPostgres(t testing.TB) *Postgres {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		missing(t, "PostgreSQL server binaries", err,
			"install them (apt-get install postgresql) or set TEST_PG_BIN to the directory holding initdb and postgres")
	}
	u, err := serverUser("postgres")
	if err != nil {
		missing(t, "the postgres system user", err, "installing PostgreSQL (apt-get install postgresql) creates it")
	}
	pg := &Postgres{bin: bin, user: u}
	pg.dir = privateDir(t, "dbproc-pg-", u)
	if err := runAs(u.cred, filepath.Join(bin, "initdb"), "-D", pg.dataDir(), "-U", "postgres",
		"--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C"); err != nil {
		t.Fatalf("dbproc: initdb: %v", err)
	}
	t.Cleanup(pg.shutdown)
	// Another process may take the port between the probe and the bind.
	for attempt := 1; ; attempt++ {
		if pg.port, err = freePort(); err == nil {
			err = pg.start()
		}
		if err == nil {
			return pg
		}
		if attempt == 3 {
			t.Fatalf("dbproc: starting PostgreSQL: %v", err)
		}
	}
}

// postgresBin finds the directory of initdb and postgres: TEST_PG_BIN, else the
// newest /usr/lib/postgresql/<version>/bin.
func postgresBin() (string, error) {
	candidates := []string{}
	if d := os.Getenv("TEST_PG_BIN"); d != "" {
		candidates = append(candidates, d)
	} else {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) > pgVersion(dirs[j]) })
		candidates = append(candidates, dirs...)
	}
	for _, d := range candidates {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	if len(candidates) == 0 {
		return "", errors.New("no /usr/lib/postgresql/*/bin")
	}
	return "", fmt.Errorf("no initdb and postgres in %s", strings.Join(candidates, ", "))
}

// pgVersion reads the major version from /usr/lib/postgresql/<version>/bin.
func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

func (pg *Postgres) dataDir() string { return filepath.Join(pg.dir, "data") }
func (pg *Postgres) logPath() string { return filepath.Join(pg.dir, "server.log") }

// URL returns the server's connection URL (TCP, user postgres, database
// postgres, no TLS).
func (pg *Postgres) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", pg.port)
}

// Addr returns the server's host:port.
func (pg *Postgres) Addr() string { return fmt.Sprintf("127.0.0.1:%d", pg.port) }

// URLVia returns the connection URL with addr (a proxy's host:port) in place of
// the server's own address.
func (pg *Postgres) URLVia(addr string) string {
	return fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", addr)
}

// Running reports whether the server process is up.
func (pg *Postgres) Running() bool {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	return pg.p != nil && !pg.p.exited()
}

// Start starts the server again after Stop or Crash, on the same port with the
// same data, and waits until it accepts connections (crash recovery included).
func (pg *Postgres) Start(t testing.TB) {
	t.Helper()
	if err := pg.start(); err != nil {
		t.Fatalf("dbproc: starting PostgreSQL: %v", err)
	}
}

// Stop shuts the server down the way an operator would (a fast shutdown:
// sessions are ended, everything committed is checkpointed) and waits for it to
// exit.
func (pg *Postgres) Stop(t testing.TB) {
	t.Helper()
	if err := pg.stop(syscall.SIGINT); err != nil {
		t.Fatalf("dbproc: stopping PostgreSQL: %v", err)
	}
}

// Crash stops the server as a crash would (an immediate shutdown: no checkpoint;
// the next start replays the write-ahead log) and waits for it to exit.
func (pg *Postgres) Crash(t testing.TB) {
	t.Helper()
	if err := pg.stop(syscall.SIGQUIT); err != nil {
		t.Fatalf("dbproc: crashing PostgreSQL: %v", err)
	}
}

// Restart is Stop then Start.
func (pg *Postgres) Restart(t testing.TB) {
	t.Helper()
	pg.Stop(t)
	pg.Start(t)
}

func (pg *Postgres) start() error {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.p != nil && !pg.p.exited() {
		return errors.New("already running")
	}
	p, err := startProc(filepath.Join(pg.bin, "postgres"), []string{
		"-D", pg.dataDir(),
		"-p", strconv.Itoa(pg.port),
		"-k", pg.dir,
		"-c", "listen_addresses=127.0.0.1",
		"-c", "shared_buffers=16MB",
		"-c", "max_connections=100",
		"-c", "fsync=on",
		"-c", "synchronous_commit=on",
	}, pg.user.cred, pg.logPath())
	if err != nil {
		return err
	}
	if err := waitReady(p, pg.ping); err != nil {
		_ = p.stop(syscall.SIGQUIT)
		return fmt.Errorf("%w\nserver log:\n%s", err, logTail(pg.logPath(), 2000))
	}
	pg.p = p
	return nil
}

func (pg *Postgres) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, pg.URL())
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.Ping(ctx)
}

func (pg *Postgres) stop(sig syscall.Signal) error {
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.p == nil {
		return nil
	}
	err := pg.p.stop(sig)
	pg.p = nil
	return err
}

// shutdown is the cleanup: a fast shutdown, ignoring errors.
func (pg *Postgres) shutdown() { _ = pg.stop(syscall.SIGINT) }
