package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/internal/app/natsflags"
)

// defaultTimeout is the default of --timeout.
const defaultTimeout = 30 * time.Second

// globalOptions are the root command's persistent flags: how to reach NATS, how
// long to wait, and whether to print JSON. Every command that talks to NATS
// reads them.
type globalOptions struct {
	nats    natsflags.Flags
	timeout time.Duration
	json    bool

	// conn is what the connection options came to, once resolved.
	conn *natsflags.Resolved
	// lookup reads the environment; tests replace it.
	lookup natsflags.Lookup
}

// register defines the persistent flags on root: the connection flags named as
// the nats CLI names them (package natsflags), --timeout and --json.
func (g *globalOptions) register(root *cobra.Command) {
	f := root.PersistentFlags()
	g.nats.Register(f, natsflags.Config{SelectedContext: true})
	f.DurationVar(&g.timeout, "timeout", defaultTimeout, "how long to wait for an answer or a reply; 0 waits for ever")
	f.BoolVar(&g.json, "json", false, "print JSON for programs instead of text for people")
}

// resolve works out the connection options from the flags, the NATS_*
// variables and the nats CLI's context, once.
func (g *globalOptions) resolve() (*natsflags.Resolved, error) {
	if g.conn != nil {
		return g.conn, nil
	}
	lookup := g.lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	r, err := g.nats.Resolve(lookup)
	if errors.Is(err, natsflags.ErrInvalid) {
		return nil, badInput(err)
	}
	if err != nil {
		return nil, err
	}
	g.conn = &r
	return g.conn, nil
}

// hint is the connection part of the emitter commands this one suggests, so
// that a pasted suggestion reaches the same server as this command did: the
// options, then, on lines of their own, the variables they need that are not
// set. Empty before the options are resolved.
func (g *globalOptions) hint() (args, note string) {
	if g.conn == nil {
		return "", ""
	}
	h := g.conn.Hint()
	if len(h.Needs) > 0 {
		note = fmt.Sprintf("\n  (set %s first: secrets given on the command line are not repeated)", strings.Join(h.Needs, " and "))
	}
	return h.String(), note
}

// check refuses option values no command can work with.
func (g *globalOptions) check() error {
	if g.timeout < 0 {
		return badInput(fmt.Errorf("--timeout %v is negative", g.timeout))
	}
	return nil
}

// withTimeout bounds ctx by --timeout, unless it is zero.
func (g *globalOptions) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if g.timeout == 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, g.timeout)
}

// session is one connection to NATS and the clients on it: of calls and
// answers, and of the admin requests. Close it when done.
type session struct {
	nc     *nats.Conn
	client *toolexec.Client
	admin  *admin.Client
	url    string
	logw   *gateWriter
}

// Close closes the connection. Nothing is logged after Close returns.
func (s *session) Close() {
	s.nc.Close()
	s.logw.shut()
}

// connect dials NATS as the flags say and returns the clients on the connection,
// the client of calls and answers made with opts. The connection's notices
// (disconnections, permission errors) and the client's go to stderr. Flags that
// contradict each other (two ways of authenticating) are bad input.
func (g *globalOptions) connect(cmd *cobra.Command, opts ...toolexec.ClientOption) (*session, error) {
	r, err := g.resolve()
	if err != nil {
		return nil, err
	}
	logw := &gateWriter{w: cmd.ErrOrStderr()}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := r.ConnectConfig()
	cfg.Name, cfg.Logger = "toolexec-emitter", log
	url := cfg.URLOrDefault()
	nc, err := bus.Connect(cfg)
	if errors.Is(err, bus.ErrInvalidConfig) {
		return nil, badInput(err)
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	client, err := toolexec.NewClient(nc, append([]toolexec.ClientOption{toolexec.WithLogger(log)}, opts...)...)
	if err != nil {
		nc.Close()
		return nil, err
	}
	adm, err := admin.NewClient(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &session{nc: nc, client: client, admin: adm, url: url, logw: logw}, nil
}

// gateWriter passes writes to w until shut, and drops them after: the
// connection's handlers run on their own goroutine and may log after the
// command has returned, when its stderr may no longer be ours to write.
type gateWriter struct {
	mu     sync.Mutex // protects w and closed
	w      io.Writer
	closed bool
}

func (g *gateWriter) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return len(p), nil
	}
	return g.w.Write(p)
}

func (g *gateWriter) shut() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// noStreamHint explains a publish or read that found no toolexec stream.
func noStreamHint(err error) error {
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("%w\n(no toolexec stream on this server: start an executor, which creates them, or check --server)", err)
	}
	return err
}

// hintArgs is the connection part of a suggested command, without the note
// on variables to set.
func hintArgs(g *globalOptions) string {
	args, _ := g.hint()
	return args
}
