package mcptool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/net/http/httpguts"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/backoff"
	"github.com/tesserix/toolexec/internal/buildinfo"
)

// Defaults of the [Config] durations.
const (
	DefaultStartTimeout    = 30 * time.Second
	DefaultStopTimeout     = 5 * time.Second
	DefaultMinRestartDelay = time.Second
	DefaultMaxRestartDelay = 30 * time.Second
)

// Config says how to reach an upstream MCP server: either a command run as a
// stdio server, or the URL of a Streamable HTTP endpoint.
type Config struct {
	// Name names the upstream in logs and errors (the tools file's server
	// name), a token of [A-Za-z0-9_-]{1,128}.
	Name string

	// Command is the argv of a stdio server: Command[0] is looked up in PATH
	// when it holds no slash.
	Command []string
	// Env is added to the child's environment, which otherwise holds only the
	// variables [InheritedEnv] names.
	Env map[string]string
	// Dir is the child's working directory; empty means the executor's.
	Dir string

	// URL is the absolute http or https URL of a Streamable HTTP endpoint.
	URL string
	// Headers are sent with every request to URL (Authorization, say). They
	// may not set Content-Type, Content-Length, Transfer-Encoding, Connection,
	// Host, Accept, Last-Event-ID, Idempotency-Key, or any Mcp-* or Toolexec-*
	// header.
	Headers map[string]string
	// HTTPClient sends the requests to URL, with Headers and the
	// Idempotency-Key added by a transport wrapped around its own. Nil means a
	// client that does not follow redirects, on pooled connections of a clone
	// of http.DefaultTransport, except that the tools/call of an Effectful tool
	// goes on a connection of its own. Unused for a Command.
	HTTPClient *http.Client

	// Logger receives the upstream's starts, exits and restarts, and the lines
	// a stdio server writes on its standard error. Nil discards them.
	Logger *slog.Logger

	// StartTimeout bounds starting the server and the initialize handshake;
	// zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// StopTimeout is how long a stdio server is given to exit after its
	// standard input is closed, and again after SIGTERM, before SIGKILL; zero
	// means DefaultStopTimeout.
	StopTimeout time.Duration
	// MinRestartDelay and MaxRestartDelay bound the wait between failed
	// starts: after n failures in a row no start is tried for
	// MinRestartDelay·2^(n-1), at most MaxRestartDelay. A session that ends
	// less than MaxRestartDelay after it was made, having answered no call,
	// counts as a failure, except the first in a row, which is replaced at
	// once. Zero means
	// DefaultMinRestartDelay and DefaultMaxRestartDelay.
	MinRestartDelay time.Duration
	MaxRestartDelay time.Duration

	// OnState, if set, is called with the upstream's status each time its
	// state changes, in the order the states are reached, from a goroutine
	// of the upstream's: it must not block for long, nor call Close.
	OnState func(Status)

	// MaxContentBytes bounds an outcome that carries MCP content (see "The
	// outcome" in the package documentation); zero means
	// DefaultMaxContentBytes. Keep it within the executor's bound on an
	// outcome (toolexec.ExecutorConfig.MaxOutcomeBytes).
	MaxContentBytes int
}

// State is where an [Upstream] stands with its server.
type State string

// The states of an [Upstream].
const (
	// StateConnecting: no session yet, or the last one ended after it had
	// lasted, and a start is in progress. Calls wait for it.
	StateConnecting State = "connecting"
	// StateConnected: a session is up; calls are sent on it.
	StateConnected State = "connected"
	// StateDown: the last start failed (or the last session ended soon
	// after it was made); the next is tried after the restart delay. Calls
	// fail at once, without effect ([ErrUnavailable]).
	StateDown State = "down"
	// StateClosed: [Upstream.Close] was called.
	StateClosed State = "closed"
)

// States returns every state, in a fixed order.
func States() []State { return []State{StateConnecting, StateConnected, StateDown, StateClosed} }

// Status is an [Upstream]'s state and, while it is down, why.
type Status struct {
	State State
	// Since is when the upstream reached State.
	Since time.Time
	// Err says why the upstream is down (it matches [ErrUnavailable]);
	// Failures counts the failed starts, and the sessions that ended less
	// than MaxRestartDelay after they were made having answered no call, in
	// a row; RetryAt is when
	// the next start is tried. They are zero unless State is StateDown.
	Err      error
	Failures int
	RetryAt  time.Time
}

// reservedHeaders are the header names (canonicalised) an upstream's Headers
// may not set: the MCP transport's and the tool's own.
var reservedHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Host": true,
	"Accept": true, "Last-Event-Id": true, "Idempotency-Key": true,
}

// Validate checks c without starting anything, as [Open] does first. It
// returns a [*ConfigError] naming the field at fault: a Name that is not a
// token; both or neither of Command and URL; an empty program or a NUL byte in
// Command; an Env name that is empty or holds "=" (or a value with a NUL);
// Headers with a Command, or Env or Dir with a URL; a URL that is not an
// absolute http or https URL; a header name that is not a token, is given
// twice or is reserved (see [Config.Headers]), or a value with a control
// character; a negative duration, or MinRestartDelay above MaxRestartDelay;
// a negative MaxContentBytes.
func (c Config) Validate() error {
	_, err := c.check()
	return err
}

// check validates c and fills in its defaults. It returns the headers,
// canonicalised.
func (c *Config) check() (http.Header, error) {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Upstream: c.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	if !events.ValidToken(c.Name) {
		return nil, bad("name", "must match [A-Za-z0-9_-]{1,128}")
	}
	switch {
	case len(c.Command) > 0 && c.URL != "":
		return nil, bad("command", "give a command or a url, not both")
	case len(c.Command) == 0 && c.URL == "":
		return nil, bad("command", "give a command (a stdio server) or a url (a Streamable HTTP server)")
	}
	headers := http.Header{}
	if len(c.Command) > 0 {
		if c.Command[0] == "" {
			return nil, bad("command", "names no program")
		}
		for _, a := range c.Command {
			if strings.IndexByte(a, 0) >= 0 {
				return nil, bad("command", "holds a NUL byte")
			}
		}
		for k, v := range c.Env {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return nil, bad("env", "%q is not a variable name", k)
			}
			if strings.IndexByte(v, 0) >= 0 {
				return nil, bad("env", "the value of %s holds a NUL byte", k)
			}
		}
		if len(c.Headers) > 0 {
			return nil, bad("headers", "apply to a url; a command has none")
		}
	} else {
		u, err := url.Parse(c.URL)
		switch {
		case err != nil:
			return nil, bad("url", "is not a URL")
		case u.Scheme != "http" && u.Scheme != "https":
			return nil, bad("url", "must be an http or https URL (scheme is %q)", u.Scheme)
		case u.Hostname() == "":
			return nil, bad("url", "has no host")
		case len(c.Env) > 0:
			return nil, bad("env", "applies to a command; a url has none")
		case c.Dir != "":
			return nil, bad("dir", "applies to a command; a url has none")
		}
		for k, v := range c.Headers {
			ck := http.CanonicalHeaderKey(k)
			switch {
			case !httpguts.ValidHeaderFieldName(k):
				return nil, bad("headers", "%q is not a valid header name", k)
			case reservedHeaders[ck] || strings.HasPrefix(ck, "Mcp-") || strings.HasPrefix(ck, "Toolexec-"):
				return nil, bad("headers", "%q is set by the MCP transport or the tool itself", k)
			case !httpguts.ValidHeaderFieldValue(v):
				return nil, bad("headers", "the value of %q holds a control character", k)
			case headers.Get(ck) != "":
				return nil, bad("headers", "%q is given twice", k)
			}
			headers.Set(ck, v)
		}
	}
	for _, d := range []time.Duration{c.StartTimeout, c.StopTimeout, c.MinRestartDelay, c.MaxRestartDelay} {
		if d < 0 {
			return nil, bad("timeouts", "a duration is negative")
		}
	}
	c.StartTimeout = cmpOr(c.StartTimeout, DefaultStartTimeout)
	c.StopTimeout = cmpOr(c.StopTimeout, DefaultStopTimeout)
	c.MinRestartDelay = cmpOr(c.MinRestartDelay, DefaultMinRestartDelay)
	c.MaxRestartDelay = cmpOr(c.MaxRestartDelay, DefaultMaxRestartDelay)
	if c.MinRestartDelay > c.MaxRestartDelay {
		return nil, bad("timeouts", "the minimum restart delay exceeds the maximum")
	}
	if c.MaxContentBytes < 0 {
		return nil, bad("max_content_bytes", "is negative")
	}
	if c.MaxContentBytes == 0 {
		c.MaxContentBytes = DefaultMaxContentBytes
	}
	return headers, nil
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// Upstream is one MCP server, shared by all the tools that call it: one
// process (stdio) or one MCP session (Streamable HTTP) at a time, safe for
// concurrent calls. It is connected by [New] or [Open] and kept connected in
// the background: a connection that ends or cannot be made is tried again
// with a backoff ([Config.MinRestartDelay]); [Upstream.Close] ends it for
// good.
type Upstream struct {
	cfg    Config
	log    *slog.Logger
	client *mcp.Client
	http   *http.Client  // for a URL
	rt     *roundTripper // its transport
	idle   []func()      // close the idle connections of the transports we made
	// safeURL is the URL without query or user information, for messages;
	// secretURLs are the forms of the URL that hold them (none when it does
	// not).
	safeURL    string
	secretURLs []string
	stderr     *stderrLimiter // for a command
	life       context.Context
	endLife    context.CancelFunc // aborts a start in progress, on Close
	wg         sync.WaitGroup     // the supervisor and session watchers
	notify     sync.Mutex         // held while OnState runs, so that it sees the states in order

	mu       sync.Mutex    // protects the fields below
	cur      *session      // the live session; nil when there is none
	starting chan struct{} // closed when the start in progress ends; nil when none is
	changed  chan struct{} // closed (and replaced) when cur, starting or state change
	state    State
	since    time.Time // when state began
	failures int       // failed starts and sessions lost soon after they were made, in a row
	lastErr  error     // why the upstream is down; nil when it is not
	retryAt  time.Time // no start before this, while down
	logged   string    // the last start failure logged at warn level
	closed   bool
}

// session is one connection to the upstream (one run of a stdio server).
type session struct {
	cs       *mcp.ClientSession
	conn     *probeConn
	proc     *process      // nil over HTTP
	ended    chan struct{} // closed once the connection is gone
	stopping atomic.Bool   // we are ending it: its process's exit is expected
	answered atomic.Bool   // the server answered a call on it
}

func (s *session) isEnded() bool {
	select {
	case <-s.ended:
		return true
	default:
		return false
	}
}

// New checks cfg and returns the upstream at once, connecting it in the
// background: its process is started (or its HTTP session opened) and the
// initialize handshake completed within [Config.StartTimeout], and tried
// again after a delay when that fails (see [Config.MinRestartDelay]). Calls
// made while the first start is in progress wait for it; calls made while the
// upstream is down fail at once, without effect ([ErrUnavailable]).
//
// It returns an error matching [ErrInvalidConfig] (a [*ConfigError]) for a
// bad configuration, and nothing else.
func New(cfg Config) (*Upstream, error) {
	headers, err := cfg.check()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	u := &Upstream{cfg: cfg, log: log.With("mcp_server", cfg.Name), state: StateConnecting, since: time.Now(), changed: make(chan struct{})}
	u.client = mcp.NewClient(&mcp.Implementation{Name: "toolexec", Version: buildinfo.Get().Version}, &mcp.ClientOptions{
		Logger: u.log,
		// Elicitation and sampling are offered for every call, since the
		// connection is shared: a request is relayed to the caller of the
		// call it belongs to, or refused at once when that caller cannot
		// answer it (see serve). No roots.
		Capabilities: &mcp.ClientCapabilities{
			Sampling:    &mcp.SamplingCapabilities{},
			Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
		},
		// An input-required result is fulfilled by the call's body itself
		// (callOn), through the caller, never by the SDK.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	})
	if len(cfg.Command) > 0 {
		u.stderr = newStderrLimiter()
	} else {
		u.http = u.httpClient(headers)
		pu, _ := url.Parse(cfg.URL) // checked
		safe := &url.URL{Scheme: pu.Scheme, Host: pu.Host, Path: pu.Path, RawPath: pu.RawPath}
		u.safeURL = safe.String()
		if pu.User != nil || pu.RawQuery != "" || pu.Fragment != "" {
			// The longer first, should one hold the other.
			u.secretURLs = []string{cfg.URL, pu.String()}
			slices.SortFunc(u.secretURLs, func(a, b string) int { return len(b) - len(a) })
		}
	}
	u.life, u.endLife = context.WithCancel(context.Background())
	u.wg.Add(1)
	go u.supervise()
	return u, nil
}

// Open is [New], then waits, within ctx, for the first start to end.
// Connecting at once means a misconfigured upstream can stop a program at
// start instead of failing its first call, and that its tools can be listed.
//
// It returns an error matching [ErrInvalidConfig] (a [*ConfigError]) for a bad
// configuration, and one matching [ErrUnavailable] when the upstream cannot be
// started or connected; the upstream is then closed.
func Open(ctx context.Context, cfg Config) (*Upstream, error) {
	u, err := New(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := u.session(ctx); err != nil {
		u.Close()
		return nil, err
	}
	return u, nil
}

// httpClient returns the client that sends the requests to a URL upstream.
func (u *Upstream) httpClient(headers http.Header) *http.Client {
	if c := u.cfg.HTTPClient; c != nil {
		inner := c.Transport
		if inner == nil {
			inner = http.DefaultTransport
		}
		cp := *c
		u.rt = &roundTripper{headers: headers, pooled: inner}
		cp.Transport = u.rt
		return &cp
	}
	pooled := http.DefaultTransport.(*http.Transport).Clone()
	single := pooled.Clone()
	single.DisableKeepAlives = true
	u.idle = append(u.idle, pooled.CloseIdleConnections, single.CloseIdleConnections)
	u.rt = &roundTripper{headers: headers, pooled: pooled, single: single}
	return &http.Client{
		Transport:     u.rt,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Name returns the upstream's name.
func (u *Upstream) Name() string { return u.cfg.Name }

// Status returns the upstream's state now.
func (u *Upstream) Status() Status {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.status()
}

// status is Status with u.mu held.
func (u *Upstream) status() Status {
	st := Status{State: u.state, Since: u.since}
	if u.state == StateDown {
		st.Err, st.Failures, st.RetryAt = u.lastErr, u.failures, u.retryAt
	}
	return st
}

// setState moves to state, with u.mu held, and reports whether it changed.
func (u *Upstream) setState(state State) bool {
	if u.state == state {
		return false
	}
	u.state, u.since = state, time.Now()
	return true
}

// broadcast wakes whoever waits for a change. u.mu is held.
func (u *Upstream) broadcast() {
	close(u.changed)
	u.changed = make(chan struct{})
}

// report hands st to Config.OnState, in the order the states were reached.
func (u *Upstream) report() {
	if u.cfg.OnState == nil {
		return
	}
	u.notify.Lock()
	defer u.notify.Unlock()
	// Read under notify: a later state reported first would be overwritten
	// by an earlier one.
	st := u.Status()
	u.cfg.OnState(st)
}

// session returns the live session. Callers that arrive while a first start,
// or a start after a connection was lost, is in progress wait for it. While
// the upstream is down they fail at once with an error matching
// ErrUnavailable.
func (u *Upstream) session(ctx context.Context) (*session, error) {
	for {
		u.mu.Lock()
		var wait chan struct{}
		switch {
		case u.closed:
			u.mu.Unlock()
			return nil, ErrClosed
		case u.cur != nil && !u.cur.isEnded():
			s := u.cur
			u.mu.Unlock()
			return s, nil
		case u.state == StateDown:
			// lastErr matches ErrUnavailable.
			err := fmt.Errorf("mcp server %q is down (%d failed attempts in a row), next attempt in %s: %w",
				u.cfg.Name, u.failures, max(0, time.Until(u.retryAt)).Round(time.Millisecond), u.lastErr)
			u.mu.Unlock()
			return nil, err
		case u.starting != nil:
			wait = u.starting
		default:
			// The session ended and the supervisor has not started the next
			// one yet.
			wait = u.changed
		}
		u.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for mcp server %q to start: %w", u.cfg.Name, ctx.Err())
		}
	}
}

// supervise keeps the upstream connected until Close: it starts a session,
// waits for it to end, and starts the next, holding back after failures.
func (u *Upstream) supervise() {
	defer u.wg.Done()
	for {
		s := u.start()
		if s != nil {
			if !u.watchSession(s) {
				return
			}
			u.lost(s)
		}
		u.mu.Lock()
		closed, wait := u.closed, time.Until(u.retryAt)
		u.mu.Unlock()
		if closed {
			return
		}
		if wait > 0 && !backoff.Sleep(u.life, wait) {
			return
		}
	}
}

// watchSession waits for session s to end, and reports false if the
// upstream was closed first. An HTTP session is pinged every
// MaxRestartDelay meanwhile: with no stream open between calls, a server
// gone away would otherwise be noticed only by the next call. A ping that
// gets no answer ends the session; one answered with an error (a server
// that does not know ping) does not.
func (u *Upstream) watchSession(s *session) bool {
	var tick <-chan time.Time
	if s.proc == nil {
		t := time.NewTicker(u.cfg.MaxRestartDelay)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-s.ended:
			return true
		case <-u.life.Done():
			return false
		case <-tick:
			ctx, cancel := context.WithTimeout(u.life, u.cfg.StartTimeout)
			err := s.cs.Ping(ctx, nil)
			cancel()
			switch {
			case err == nil || rpcAnswer(err):
				s.answered.Store(true)
			case u.life.Err() == nil && !s.isEnded():
				u.log.Warn("mcp server does not answer ping; ending the session", "error", u.redact(err))
				u.end(s)
			}
		}
	}
}

// rpcAnswer reports whether err is a JSON-RPC error the server sent. The SDK
// reports a request the transport could not deliver as a JSON-RPC error too:
// an error of the HTTP client, a timeout or a closed connection in the chain
// says the server did not answer.
func rpcAnswer(err error) bool {
	var (
		we *jsonrpc.Error
		ue *url.Error
	)
	return errors.As(err, &we) && !errors.As(err, &ue) && !dialFailed(err) &&
		!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, mcp.ErrConnectionClosed)
}

// start connects a new session, outside any caller's context (a caller that
// gives up does not abort a start others wait for), and makes it the live
// one. It returns nil when the start failed or the upstream was closed.
func (u *Upstream) start() *session {
	ch := make(chan struct{})
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.starting = ch
	u.broadcast()
	u.mu.Unlock()

	ctx, cancel := context.WithTimeout(u.life, u.cfg.StartTimeout)
	s, err := u.connect(ctx)
	cancel()

	u.mu.Lock()
	if u.closed {
		// Closed meanwhile: whatever the start came to, it is over.
		if err == nil {
			s.stopping.Store(true)
			s.conn.Connection.Close()
		}
		s, err = nil, ErrClosed
	}
	changed := false
	switch {
	case errors.Is(err, ErrClosed):
	case err != nil:
		delay := u.fail(err)
		changed = u.setState(StateDown)
		if msg := err.Error(); u.failures == 1 || msg != u.logged {
			u.logged = msg
			u.log.Warn("mcp server failed to start; its tools are unavailable until it does",
				"failures", u.failures, "retry_in", delay, "error", err)
		} else {
			u.log.Debug("mcp server failed to start again", "failures", u.failures, "retry_in", delay, "error", err)
		}
	default:
		if u.state == StateDown {
			u.log.Info("mcp server reachable again", "after_failures", u.failures, "down_for", time.Since(u.since).Round(time.Millisecond))
		}
		u.cur, u.lastErr, u.logged = s, nil, ""
		changed = u.setState(StateConnected)
	}
	u.starting = nil
	close(ch)
	u.broadcast()
	u.mu.Unlock()
	if changed {
		u.report()
	}
	return s
}

// fail counts a failure and holds the next start back: after n failures in a
// row, by MinRestartDelay·2^(n-1), at most MaxRestartDelay. u.mu is held.
func (u *Upstream) fail(err error) time.Duration {
	u.failures++
	u.lastErr = err
	delay := backoff.Backoff{Initial: u.cfg.MinRestartDelay, Max: u.cfg.MaxRestartDelay}.Delay(u.failures)
	u.retryAt = time.Now().Add(delay)
	return delay
}

// lost takes note that session s ended. The first session lost in a row is
// replaced at once (calls meanwhile wait for the new one). A session that
// ends less than MaxRestartDelay after it was made without having answered a
// call counts as a failure: after the first, the upstream is down for the
// restart delay, so that a server that crashes soon after each start is
// started once per delay. A session that lasted longer, or answered a call,
// ends the streak.
func (u *Upstream) lost(s *session) {
	u.mu.Lock()
	if u.cur == s {
		u.cur = nil
	}
	if u.closed {
		u.mu.Unlock()
		return
	}
	lived := time.Since(u.since)
	if lived >= u.cfg.MaxRestartDelay || s.answered.Load() {
		u.failures = 0
	}
	changed := false
	if u.failures == 0 {
		u.failures++
		u.retryAt = time.Time{}
		changed = u.setState(StateConnecting)
	} else {
		delay := u.fail(fmt.Errorf("%w: mcp server %q: the connection ended %s after it was made",
			ErrUnavailable, u.cfg.Name, lived.Round(time.Millisecond)))
		changed = u.setState(StateDown)
		u.log.Warn("mcp server connection ended soon after it was made, again; its tools are unavailable until the next start",
			"lived", lived.Round(time.Millisecond), "failures", u.failures, "retry_in", delay)
	}
	u.broadcast()
	u.mu.Unlock()
	if changed {
		u.report()
	}
}

// connect starts the process or opens the HTTP session, and initializes it.
func (u *Upstream) connect(ctx context.Context) (*session, error) {
	var (
		pt   *probeTransport
		proc *process
	)
	if len(u.cfg.Command) > 0 {
		var err error
		proc, err = startProcess(&u.cfg, u.log, u.stderr)
		if err != nil {
			return nil, fmt.Errorf("%w: mcp server %q: starting %s: %w", ErrUnavailable, u.cfg.Name, u.cfg.Command[0], err)
		}
		pt = &probeTransport{inner: &mcp.IOTransport{Reader: proc.stdout, Writer: proc.stdin}, out: proc.stdin}
	} else {
		u.rt.version.Store(nil) // a new session negotiates anew
		pt = &probeTransport{inner: &mcp.StreamableClientTransport{
			Endpoint: u.cfg.URL, HTTPClient: u.http,
			// listen holds the standalone stream, which the SDK would
			// not open on a probeConn anyway, and whose failure there
			// would end the session.
			DisableStandaloneSSE: true,
		}}
	}
	cs, err := u.client.Connect(ctx, pt, nil)
	if err != nil {
		if proc != nil {
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				proc.stop(u.cfg.StopTimeout)
				u.log.Warn("mcp server process exited", "pid", proc.cmd.Process.Pid, "status", proc.describeExit())
			}()
		}
		return nil, fmt.Errorf("%w: mcp server %q: initialize: %w", ErrUnavailable, u.cfg.Name, u.redact(err))
	}
	s := &session{cs: cs, conn: pt.conn, proc: proc, ended: make(chan struct{})}
	ir := cs.InitializeResult()
	version := ir.ProtocolVersion
	if proc == nil {
		u.rt.version.Store(&version)
	}
	if ir.Capabilities != nil && ir.Capabilities.Logging != nil && version < multiRoundTrip {
		// Log messages are relayed to the callers (bounded per call). From
		// 2026-07-28 on, each tools/call says the level itself.
		if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: relayedLogLevel}); err != nil {
			u.log.Debug("mcp server refused logging/setLevel; its log messages are not relayed", "error", err)
		}
	}
	attrs := []any{"protocol", version}
	if proc != nil {
		attrs = append(attrs, "pid", proc.cmd.Process.Pid)
	}
	u.log.Info("mcp server connected", attrs...)
	u.wg.Add(1)
	go u.watch(s)
	if proc == nil && version < multiRoundTrip && cs.ID() != "" {
		// From 2026-07-28 on there is no standalone stream (SEP-2575); a
		// server without sessions could not tell the GET was ours.
		ready := make(chan struct{})
		u.wg.Add(1)
		go u.listen(s, ready)
		wait := time.NewTimer(standaloneWait)
		select {
		case <-ready:
		case <-wait.C:
		case <-ctx.Done():
		}
		wait.Stop()
	}
	if proc != nil {
		u.wg.Add(1)
		go u.watchProcess(s)
	}
	return s, nil
}

// watch waits for a session's connection to end, then forgets the session
// and stops its process.
func (u *Upstream) watch(s *session) {
	defer u.wg.Done()
	err := s.cs.Wait()
	close(s.ended)
	u.mu.Lock()
	if u.cur == s {
		u.cur = nil
	}
	u.mu.Unlock()
	s.cs.Close()
	if s.stopping.Load() {
		u.log.Debug("mcp server connection closed")
	} else {
		u.log.Warn("mcp server connection lost; starting a new one", "error", err)
	}
	if s.proc != nil {
		s.proc.stop(u.cfg.StopTimeout)
	}
}

// exitGrace is how long the connection of a stdio server that exited may
// stay open (a child of it holding its standard output) before it is closed.
const exitGrace = 2 * time.Second

// watchProcess logs the exit of a session's process, and closes the
// connection should it outlive the process.
func (u *Upstream) watchProcess(s *session) {
	defer u.wg.Done()
	<-s.proc.exited
	pid, status := s.proc.cmd.Process.Pid, s.proc.describeExit()
	if s.stopping.Load() {
		u.log.Info("mcp server process exited", "pid", pid, "status", status)
	} else {
		u.log.Warn("mcp server process exited unexpectedly", "pid", pid, "status", status)
	}
	t := time.NewTimer(exitGrace)
	defer t.Stop()
	select {
	case <-s.ended:
	case <-t.C:
		s.conn.Connection.Close()
	}
}

// end closes a session the caller found unusable, so that the next call
// starts a new one instead of waiting for the watcher to notice.
func (u *Upstream) end(s *session) {
	u.mu.Lock()
	if u.cur == s {
		u.cur = nil
	}
	u.mu.Unlock()
	s.stopping.Store(true)
	s.conn.Connection.Close()
}

// Close ends the live session: a stdio server's standard input is closed and
// the process given [Config.StopTimeout] to exit (then SIGTERM, then
// SIGKILL); an HTTP session is deleted. Calls still in flight fail with an
// unknown outcome. Close waits for all of it; calls after it fail with an
// error matching [ErrClosed] and [ErrNotSent]. It always returns nil, and is
// safe to call more than once.
func (u *Upstream) Close() error {
	u.mu.Lock()
	if u.closed {
		u.mu.Unlock()
		return nil
	}
	u.closed = true
	s := u.cur
	u.cur = nil
	changed := u.setState(StateClosed)
	u.broadcast()
	u.mu.Unlock()
	if changed {
		u.report()
	}
	u.endLife()
	if s != nil {
		s.stopping.Store(true)
		s.conn.Connection.Close()
	}
	u.wg.Wait()
	for _, f := range u.idle {
		f()
	}
	return nil
}

// redact hides the query and user information of a URL upstream's address in
// err's message (net/http's errors repeat the URL in full, and these errors
// travel in answer events), keeping err's chain for errors.Is and errors.As.
func (u *Upstream) redact(err error) error {
	if err == nil || len(u.secretURLs) == 0 {
		return err
	}
	msg := err.Error()
	for _, s := range u.secretURLs {
		msg = strings.ReplaceAll(msg, s, u.safeURL)
	}
	return &redactedError{msg: msg, err: err}
}

// redactedError is an error whose message was redacted.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
