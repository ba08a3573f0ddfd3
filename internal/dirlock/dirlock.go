// Package dirlock keeps a folder to one opener at a time: [Acquire] takes an
// exclusive lock on a file in the folder, and refuses at once with a
// [*HeldError] naming the holder while someone else has it.
//
// The lock is flock(2)'s, which belongs to the open file: the kernel lets it
// go when the holder closes the file or dies, however it dies, so the file a
// killed process leaves behind never blocks the next opener. The file also
// records the holder's pid and, once it has one, its address; these are read
// only to name the holder in a refusal. Two Acquires in one process exclude
// each other as two processes do.
//
// On systems without flock (Windows, Solaris, AIX) Acquire records the holder
// but cannot refuse a second opener.
package dirlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// FileName is the name of the lock file inside the folder it locks.
const FileName = "toolexec.lock"

// ErrHeld is matched by the [*HeldError] Acquire returns when another opener
// holds the folder.
var ErrHeld = errors.New("dirlock: folder in use")

// HeldError says the folder is locked by another opener: another process, or
// another Acquire in this one. It matches [ErrHeld].
type HeldError struct {
	// Dir is the folder, as an absolute path.
	Dir string
	// PID is the holder's process id as its lock file gives it; 0 when the file
	// does not say (the holder may be writing it at this moment).
	PID int
	// Addr is the address the holder recorded with [Lock.SetAddr]; empty when
	// it recorded none.
	Addr string
}

// Error names the folder and what is known of its holder.
func (e *HeldError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is in use by ", e.Dir)
	if e.PID > 0 {
		fmt.Fprintf(&b, "process %d", e.PID)
	} else {
		b.WriteString("another process")
	}
	if e.Addr != "" {
		fmt.Fprintf(&b, " (%s)", e.Addr)
	}
	return b.String()
}

// Is reports whether target is ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lock is an exclusive lock on a folder, held until Close.
type Lock struct {
	dir string

	mu sync.Mutex
	f  *os.File // nil once closed
}

// holder is what the lock file says about the process holding it.
type holder struct {
	PID  int    `json:"pid"`
	Addr string `json:"addr,omitempty"`
}

// Acquire creates dir if it does not exist and locks it, writing this
// process's pid in its lock file. It does not wait: when the folder is held it
// returns a [*HeldError] (matching [ErrHeld]) naming the holder; any other
// error means the lock file could not be opened or locked.
func Acquire(dir string) (*Lock, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	if err := os.MkdirAll(abs, 0o750); err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	path := filepath.Join(abs, FileName)
	// Not truncated on open: until the lock is ours, the file is the holder's.
	// Go opens it close-on-exec, so the programs this process starts do not
	// inherit the lock and keep it after this process dies.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("dirlock: %w", err)
	}
	if err := lockFile(f); err != nil {
		defer f.Close()
		if errors.Is(err, errLocked) {
			h := readHolder(f)
			return nil, &HeldError{Dir: abs, PID: h.PID, Addr: h.Addr}
		}
		return nil, fmt.Errorf("dirlock: locking %s: %w", path, err)
	}
	l := &Lock{dir: abs, f: f}
	if err := l.record(holder{PID: os.Getpid()}); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// Dir returns the locked folder, as an absolute path.
func (l *Lock) Dir() string { return l.dir }

// SetAddr records addr (where the holder can be reached: a server's URL) in the
// lock file, for the refusals of later openers to name.
func (l *Lock) SetAddr(addr string) error {
	return l.record(holder{PID: os.Getpid(), Addr: addr})
}

// Close empties the lock file and lets the folder go. Closing a closed Lock
// does nothing.
func (l *Lock) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	terr := f.Truncate(0)
	if err := f.Close(); err != nil {
		return fmt.Errorf("dirlock: %w", err)
	}
	if terr != nil {
		return fmt.Errorf("dirlock: %w", terr)
	}
	return nil
}

// record writes h over the lock file's contents. It writes before it
// truncates, so that a concurrent reader finds the old record, the new one,
// or the new one followed by the old one's tail (which readHolder ignores);
// never an empty file.
func (l *Lock) record(h holder) error {
	data, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("dirlock: %w", err)
	}
	data = append(data, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("dirlock: %s: lock closed", l.dir)
	}
	if _, err := l.f.WriteAt(data, 0); err != nil {
		return fmt.Errorf("dirlock: %w", err)
	}
	if err := l.f.Truncate(int64(len(data))); err != nil {
		return fmt.Errorf("dirlock: %w", err)
	}
	return nil
}

// maxRecord bounds how much of a lock file readHolder reads.
const maxRecord = 4 << 10

// readHolder reads the first record of the lock file; the zero holder when
// there is none that can be read.
func readHolder(f *os.File) holder {
	var h holder
	_ = json.NewDecoder(io.NewSectionReader(f, 0, maxRecord)).Decode(&h)
	return h
}
