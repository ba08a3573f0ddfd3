package dirlock_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tesserix/toolexec/internal/dirlock"
)

// holdEnv, set, makes the test binary a holder: it locks the folder the
// variable names, records holderAddr, prints "held" and keeps the lock until
// its standard input closes or it is killed.
const (
	holdEnv    = "DIRLOCK_TEST_HOLD"
	holderAddr = "nats://127.0.0.1:4999"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		os.Exit(hold(dir))
	}
	os.Exit(m.Run())
}

func hold(dir string) int {
	l, err := dirlock.Acquire(dir)
	if err == nil {
		err = l.SetAddr(holderAddr)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

func acquire(t *testing.T, dir string) *dirlock.Lock {
	t.Helper()
	l, err := dirlock.Acquire(dir)
	if err != nil {
		t.Fatalf("Acquire(%s): %v", dir, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// wantHeld checks that err refuses dir because of the holder pid, addr.
func wantHeld(t *testing.T, err error, dir string, pid int, addr string) {
	t.Helper()
	if !errors.Is(err, dirlock.ErrHeld) {
		t.Fatalf("error %v does not match ErrHeld", err)
	}
	var he *dirlock.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("error %v is not a *HeldError", err)
	}
	if he.Dir != dir || he.PID != pid || he.Addr != addr {
		t.Errorf("HeldError{Dir: %q, PID: %d, Addr: %q}; want {%q, %d, %q}", he.Dir, he.PID, he.Addr, dir, pid, addr)
	}
	want := fmt.Sprintf("%s is in use by process %d", dir, pid)
	if addr != "" {
		want += " (" + addr + ")"
	}
	if err.Error() != want {
		t.Errorf("message %q; want %q", err, want)
	}
}

// TestAcquireRefusesASecondOpener: while the folder is held, a second Acquire
// in the same process is refused, however the folder is spelled.
func TestAcquireRefusesASecondOpener(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	l := acquire(t, dir)
	tests := []struct {
		name, path, wantDir, addr string
	}{
		{name: "same path", path: dir, wantDir: dir},
		{name: "other spelling", path: dir + "/sub/..", wantDir: dir},
		{name: "through a symlink", path: link, wantDir: link},
		{name: "with the holder's address", path: dir, wantDir: dir, addr: "nats://127.0.0.1:4333"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := l.SetAddr(tt.addr); err != nil {
				t.Fatal(err)
			}
			second, err := dirlock.Acquire(tt.path)
			if err == nil {
				second.Close()
				t.Fatal("a second Acquire on a held folder succeeded")
			}
			wantHeld(t, err, tt.wantDir, os.Getpid(), tt.addr)
		})
	}
}

// TestCloseLetsTheFolderGo: the folder held until Close can be locked again
// once it is closed, and the closed lock can record nothing more.
func TestCloseLetsTheFolderGo(t *testing.T) {
	dir := t.TempDir()
	l := acquire(t, dir)
	if l.Dir() != dir {
		t.Errorf("Dir() = %q; want %q", l.Dir(), dir)
	}
	_, err := dirlock.Acquire(dir)
	wantHeld(t, err, dir, os.Getpid(), "")
	for range 2 {
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	if err := l.SetAddr("nats://127.0.0.1:1"); err == nil {
		t.Error("SetAddr on a closed lock succeeded")
	}
	acquire(t, dir)
}

// TestStaleLockFileDoesNotBlock: a lock file a dead process left behind, with
// its pid and address in it but no lock held, is taken over, and the next
// refusal names the new holder.
func TestStaleLockFileDoesNotBlock(t *testing.T) {
	dir := t.TempDir()
	dead := exec.Command(os.Args[0], "-test.run=^$")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	stale := fmt.Sprintf(`{"pid":%d,"addr":"nats://127.0.0.1:1"}`+"\n", dead.Process.Pid)
	if err := os.WriteFile(filepath.Join(dir, dirlock.FileName), []byte(stale), 0o644); err != nil {
		t.Fatal(err)
	}
	acquire(t, dir)
	_, err := dirlock.Acquire(dir)
	wantHeld(t, err, dir, os.Getpid(), "")
}

// TestAcquireCreatesTheFolder: a folder that does not exist yet is made.
func TestAcquireCreatesTheFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	acquire(t, dir)
	if _, err := os.Stat(filepath.Join(dir, dirlock.FileName)); err != nil {
		t.Fatal(err)
	}
}

// TestHolderInAnotherProcess: a folder held by another process is refused
// naming that process and its address; once the holder is killed with
// SIGKILL, which gives it no chance to let go, the folder is free.
func TestHolderInAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	child := exec.Command(os.Args[0])
	child.Env = append(os.Environ(), holdEnv+"="+dir)
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	child.Stderr = &stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "held\n" {
		t.Fatalf("holder said %q; stderr: %s", line, stderr.String())
	}

	_, err = dirlock.Acquire(dir)
	wantHeld(t, err, dir, child.Process.Pid, holderAddr)

	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	acquire(t, dir)
}
