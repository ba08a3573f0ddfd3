package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/tool"
)

// healthDigest is a key no call can have: reading it proves the store answers.
const healthDigest = "0000000000000000000000000000000000000000000000000000000000000000"

// natsStatus is what readiness asks of the NATS connection.
type natsStatus interface {
	IsConnected() bool
	Status() nats.Status
}

// readiness is what /readyz checks. It starts out waiting for the first NATS
// connection; run fills in the connection once made, and the store once the
// executor is set up.
type readiness struct {
	mu    sync.Mutex    // protects the fields below
	wait  string        // until connected: why there is no connection yet
	nc    natsStatus    // nil until connected
	store kvstore.Store // nil until the executor is set up
	tools conflicted    // nil until the executor is set up
}

// conflicted is what readiness asks of the executor: the tools it withholds.
type conflicted interface {
	Conflicts() []*tool.ConflictError
}

// waiting says why there is no NATS connection yet.
func (r *readiness) waiting(why string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.wait = why
}

// connected hands readiness the NATS connection.
func (r *readiness) connected(nc natsStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nc = nc
}

// running hands readiness the executor's store and the executor: from now on
// it answers as the running executor's readiness.
func (r *readiness) running(store kvstore.Store, tools conflicted) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.store, r.tools = store, tools
}

// notes says what does not keep the executor from being ready but is wrong:
// the tools it does not run while their declarations conflict, one line each.
func (r *readiness) notes() []string {
	r.mu.Lock()
	tools := r.tools
	r.mu.Unlock()
	if tools == nil {
		return nil
	}
	var out []string
	for _, c := range tools.Conflicts() {
		out = append(out, "tool conflict: "+c.Error())
	}
	return out
}

// problems names what keeps the executor from being ready, one line each;
// none when it is ready.
func (r *readiness) problems(ctx context.Context) []string {
	r.mu.Lock()
	wait, nc, store := r.wait, r.nc, r.store
	r.mu.Unlock()
	var problems []string
	switch {
	case nc == nil && wait != "":
		problems = append(problems, "nats: "+wait)
	case nc == nil:
		problems = append(problems, "nats: not connected yet")
	case !nc.IsConnected():
		problems = append(problems, "nats: "+nc.Status().String())
	}
	switch {
	case store == nil && nc == nil:
		problems = append(problems, "store: not started (waiting for NATS)")
	case store == nil:
		problems = append(problems, "store: not started (setting up the streams and the store)")
	default:
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if _, err := store.Get(ctx, "_health", healthDigest); err != nil && !errors.Is(err, kvstore.ErrNotFound) {
			problems = append(problems, "store: "+err.Error())
		}
	}
	return problems
}
