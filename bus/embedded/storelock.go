package embedded

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/tesserix/toolexec/internal/dirlock"
)

// storeLocks are the store folders this process's servers hold, by absolute
// path, so that a Start right after a Shutdown waits the moment the stopped
// server takes to let its folder go instead of refusing it.
var storeLocks = struct {
	sync.Mutex
	held map[string]*storeLock
}{held: map[string]*storeLock{}}

// storeLock is a server's hold on its store folder.
type storeLock struct {
	lock     *dirlock.Lock
	srv      *server.Server // set once the server is ready; guarded by storeLocks
	released chan struct{}  // closed once the folder is let go
}

// lockStore locks dir for a server about to start on it. When a server of this
// process that is shutting down holds it, lockStore waits for it to finish
// (at most readyTimeout); when anyone else does, it returns a
// [*StoreInUseError] at once.
func lockStore(dir string) (*storeLock, error) {
	for {
		// Trying the lock and looking up its holder are one step against
		// release, which closes a lock and forgets it in one step too: a
		// refusal read just before a release must find the holder stopping.
		storeLocks.Lock()
		l, err := dirlock.Acquire(dir)
		if err == nil {
			sl := &storeLock{lock: l, released: make(chan struct{})}
			storeLocks.held[l.Dir()] = sl
			storeLocks.Unlock()
			return sl, nil
		}
		var he *dirlock.HeldError
		var sl *storeLock
		stopping := false
		if errors.As(err, &he) {
			sl = storeLocks.held[he.Dir]
			stopping = sl != nil && sl.srv != nil && !sl.srv.Running()
		}
		storeLocks.Unlock()
		if he == nil {
			return nil, fmt.Errorf("embedded NATS: store folder: %w", err)
		}
		inUse := &StoreInUseError{Dir: he.Dir, PID: he.PID, URL: he.Addr, Err: err}
		if !stopping {
			return nil, inUse
		}
		select {
		case <-sl.released:
		case <-time.After(readyTimeout):
			return nil, inUse
		}
	}
}

// hold records that s, now ready, is the server on the folder, and lets the
// folder go once s has shut down. url, when not empty, is recorded for the
// refusals of later openers to name.
func (sl *storeLock) hold(s *server.Server, url string) error {
	if url != "" {
		if err := sl.lock.SetAddr(url); err != nil {
			return fmt.Errorf("embedded NATS: store folder: %w", err)
		}
	}
	storeLocks.Lock()
	sl.srv = s
	storeLocks.Unlock()
	go func() {
		s.WaitForShutdown()
		sl.release()
	}()
	return nil
}

// release lets the folder go: it closes the lock and forgets it in one step
// (see lockStore), then wakes the Starts waiting for it.
func (sl *storeLock) release() {
	storeLocks.Lock()
	_ = sl.lock.Close()
	if storeLocks.held[sl.lock.Dir()] == sl {
		delete(storeLocks.held, sl.lock.Dir())
	}
	storeLocks.Unlock()
	close(sl.released)
}
