package mcpgate

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/events"
)

// Defaults of [HTTPConfig].
const (
	// DefaultMaxRequestBytes bounds a request body: a call's arguments are
	// bounded by the NATS payload anyway (1 MiB by default).
	DefaultMaxRequestBytes = 1 << 20
	// DefaultSessionTimeout closes a session idle for this long.
	DefaultSessionTimeout = 30 * time.Minute
)

// HTTPConfig configures [Gateway.Handler]. Exactly one of Tenant and Tokens
// says whose calls a request makes.
type HTTPConfig struct {
	// Tenant, when set, is the tenant of every request.
	Tenant string
	// Tokens, when set, maps each request's bearer token to its tenant; a
	// request without a known token is refused 401.
	Tokens *Tokens
	// AllowedOrigins are the browser origins ("https://app.example.com") whose
	// requests are served, besides the gateway's own (an Origin naming the
	// very host and port the request was sent to). A request with another
	// Origin header is refused 403; a request without one (not from a
	// browser) is served.
	AllowedOrigins []string
	// MaxRequestBytes bounds a request body; default DefaultMaxRequestBytes.
	MaxRequestBytes int64
	// SessionTimeout closes sessions idle this long; default
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
}

// Handler returns the Streamable HTTP handler of the gateway. It returns an
// error matching ErrInvalidConfig unless exactly one of cfg.Tenant (a valid
// token) and cfg.Tokens is set.
func (g *Gateway) Handler(cfg HTTPConfig) (http.Handler, error) {
	switch {
	case (cfg.Tenant == "") == (cfg.Tokens == nil):
		return nil, fmt.Errorf("%w: give a tenant or a tokens file, not both or neither", ErrInvalidConfig)
	case cfg.Tenant != "":
		if err := events.CheckToken("tenant", cfg.Tenant); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
		}
	}
	for _, o := range cfg.AllowedOrigins {
		if o == "" || o == "*" || strings.HasSuffix(o, "/") || !strings.Contains(o, "://") {
			return nil, fmt.Errorf("%w: allowed origin %q is not scheme://host[:port]", ErrInvalidConfig, o)
		}
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		tenant := cfg.Tenant
		if info := auth.TokenInfoFromContext(r.Context()); cfg.Tokens != nil {
			if info == nil {
				return nil
			}
			tenant = info.UserID
		}
		return g.serverFor(r.Context(), tenant).srv
	}, &mcp.StreamableHTTPOptions{
		Logger: g.log, SessionTimeout: cfg.SessionTimeout, MaxRequestBodyBytes: cfg.MaxRequestBytes,
	})
	if cfg.Tokens != nil {
		h = auth.RequireBearerToken(cfg.Tokens.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	}
	return checkOrigin(cfg.AllowedOrigins, h), nil
}

// checkOrigin refuses, 403, a request whose Origin header is present and
// neither the gateway's own origin nor one of allowed: a web page the user
// visits must not reach the gateway through the user's browser. (A rebinding
// page's requests carry its own host name, which the SDK refuses on a
// loopback listener, and which is not the gateway's.)
func checkOrigin(allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o := r.Header.Values("Origin")
		if len(o) > 0 && (len(o) > 1 || !(sameOrigin(o[0], r) || slices.Contains(allowed, o[0]))) {
			http.Error(w, "Forbidden: origin not allowed", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether origin names the host and port r was sent to.
func sameOrigin(origin string, r *http.Request) bool {
	return origin == "http://"+r.Host || origin == "https://"+r.Host
}
