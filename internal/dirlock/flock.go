//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly || illumos

package dirlock

import (
	"errors"
	"os"
	"syscall"
)

// errLocked is what lockFile returns when another open file holds the lock.
var errLocked = syscall.EWOULDBLOCK

// lockFile takes flock(2)'s exclusive lock on f without waiting.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
