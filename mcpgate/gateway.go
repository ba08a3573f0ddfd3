package mcpgate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/buildinfo"
)

// Defaults of [Config].
const (
	// DefaultCatalogTTL is how long a gateway uses the tool list it read.
	DefaultCatalogTTL = 5 * time.Second
	// DefaultMaxWait is how long a tools/call waits for its answer.
	DefaultMaxWait = 5 * time.Minute
	// DefaultProgressEvery is the period of progress notifications.
	DefaultProgressEvery = time.Second
	// DefaultSource is the CloudEvents source of the calls a gateway makes.
	DefaultSource = "/toolexec/mcp"
	// DefaultPollRetry is the reconnection delay asked of a client whose
	// stream the gateway closed (see Config.PollAfter).
	DefaultPollRetry = time.Second
	// DefaultStreamBytes bounds the event data kept for stream resumption.
	DefaultStreamBytes = 16 << 20
	// DefaultStreamRetention is how long a stream's events are kept after
	// its last one.
	DefaultStreamRetention = 10 * time.Minute
)

// ErrInvalidConfig is matched by the errors of New and Handler for a
// configuration they cannot work with.
var ErrInvalidConfig = errors.New("mcpgate: invalid configuration")

// Config configures a [Gateway]. The zero value is usable.
type Config struct {
	// Name and Version identify the gateway to clients (serverInfo); default
	// "toolexec" and the module version of the running build.
	Name, Version string
	// Source is the CloudEvents source of its calls; default DefaultSource.
	Source string
	// CatalogTTL is how long the tool list read from the executors is used
	// before tools/list reads it again; default DefaultCatalogTTL.
	CatalogTTL time.Duration
	// MaxWait bounds a tools/call's wait for its answer; default
	// DefaultMaxWait. After it the result is an error naming the call, whose
	// call_id finds the answer later.
	MaxWait time.Duration
	// ProgressEvery is the period of the progress notifications sent to a
	// client that asked for them; default DefaultProgressEvery.
	ProgressEvery time.Duration
	// Logger receives what the gateway could not do; default slog.Default().
	Logger *slog.Logger

	// PollAfter, over Streamable HTTP, closes the response stream of a
	// tools/call that has waited this long for its answer, asking the client
	// to reconnect after PollRetry (SEP-1699): the client resumes the stream
	// with Last-Event-ID and gets the answer on the resumed one, and no
	// connection is held for the whole of a long call. Only the streams of
	// sessions at protocol 2025-11-25 or later, whose clients know to
	// resume, are closed. Zero, the default, closes none.
	PollAfter time.Duration
	// PollRetry is the delay PollAfter asks for; default DefaultPollRetry.
	PollRetry time.Duration
	// StreamBytes bounds the event data kept, in all, for clients that
	// resume a stream; default DefaultStreamBytes.
	StreamBytes int
	// StreamRetention is how long a stream's events are kept after its last
	// one; default DefaultStreamRetention.
	StreamRetention time.Duration
}

// Gateway is an MCP server in front of toolexec's executors. It is safe for
// concurrent use; one gateway serves any number of sessions and tenants.
type Gateway struct {
	client *toolexec.Client
	cfg    Config
	log    *slog.Logger

	// life ends with Close: it stops the tenant servers' catalog watches.
	life    context.Context
	endLife context.CancelFunc
	watches sync.WaitGroup

	events *eventStore // the HTTP streams' events, for resumption

	mu      sync.Mutex
	tenants map[string]*tenantServer // the HTTP servers, one per tenant
}

// New returns a gateway that calls the executors over nc. It returns an error
// matching ErrInvalidConfig for a nil connection.
func New(nc *nats.Conn, cfg Config) (*Gateway, error) {
	if nc == nil {
		return nil, fmt.Errorf("%w: a NATS connection is required", ErrInvalidConfig)
	}
	if cfg.Name == "" {
		cfg.Name = "toolexec"
	}
	if cfg.Version == "" {
		cfg.Version = buildinfo.Get().Version
	}
	if cfg.Source == "" {
		cfg.Source = DefaultSource
	}
	if cfg.CatalogTTL <= 0 {
		cfg.CatalogTTL = DefaultCatalogTTL
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.ProgressEvery <= 0 {
		cfg.ProgressEvery = DefaultProgressEvery
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.PollAfter < 0 {
		cfg.PollAfter = 0
	}
	if cfg.PollRetry <= 0 {
		cfg.PollRetry = DefaultPollRetry
	}
	if cfg.StreamBytes <= 0 {
		cfg.StreamBytes = DefaultStreamBytes
	}
	if cfg.StreamRetention <= 0 {
		cfg.StreamRetention = DefaultStreamRetention
	}
	// A request naming the call id of a call that waits to be answered gets
	// that call's answer: the gateway waits for it (see MetaCallID).
	client, err := toolexec.NewClient(nc, toolexec.WithSource(cfg.Source), toolexec.WithLogger(cfg.Logger), toolexec.WithWaitForPending())
	if err != nil {
		return nil, fmt.Errorf("mcpgate: %w", err)
	}
	g := &Gateway{client: client, cfg: cfg, log: cfg.Logger, tenants: map[string]*tenantServer{},
		events: newEventStore(cfg.StreamBytes, cfg.StreamRetention)}
	g.life, g.endLife = context.WithCancel(context.Background())
	return g, nil
}

// Close stops what the gateway does in the background (reading the catalog
// for the clients of its HTTP sessions) and waits for it. Sessions still open
// are not closed: close the HTTP server first. It always returns nil.
func (g *Gateway) Close() error {
	g.endLife()
	g.watches.Wait()
	return nil
}

// ServeStdio serves one MCP session for tenant over r (requests) and w
// (responses), newline-delimited JSON-RPC as the stdio transport has it, until
// the client closes r or ctx ends. The session's calls share one run, fresh
// for each ServeStdio, unless a request names its run_id.
func (g *Gateway) ServeStdio(ctx context.Context, tenant string, r io.ReadCloser, w io.WriteCloser) error {
	if err := events.CheckToken("tenant", tenant); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	ts := g.newTenantServer(ctx, tenant, newID("run_"))
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); ts.watch(wctx) }()
	defer func() { stop(); <-done }()
	err := ts.srv.Run(ctx, &mcp.IOTransport{Reader: r, Writer: w})
	// The client closing its end is the session's normal end, whether the
	// gateway sees it reading (EOF) or writing (a notification sent just then).
	if ctx.Err() != nil || errors.Is(err, io.EOF) || clientGone(err) {
		return nil
	}
	return err
}

// clientGone reports whether err is a write to a stdio client that closed
// its end: a closed pipe, in process or between processes.
func clientGone(err error) bool {
	return errors.Is(err, io.ErrClosedPipe) || errors.Is(err, syscall.EPIPE)
}

// serverFor returns the HTTP server of tenant, made on first use.
func (g *Gateway) serverFor(ctx context.Context, tenant string) *tenantServer {
	g.mu.Lock()
	ts, ok := g.tenants[tenant]
	g.mu.Unlock()
	if ok {
		return ts
	}
	made := g.newTenantServer(ctx, tenant, "")
	g.mu.Lock()
	defer g.mu.Unlock()
	if ts, ok := g.tenants[tenant]; ok { // made meanwhile by another request
		return ts
	}
	g.tenants[tenant] = made
	if g.life.Err() == nil {
		g.watches.Add(1)
		go func() { defer g.watches.Done(); made.watch(g.life) }()
	}
	return made
}

// tenantServer is the MCP server of one tenant: its tools are the catalog's,
// and its calls are the tenant's.
type tenantServer struct {
	g      *Gateway
	tenant string
	srv    *mcp.Server
	// run is the run of calls that name none when their session has no id:
	// the stdio session's; "" over HTTP, where each such call gets a run of
	// its own.
	run string

	sessMu sync.Mutex // held while an HTTP session opens (see capSessions)

	mu      sync.Mutex        // held while the list is read and applied
	listed  map[string]string // tool name → its declaration's JSON, as listed
	fetched time.Time         // when the list was last read; zero: never
}

func (g *Gateway) newTenantServer(ctx context.Context, tenant, run string) *tenantServer {
	ts := &tenantServer{g: g, tenant: tenant, run: run, listed: map[string]string{}}
	ts.srv = mcp.NewServer(&mcp.Implementation{Name: g.cfg.Name, Version: g.cfg.Version}, &mcp.ServerOptions{
		// Logging: the log messages of upstream MCP tools are relayed.
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}, Logging: &mcp.LoggingCapabilities{}},
		GetSessionID: func() string { return newID("mcp_") },
		Logger:       g.log,
	})
	ts.srv.AddReceivingMiddleware(ts.middleware)
	if err := ts.refresh(ctx, 0); err != nil {
		g.log.Warn("mcp: reading the tool catalog failed; tools/list will try again", "tenant", tenant, "error", err)
	}
	return ts
}

// unlistedTTL is how old the list must be for a call of a tool it does not
// list to read the catalog again (a tool added since): short, and still a
// bound on what a client calling unknown tools in a loop costs the executors.
const unlistedTTL = 100 * time.Millisecond

// middleware reads the catalog again before a tools/list when the list is
// older than the TTL, and before a call of a tool it does not list when the
// list is older than unlistedTTL.
func (ts *tenantServer) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "tools/list":
			if err := ts.refresh(ctx, ts.g.cfg.CatalogTTL); err != nil && ts.neverFetched() {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the tool catalog cannot be read: " + err.Error()}
			}
		case "tools/call":
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && !ts.lists(p.Name) {
				_ = ts.refresh(ctx, unlistedTTL)
			}
		}
		return next(ctx, method, req)
	}
}

// watch reads the catalog again every CatalogTTL while the server has a
// session, until ctx ends, so that a change — a tool added or gone, a tool
// unavailable or available again — reaches the clients as
// notifications/tools/list_changed within a TTL, not only when they list
// again.
func (ts *tenantServer) watch(ctx context.Context) {
	ttl := ts.g.cfg.CatalogTTL
	t := time.NewTicker(ttl)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !ts.hasSessions() {
			continue // no one to tell; tools/list reads it when asked
		}
		rctx, cancel := context.WithTimeout(ctx, ttl)
		if err := ts.refresh(rctx, ttl); err != nil && ctx.Err() == nil {
			ts.g.log.Debug("mcp: reading the tool catalog failed; trying again", "tenant", ts.tenant, "error", err)
		}
		cancel()
	}
}

// hasSessions reports whether a client has a session open with the server.
func (ts *tenantServer) hasSessions() bool {
	for range ts.srv.Sessions() {
		return true
	}
	return false
}

func (ts *tenantServer) neverFetched() bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.fetched.IsZero()
}

func (ts *tenantServer) lists(name string) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	_, ok := ts.listed[name]
	return ok
}

// refresh reads the catalog if the list is older than ttl, and applies what
// changed: tools added or changed, tools gone (the SDK tells the clients
// with notifications/tools/list_changed). On an error the list stays as it
// was.
func (ts *tenantServer) refresh(ctx context.Context, ttl time.Duration) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.fetched.IsZero() && time.Since(ts.fetched) < ttl {
		return nil
	}
	decls, err := ts.g.client.Tools(ctx, ts.tenant)
	if err != nil {
		return err
	}
	ts.fetched = time.Now()
	seen := make(map[string]bool, len(decls))
	for _, d := range decls {
		seen[d.Name] = true
		fp, err := json.Marshal(d)
		if err != nil {
			continue
		}
		if ts.listed[d.Name] == string(fp) {
			continue
		}
		if err := ts.add(d); err != nil {
			ts.g.log.Warn("mcp: tool not listed", "tenant", ts.tenant, "tool", d.Name, "error", err)
			if _, was := ts.listed[d.Name]; was {
				ts.srv.RemoveTools(d.Name)
				delete(ts.listed, d.Name)
			}
			continue
		}
		ts.listed[d.Name] = string(fp)
	}
	var gone []string
	for name := range ts.listed {
		if !seen[name] {
			gone = append(gone, name)
			delete(ts.listed, name)
		}
	}
	if len(gone) > 0 {
		ts.srv.RemoveTools(gone...)
	}
	return nil
}

// add lists the tool d declares. The SDK refuses a tool it cannot list by
// panicking; that is turned into an error, so that one odd declaration does
// not take the gateway down.
func (ts *tenantServer) add(d bus.ToolDecl) (err error) {
	t, err := toolOf(d)
	if err != nil {
		return err
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("the MCP SDK refused it: %v", p)
		}
	}()
	ts.srv.AddTool(t, ts.handler(d.Name))
	return nil
}

func (ts *tenantServer) handler(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return ts.call(ctx, name, req)
	}
}

// call makes one call and waits for its answer.
func (ts *tenantServer) call(ctx context.Context, name string, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	g := ts.g
	meta := req.Params.GetMeta()
	runID, err := metaString(meta, MetaRunID)
	if err != nil {
		return nil, err
	}
	callID, err := metaString(meta, MetaCallID)
	if err != nil {
		return nil, err
	}
	// A call sent again with the answers to what it asked (multi round-trip
	// requests) is the call it was: it is waited for by its id.
	cont, isCont := parseState(req.Params.RequestState)
	if isCont {
		callID, runID = cont.callID, cont.runID
	}
	if runID == "" {
		runID = ts.defaultRun(req.Session)
	}
	wait, cancel := context.WithTimeout(ctx, g.cfg.MaxWait)
	defer cancel()
	given := callID != ""
	if !given {
		callID = newID("call_")
	}
	// What the executor running the call asks or reports while it runs is
	// heard from before the call is published (or looked for).
	can, mrtr := clientInteractions(req.Session)
	ix, err := g.client.Interactions(ts.tenant, name, callID)
	if err != nil {
		g.log.Warn("mcp: cannot follow a call's interactions; its requests will be refused", "tenant", ts.tenant, "call_id", callID, "error", err)
		ix, can = nil, nil
	} else {
		defer ix.Close()
	}
	callCtx, interrupt := context.WithCancel(wait)
	defer interrupt()
	var inputs chan toolexec.Interaction
	if mrtr {
		inputs = make(chan toolexec.Interaction, 1)
	}
	stop := ts.follow(wait, req, callID, ix, can, inputs, interrupt)
	defer stop()
	if isCont && ix != nil {
		ts.answerInputs(wait, ix, req.Params.InputResponses)
	}
	defer ts.poll(req)()

	if given {
		a, err := g.client.Find(wait, ts.tenant, callID)
		var re *events.RejectedError
		switch {
		case a != nil && a.Tool != name && a.Tool != "":
			return errorResult(callID, a.RunID, fmt.Sprintf(
				"The call id %s names a call of tool %s, not %s: choose a fresh call id.", callID, a.Tool, name)), nil
		case a != nil:
			return resultOf(*a), nil
		case errors.As(err, &re):
			return rejected(name, runID, callID, re), nil
		case err != nil:
			g.log.Warn("mcp: looking for a call's stored answer failed; publishing it", "tenant", ts.tenant, "call_id", callID, "error", err)
		}
	}
	withID := toolexec.WithFreshCallID(callID)
	if given {
		// A given id may name a call published before, still waiting or
		// answered since the look above.
		withID = toolexec.WithCallID(callID)
	}
	opts := []toolexec.CallOption{withID, toolexec.WithRunID(runID), toolexec.WithInteractions(can...)}
	if tp, ok := meta["traceparent"].(string); ok {
		tstate, _ := meta["tracestate"].(string)
		opts = append(opts, toolexec.WithTraceParent(tp, tstate))
	}
	a, err := g.client.Call(callCtx, ts.tenant, name, rawArguments(req.Params.Arguments), opts...)
	if a == nil {
		select {
		case in := <-inputs:
			// The call waits for what its body asked: the client is asked
			// in the result, and calls again with the answers.
			return inputRequired(in, callID, runID)
		default:
		}
	}
	var re *events.RejectedError
	switch {
	case a != nil:
	case errors.As(err, &re):
		return rejected(name, runID, callID, re), nil
	case ctx.Err() != nil: // the client cancelled: stop waiting, the call goes on
		return nil, ctx.Err()
	case wait.Err() != nil:
		return errorResult(callID, runID, fmt.Sprintf(
			"No answer within %s: the call of %s may still run. Call again with _meta %s=%s and %s=%s "+
				"to get its answer; it will not run twice.", g.cfg.MaxWait, name, MetaCallID, callID, MetaRunID, runID)), nil
	default:
		g.log.Warn("mcp: call failed", "tenant", ts.tenant, "tool", name, "call_id", callID, "error", err)
		return errorResult(callID, runID, fmt.Sprintf(
			"The gateway could not complete the call of %s (%v); it may or may not have been sent. Call again with "+
				"_meta %s=%s and %s=%s: a call that was sent is answered, not run again.",
			name, err, MetaCallID, callID, MetaRunID, runID)), nil
	}
	if a.Kind == events.KindRejected && a.Code == events.CodeUnknownTool {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
	}
	return resultOf(*a), nil
}

// rejected is the result of a call refused before it was sent.
func rejected(tool, runID, callID string, re *events.RejectedError) *mcp.CallToolResult {
	a := events.Answer{Kind: events.KindRejected, Tool: tool, RunID: runID, CallID: callID, Code: re.Code, Field: re.Field, Error: re.Message}
	return resultOf(a)
}

// defaultRun returns the run of a call that names none: its session's, else
// the server's (stdio), else a fresh one.
func (ts *tenantServer) defaultRun(s *mcp.ServerSession) string {
	if s != nil {
		if id := s.ID(); events.CheckToken("runid", id) == nil {
			return id
		}
	}
	if ts.run != "" {
		return ts.run
	}
	return newID("run_")
}

// resumableVersion is the first protocol version whose clients resume a
// stream the server closed (SEP-1699); sessionlessVersion, the first without
// sessions, has no resumable streams either (SEP-2575).
const resumableVersion = "2025-11-25"

// poll closes the response stream of req after Config.PollAfter, when it is
// a Streamable HTTP stream of a session whose client resumes streams; the
// returned func stops the timer.
func (ts *tenantServer) poll(req *mcp.CallToolRequest) (stop func()) {
	after := ts.g.cfg.PollAfter
	if after <= 0 || req.Extra == nil || req.Extra.CloseSSEStream == nil || req.Session == nil {
		return func() {}
	}
	p := req.Session.InitializeParams()
	if p == nil || p.ProtocolVersion < resumableVersion || p.ProtocolVersion >= sessionlessVersion {
		return func() {}
	}
	t := time.AfterFunc(after, func() {
		req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: ts.g.cfg.PollRetry})
	})
	return func() { t.Stop() }
}

// metaString returns the string under name in a request's _meta: "" when
// absent, an invalid-params error when it is not a string.
func metaString(meta map[string]any, name string) (string, error) {
	v, ok := meta[name]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("_meta %s must be a string", name)}
	}
	return s, nil
}

// newID returns prefix and 32 random hex digits (128 bits nobody can guess):
// a valid token.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
