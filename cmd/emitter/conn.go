package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
)

// defaultTimeout is the default of --timeout.
const defaultTimeout = 30 * time.Second

// globalOptions are the root command's persistent flags: how to reach NATS, how
// long to wait, and whether to print JSON. Every command that talks to NATS
// reads them.
type globalOptions struct {
	server, creds, nkey, user, password, token string
	tlsCert, tlsKey, tlsCA                     string
	inboxPrefix                                string
	timeout                                    time.Duration
	json                                       bool
}

// register defines the persistent flags on root, named as the nats CLI names
// them.
func (g *globalOptions) register(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVarP(&g.server, "server", "s", "", "NATS server URL(s), comma-separated (default $NATS_URL, else nats://127.0.0.1:4222)")
	f.StringVar(&g.creds, "creds", "", "NATS credentials file (.creds)")
	f.StringVar(&g.nkey, "nkey", "", "NATS user nkey seed file")
	f.StringVar(&g.user, "user", "", "NATS user name")
	f.StringVar(&g.password, "password", "", "NATS password")
	f.StringVar(&g.token, "token", "", "NATS authentication token")
	f.StringVar(&g.tlsCert, "tlscert", "", "TLS client certificate (PEM file)")
	f.StringVar(&g.tlsKey, "tlskey", "", "TLS client key (PEM file)")
	f.StringVar(&g.tlsCA, "tlsca", "", "TLS certificate authorities to trust (PEM file)")
	f.StringVar(&g.inboxPrefix, "inbox-prefix", "", "prefix of reply subjects instead of _INBOX, for credentials allowed to subscribe under a prefix of their own only (the tenants of deploy/accounts.conf need none)")
	f.DurationVar(&g.timeout, "timeout", defaultTimeout, "how long to wait for an answer or a reply; 0 waits for ever")
	f.BoolVar(&g.json, "json", false, "print JSON for programs instead of text for people")
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
	client *bus.Client
	admin  *admin.Client
	url    string
	logw   *gateWriter
}

// Close closes the connection. Nothing is logged after Close returns.
func (s *session) Close() {
	s.nc.Close()
	s.logw.shut()
}

// connect dials NATS as the flags say and returns the clients on the connection.
// The connection's notices (disconnections, permission errors) go to stderr.
// Flags that contradict each other (two ways of authenticating) are bad input.
func (g *globalOptions) connect(cmd *cobra.Command, cc bus.ClientConfig) (*session, error) {
	logw := &gateWriter{w: cmd.ErrOrStderr()}
	log := slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := bus.ConnectConfig{
		URL: g.server, CredsFile: g.creds, NKeyFile: g.nkey, User: g.user, Password: g.password,
		Token: g.token, TLSCert: g.tlsCert, TLSKey: g.tlsKey, TLSCA: g.tlsCA, InboxPrefix: g.inboxPrefix,
		Name: "toolexec-emitter", Logger: log,
	}
	url := cfg.URLOrDefault()
	nc, err := bus.Connect(cfg)
	if errors.Is(err, bus.ErrInvalidConfig) {
		return nil, badInput(err)
	}
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %w", url, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	if cc.Logger == nil {
		cc.Logger = log
	}
	client, err := bus.NewClient(js, cc)
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
