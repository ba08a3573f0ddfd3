package bus

import (
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// DefaultClientName is the connection name a zero ConnectConfig reports to the
// server.
const DefaultClientName = "toolexec"

// ConnectConfig says how to reach NATS, with the choices the nats CLI offers. At
// most one way of authenticating may be set: a credentials file, an nkey seed
// file, a user and password, or a token (a URL may also carry user:password@).
type ConnectConfig struct {
	// URL is one server URL or several, comma-separated
	// (nats://host:4222,tls://host2:4222). Default: $NATS_URL, else
	// nats://127.0.0.1:4222.
	URL string
	// CredsFile is a JWT credentials file (.creds), as nats --creds.
	CredsFile string
	// NKeyFile is a file holding a user nkey seed, as nats --nkey.
	NKeyFile string
	// User and Password authenticate with a user name, as nats --user/--password.
	User     string
	Password string
	// Token authenticates with a server token.
	Token string
	// TLSCert and TLSKey are a client certificate and its key (PEM files), as nats
	// --tlscert/--tlskey; both or neither.
	TLSCert string
	TLSKey  string
	// TLSCA is a PEM file of the certificate authorities to trust, as nats
	// --tlsca. Setting it (or TLSCert) requires TLS.
	TLSCA string
	// Name is the connection's name in the server's monitoring; default
	// DefaultClientName.
	Name string
	// InboxPrefix replaces _INBOX as the start of the connection's reply
	// subjects, as nats --inbox-prefix does, for credentials that may subscribe
	// to replies under a prefix of their own only. Tenants of
	// deploy/accounts.conf need none: each account's _INBOX is its own, and no
	// other account's replies reach it. It must be a plain subject: no
	// wildcards, no empty tokens.
	InboxPrefix string
	// InProcess, when set, connects to that embedded server in-process (see
	// package bus/embedded, Config.InProcess); URL is then ignored.
	InProcess nats.InProcessConnProvider
	// ReconnectWait is the pause between reconnection attempts; default 2s.
	// Reconnection never gives up.
	ReconnectWait time.Duration
	// Logger receives disconnections, reconnections, closure and asynchronous
	// errors (permission violations, slow consumers); default slog.Default().
	Logger *slog.Logger
}

// Options returns the nats.go options cfg stands for, or an error matching
// ErrInvalidConfig (two ways of authenticating, a TLS key without its
// certificate, an inbox prefix that is not a plain subject) or the error nats.go
// gives for an unreadable nkey seed file.
func (cfg ConnectConfig) Options() ([]nats.Option, error) {
	auth := 0
	for _, set := range []bool{cfg.CredsFile != "", cfg.NKeyFile != "", cfg.User != "" || cfg.Password != "", cfg.Token != ""} {
		if set {
			auth++
		}
	}
	if auth > 1 {
		return nil, invalidConfig("connect: give one of a credentials file, an nkey seed file, a user and password, or a token")
	}
	if cfg.Password != "" && cfg.User == "" {
		return nil, invalidConfig("connect: a password needs a user")
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return nil, invalidConfig("connect: a TLS client certificate and its key go together")
	}
	if p := cfg.InboxPrefix; p != "" &&
		(strings.ContainsAny(p, "*> \t\r\n") || strings.HasSuffix(p, ".") || strings.HasPrefix(p, ".") || strings.Contains(p, "..")) {
		return nil, invalidConfig("connect: inbox prefix %q is not a subject without wildcards", p)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	name := cfg.Name
	if name == "" {
		name = DefaultClientName
	}
	wait := cfg.ReconnectWait
	if wait <= 0 {
		wait = nats.DefaultReconnectWait
	}
	opts := []nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(wait),
		// No publishing into a buffer while disconnected: a write either reaches the
		// server now or fails now. A buffered claim would land after its writer had
		// given up on it (and answered store_unavailable), leaving the key claimed
		// by a holder that never runs the tool.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil {
				log.Warn("NATS disconnected; reconnecting", "error", err)
			} else {
				log.Info("NATS disconnected")
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ClosedHandler(func(nc *nats.Conn) {
			if err := nc.LastError(); err != nil {
				log.Warn("NATS connection closed", "error", err)
				return
			}
			log.Info("NATS connection closed")
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				log.Error("NATS asynchronous error", "subject", sub.Subject, "error", err)
				return
			}
			log.Error("NATS asynchronous error", "error", err)
		}),
	}
	switch {
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	case cfg.NKeyFile != "":
		o, err := nats.NkeyOptionFromSeed(cfg.NKeyFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o)
	case cfg.User != "":
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	case cfg.Token != "":
		opts = append(opts, nats.Token(cfg.Token))
	}
	if cfg.TLSCert != "" {
		opts = append(opts, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	}
	if cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(cfg.TLSCA))
	}
	if cfg.InProcess != nil {
		opts = append(opts, nats.InProcessServer(cfg.InProcess))
	}
	if cfg.InboxPrefix != "" {
		opts = append(opts, nats.CustomInboxPrefix(cfg.InboxPrefix))
	}
	return opts, nil
}

// URLOrDefault returns the URL Connect dials: cfg.URL, else $NATS_URL, else
// nats://127.0.0.1:4222.
func (cfg ConnectConfig) URLOrDefault() string {
	if cfg.URL != "" {
		return cfg.URL
	}
	if u := os.Getenv("NATS_URL"); u != "" {
		return u
	}
	return nats.DefaultURL
}

// Connect connects to NATS as cfg says. Once connected, the connection
// reconnects for ever, logging each disconnection and reconnection; the first
// connection is not retried, so a wrong URL or refused credentials fail at once.
// Errors are those of [ConnectConfig.Options] and of nats.Connect.
func Connect(cfg ConnectConfig) (*nats.Conn, error) {
	opts, err := cfg.Options()
	if err != nil {
		return nil, err
	}
	url := cfg.URLOrDefault()
	if cfg.InProcess != nil {
		url = ""
	}
	return nats.Connect(url, opts...)
}
