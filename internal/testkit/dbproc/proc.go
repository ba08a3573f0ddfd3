package dbproc

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// How long a server may take to come up, and to go down after a polite signal
// before it is killed.
const (
	readyTimeout = 60 * time.Second
	stopTimeout  = 30 * time.Second
)

// proc is one run of a server binary, a child of this process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once the process has exited and err is set
	err  error         // what Wait returned
}

// startProc starts name with args as a child that dies with this process,
// running as cred when not nil, with its output appended to logPath.
func startProc(name string, args []string, cred *syscall.Credential, logPath string) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true, // ^C in a terminal reaches the test, which stops the server itself
		Credential: cred,
	}
	dieWithParent(cmd.SysProcAttr)
	p := &proc{cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that started the child
		// ends, not the process: keep this goroutine, and so its thread, until
		// the child is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logf.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return p, nil
}

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig and waits for the process to exit, killing it if it has not
// after stopTimeout. It returns an error if it had to kill it.
func (p *proc) stop(sig syscall.Signal) error {
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopTimeout):
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	return fmt.Errorf("%s did not exit within %v of %v and was killed", filepath.Base(p.cmd.Path), stopTimeout, sig)
}

// runAs runs name with args to completion as cred (nil: as this process),
// returning its combined output in the error if it fails.
func runAs(cred *syscall.Credential, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w\n%s", filepath.Base(name), err, out.Bytes())
	}
	return nil
}

// osUser is who a server runs as: nil credentials for this process's own user,
// or, for root, the named system user.
type osUser struct {
	cred     *syscall.Credential
	uid, gid int
}

// serverUser returns the user to run a server as: this process's user, unless
// it is root and name is not empty (a server that refuses to run as root, as
// PostgreSQL does), in which case the system user name.
func serverUser(name string) (osUser, error) {
	if os.Geteuid() != 0 || name == "" {
		return osUser{uid: os.Geteuid(), gid: os.Getegid()}, nil
	}
	u, err := user.Lookup(name)
	if err != nil {
		return osUser{}, fmt.Errorf("running as root, the server must run as user %q: %w", name, err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return osUser{}, fmt.Errorf("user %q: %w", name, err)
	}
	return osUser{
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)},
		uid:  uid, gid: gid,
	}, nil
}

// privateDir makes a new directory under the system's temporary directory,
// owned by u, that t's cleanup removes. (t.TempDir's parents are private to this
// process's user, which another user cannot traverse.)
func privateDir(t testing.TB, pattern string, u osUser) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatalf("dbproc: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chown(dir, u.uid, u.gid); err != nil {
		t.Fatalf("dbproc: %v", err)
	}
	return dir
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// missing skips t, or fails it under CI=true, because what it needs is not
// installed; fix says how to install it.
func missing(t testing.TB, what string, err error, fix string) {
	t.Helper()
	if testenv.InCI() {
		t.Fatalf("dbproc: %s is required under CI=true but missing: %v (%s)", what, err, fix)
	}
	t.Skipf("dbproc: %s missing: %v; %s", what, err, fix)
}

// logTail returns the last n bytes of the file at path, for error messages.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// waitReady polls ping every 50 ms until it succeeds, the process exits or
// readyTimeout passes.
func waitReady(p *proc, ping func() error) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		err := ping()
		if err == nil {
			return nil
		}
		if p.exited() {
			return fmt.Errorf("the server exited: %v", p.err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", readyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
