package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
	"github.com/tesserix/toolexec/tool/toolsfile"
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
	// servers returns the states of the tools file's MCP servers; nil
	// without a tools file. Set before the readiness is shared.
	servers func() []toolsfile.ServerStatus
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

// notes says what does not keep the executor from being ready: the state of
// each MCP server (and what went wrong building its tools), and the tools it
// does not run while their declarations conflict, one line each.
func (r *readiness) notes() []string {
	r.mu.Lock()
	tools := r.tools
	r.mu.Unlock()
	var out []string
	if r.servers != nil {
		for _, s := range r.servers() {
			out = append(out, serverNote(s, time.Now()))
			for _, p := range s.Problems {
				out = append(out, fmt.Sprintf("mcp server %s: tool not served: %s", s.Name, p))
			}
		}
	}
	if tools == nil {
		return out
	}
	for _, c := range tools.Conflicts() {
		out = append(out, "tool conflict: "+c.Error())
	}
	return out
}

// serverNote is the /readyz line of one MCP server: its state, since when,
// and while it is down, why and what it costs.
func serverNote(s toolsfile.ServerStatus, now time.Time) string {
	st := s.Status
	line := fmt.Sprintf("mcp server %s: %s since %s", s.Name, st.State, st.Since.UTC().Format(time.RFC3339))
	if st.State == mcptool.StateDown {
		line += fmt.Sprintf(" (%d failed attempts in a row, next in %s; its %d tools are rejected upstream_unavailable): %v",
			st.Failures, max(0, st.RetryAt.Sub(now)).Round(time.Second), len(s.Tools), st.Err)
	}
	if s.Waiting {
		line += "; not reached since start: its imported tools are not listed yet"
	}
	return line
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
