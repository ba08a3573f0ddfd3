//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || illumos)

package dirlock

import (
	"errors"
	"os"
)

// errLocked is never returned here: see lockFile.
var errLocked = errors.New("dirlock: locked")

// lockFile does nothing: this system has no flock(2), and a lock that a dead
// holder could leave behind would block every restart after a crash. The
// folder is recorded but not protected.
func lockFile(*os.File) error { return nil }
