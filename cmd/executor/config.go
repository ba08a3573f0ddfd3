package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/internal/app/natsflags"
	"github.com/tesserix/toolexec/internal/app/storeflags"
	"github.com/tesserix/toolexec/mcpgate"
	"github.com/tesserix/toolexec/tool/workerset"
)

// config is everything the executor is told, by flags or TOOLEXEC_* variables.
type config struct {
	// NATS: a server URL (from a flag, a variable or a nats CLI context)
	// means an existing server; none means the embedded one. conn is what the
	// connection flags come to, set by resolveNATS.
	nats         natsflags.Flags
	conn         natsflags.Resolved
	natsWait     time.Duration
	natsHost     string
	natsPort     int
	dataDir      string
	syncInterval time.Duration
	replicas     int
	eventMaxAge  time.Duration

	store storeflags.Flags // --store and its backend's flags, --retention
	lease time.Duration

	maxOutcome    int
	limits        idemkey.Limits
	inflightMiB   int
	concurrency   int
	ackWait       time.Duration
	maxDeliver    int
	binaryAnswers bool

	toolsFile    string
	demo         bool
	workers      workerFlags
	metricsAddr  string // /metrics, /healthz and /readyz
	console      consoleFlags
	mcp          mcpFlags
	adminAccount string
	logFormat    string
	logLevel     string
	drain        time.Duration

	// awaitingInterval is how often the keys awaiting decision are counted.
	awaitingInterval time.Duration
}

// workerFlags say whether and how the executor learns the workers' tools.
type workerFlags struct {
	on       bool
	interval time.Duration
	window   time.Duration
}

// envName is the variable that stands in for a flag: --nats-url is
// TOOLEXEC_NATS_URL.
func envName(flag string) string { return storeflags.EnvName(flag) }

// flagAliases are the old names of renamed flags; their TOOLEXEC_* variables
// still work too, when the new one is not set.
var flagAliases = map[string]string{"health-addr": "metrics-addr"}

func (c *config) register(fs *pflag.FlagSet) {
	// The connection flags, as the emitter and the nats CLI name them; the old
	// names (--nats-url, --nats-creds, --tls-cert, …) and their TOOLEXEC_*
	// variables still work. No selected nats CLI context: without a server the
	// executor runs its own.
	c.nats.Register(fs, natsflags.Config{ProgramEnv: storeflags.EnvPrefix})
	fs.DurationVar(&c.natsWait, "nats-wait", 0,
		"with --server: how long to wait at start-up for a server that cannot be reached (retrying with growing pauses, /readyz saying so) "+
			"before giving up with exit status 1; 0 waits until stopped. Refused credentials, a bad URL or unreadable credentials or TLS files "+
			"fail at once")
	fs.StringVar(&c.natsHost, "nats-host", "127.0.0.1", "embedded server: address to listen on")
	fs.IntVar(&c.natsPort, "nats-port", 4222, "embedded server: client port (-1 picks a free one)")
	fs.StringVar(&c.dataDir, "data-dir", ".toolexec",
		"embedded server: where JetStream keeps its data (in <dir>/nats), for one executor at a time: another started on it exits at once "+
			"with status 1, naming the first's pid and URL")
	fs.DurationVar(&c.syncInterval, "sync-interval", 0,
		"embedded server: fsync period; 0 syncs every write before acknowledging it (safe default)")
	fs.IntVar(&c.replicas, "replicas", 1, "replicas of the streams and the KV bucket (3 on a cluster)")
	fs.DurationVar(&c.eventMaxAge, "event-max-age", 7*24*time.Hour, "how long TOOLEXEC_EVENTS keeps answers and audit events")

	c.store.Register(fs, storeflags.Serve)
	fs.DurationVar(&c.lease, "lease", 15*time.Second, "claim lease, renewed while a tool runs")

	fs.IntVar(&c.concurrency, "concurrency", 64, "calls this executor runs at once")
	fs.IntVar(&c.maxOutcome, "max-outcome-bytes", 0,
		"largest outcome a tool may return; 0: an eighth of the server's max_payload, so that any outcome, escaped into its answer event, "+
			"still fits")
	fs.IntVar(&c.limits.Members, "max-members", idemkey.DefaultMaxMembers,
		"most members one object of a call's arguments may have (more: rejected too_many_values)")
	fs.IntVar(&c.limits.Elements, "max-elements", idemkey.DefaultMaxElements,
		"most elements one array of a call's arguments may have (more: rejected too_many_values)")
	fs.IntVar(&c.limits.Values, "max-values", idemkey.DefaultMaxValues,
		"most values a call's arguments may hold in all, containers included (more: rejected too_many_values)")
	fs.IntVar(&c.inflightMiB, "max-inflight-memory-mib", bus.DefaultMaxInFlightMemory>>20,
		"memory, in MiB, the calls in flight may take together; a large call waits for room")
	fs.DurationVar(&c.ackWait, "ack-wait", 30*time.Second, "how long a call may go unacknowledged before JetStream redelivers it")
	fs.IntVar(&c.maxDeliver, "max-deliver", 10, "deliveries of one call before JetStream gives up on it")
	fs.BoolVar(&c.binaryAnswers, "binary-answers", false, "publish answers in CloudEvents binary mode instead of structured mode")

	fs.StringVar(&c.toolsFile, "tools-file", "", "YAML file declaring the tools (HTTP endpoints, MCP servers)")
	fs.BoolVar(&c.demo, "demo", false, "serve the demo airline tools (lookup_fare, book, update_profile)")
	fs.BoolVar(&c.workers.on, "workers", true,
		"learn the tools of the workers that serve tool bodies over NATS (docs/PROTOCOL.md §12): ask $SRV.INFO.toolexec-worker at start and "+
			"every --workers-interval; a tool whose declarations disagree is not run (calls rejected tool_conflict) and is listed on /readyz")
	fs.DurationVar(&c.workers.interval, "workers-interval", workerset.DefaultInterval,
		"with --workers: how often to ask the workers for their tools (one request, answered by each worker); a worker unheard for 3 "+
			"intervals is forgotten")
	fs.DurationVar(&c.workers.window, "workers-window", workerset.DefaultWindow,
		"with --workers: how long to gather the workers' replies to each request")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "",
		"address serving /metrics, /healthz and /readyz (e.g. 127.0.0.1:9090); empty: off (--health-addr is another name for it)")
	fs.DurationVar(&c.awaitingInterval, "awaiting-interval", time.Minute,
		"how often to count the keys awaiting an operator's decision for /metrics (one pass over the store's indeterminate records on "+
			"PostgreSQL, over all its records on JetStream and Redis; a slow count stretches the interval so that counting takes at most a "+
			"twentieth of the time); 0: not counted")
	c.console.register(fs)
	fs.StringVar(&c.mcp.addr, "mcp-addr", "",
		"address of the MCP server (Streamable HTTP, path /mcp; e.g. 127.0.0.1:8090); empty: off; needs --mcp-tenant or --mcp-tokens-file, "+
			"and the tokens file on any address but loopback")
	fs.StringVar(&c.mcp.tenant, "mcp-tenant", "", "the tenant of every MCP request (one tenant per gateway)")
	fs.StringVar(&c.mcp.tokensFile, "mcp-tokens-file", "",
		"file of \"<tenant> <token>\" lines: each MCP request acts for the tenant of its bearer token (write tokens hashed: emitter mcp-token)")
	fs.IntVar(&c.mcp.maxSessions, "mcp-max-sessions", mcpgate.DefaultMaxSessions,
		"the most MCP sessions one tenant may hold open; an initialize beyond it is refused 429 until one closes or idles out (30 min); 0: "+
			"the default")
	fs.StringSliceVar(&c.mcp.origins, "mcp-allowed-origins", nil,
		"browser origins (scheme://host[:port]) whose MCP requests are served; a request from any other Origin is refused 403")
	fs.StringVar(&c.adminAccount, "admin-account", "",
		"serve admin requests (toolexec.admin.>, the operators' history included) only from this NATS account, as the server names it where a "+
			"request crosses a service import (ADMIN with deploy/accounts.conf); empty: from anyone who reaches toolexec.admin.>")
	fs.SetNormalizeFunc(func(_ *pflag.FlagSet, name string) pflag.NormalizedName {
		if alias, ok := flagAliases[name]; ok {
			name = alias
		}
		return pflag.NormalizedName(name)
	})
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.DurationVar(&c.drain, "drain-timeout", 30*time.Second, "on SIGTERM, how long in-flight calls may take before a hard stop")
}

// applyEnv gives every flag not set on the command line the value of its
// TOOLEXEC_* variable, if set.
func applyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || natsflags.Owns(f.Name) { // natsflags reads their variables
			return
		}
		v, ok := lookup(envName(f.Name))
		for alias, name := range flagAliases {
			if !ok && name == f.Name {
				v, ok = lookup(envName(alias))
			}
		}
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", envName(f.Name), v, err))
		}
	})
	return errors.Join(errs...)
}

// check refuses configurations that cannot work, naming the fix.
func (c *config) check() error {
	var errs []error
	if err := c.store.Check(); err != nil {
		errs = append(errs, err)
	}
	if c.toolsFile == "" && !c.demo && !c.workers.on {
		errs = append(errs, errors.New("no tools: give --tools-file FILE, --demo, or --workers to learn them from workers"))
	}
	if c.workers.on && (c.workers.interval <= 0 || c.workers.window <= 0) {
		errs = append(errs, fmt.Errorf("--workers-interval %v and --workers-window %v must be positive", c.workers.interval, c.workers.window))
	}
	if c.awaitingInterval < 0 {
		errs = append(errs, fmt.Errorf("--awaiting-interval %v: must not be negative (0 turns the count off)", c.awaitingInterval))
	}
	if c.natsWait < 0 {
		errs = append(errs, fmt.Errorf("--nats-wait %v: must not be negative (0 waits until stopped)", c.natsWait))
	}
	if c.concurrency < 1 {
		errs = append(errs, fmt.Errorf("--concurrency %d: must be at least 1", c.concurrency))
	}
	for _, l := range []struct {
		flag string
		v    int
	}{{"--max-members", c.limits.Members}, {"--max-elements", c.limits.Elements}, {"--max-values", c.limits.Values},
		{"--max-inflight-memory-mib", c.inflightMiB}} {
		if l.v < 1 {
			errs = append(errs, fmt.Errorf("%s %d: must be at least 1", l.flag, l.v))
		}
	}
	if c.store.Retention <= 0 || c.lease <= 0 {
		errs = append(errs, errors.New("--retention and --lease must be positive"))
	}
	if c.lease >= c.store.Retention {
		errs = append(errs, fmt.Errorf("--lease %v must be shorter than --retention %v", c.lease, c.store.Retention))
	}
	if err := c.console.check(); err != nil {
		errs = append(errs, err)
	}
	if err := c.mcp.check(); err != nil {
		errs = append(errs, err)
	}
	if c.adminAccount != "" && c.embedded() {
		errs = append(errs,
			errors.New(
				"--admin-account needs --server: the embedded server has one account, so no admin request would come from another and all would be "+
					"refused"))
	}
	if c.logFormat != "text" && c.logFormat != "json" {
		errs = append(errs, fmt.Errorf("--log-format %q: want text or json", c.logFormat))
	}
	return errors.Join(errs...)
}

// embedded reports whether the executor runs its own NATS server.
func (c *config) embedded() bool { return c.conn.Server == "" }

func (c *config) natsStoreDir() string { return filepath.Join(c.dataDir, "nats") }

// resolveNATS works out the connection options: flags, then TOOLEXEC_*
// variables, then the nats CLI's NATS_* ones, then the context one of those
// names (package natsflags).
func (c *config) resolveNATS(lookup natsflags.Lookup) error {
	r, err := c.nats.Resolve(lookup)
	if err != nil {
		return err
	}
	c.conn = r
	return nil
}
