package mcpgate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
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
	// DefaultMaxSessions bounds the open sessions of one tenant.
	DefaultMaxSessions = 1024
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
	// MaxSessions bounds the sessions one tenant may hold open at once;
	// default DefaultMaxSessions. An initialize request that would open one
	// more is refused 429 with Retry-After, until a session is closed
	// (DELETE) or times out; the tenant's open sessions, its sessionless
	// requests and other tenants are unaffected.
	MaxSessions int
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
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	tenantOf := func(r *http.Request) (string, bool) {
		if cfg.Tokens == nil {
			return cfg.Tenant, true
		}
		info := auth.TokenInfoFromContext(r.Context())
		if info == nil {
			return "", false
		}
		return info.UserID, true
	}
	serverOf := func(r *http.Request) *mcp.Server {
		tenant, ok := tenantOf(r)
		if !ok {
			return nil
		}
		return g.serverFor(r.Context(), tenant).srv
	}
	var h http.Handler = mcp.NewStreamableHTTPHandler(serverOf, &mcp.StreamableHTTPOptions{
		Logger: g.log, SessionTimeout: cfg.SessionTimeout, MaxRequestBodyBytes: cfg.MaxRequestBytes,
		EventStore: g.events,
	})
	h = g.sessionVersion(tenantOf, h)
	h = g.capSessions(cfg.MaxSessions, cfg.MaxRequestBytes, cfg.SessionTimeout, tenantOf, h)
	// The protocol of 2026-07-28 has no sessions, and the SDK serves it over
	// HTTP only from a stateless handler; the earlier protocols keep theirs.
	h = byProtocol(mcp.NewStreamableHTTPHandler(serverOf, &mcp.StreamableHTTPOptions{
		Logger: g.log, MaxRequestBodyBytes: cfg.MaxRequestBytes, Stateless: true,
		// The request is the whole exchange: a client gone stops the wait
		// (the call goes on), as a cancelled request does.
		PropagateRequestCancellation: true,
	}), h)
	if cfg.Tokens != nil {
		h = auth.RequireBearerToken(cfg.Tokens.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(h)
	}
	return checkOrigin(cfg.AllowedOrigins, h), nil
}

// capSessions refuses, 429, an initialize request (the only request that
// opens a lasting session: see the SDK's StreamableHTTPHandler) of a tenant
// that holds max initialized sessions already. A tenant's initialize requests
// are served one at a time, their bodies read first, so that a burst cannot
// slip past the bound between the count and the session's start.
func (g *Gateway) capSessions(
	max int, maxBytes int64, idle time.Duration, tenantOf func(*http.Request) (string, bool), next http.Handler,
) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant, ok := tenantOf(r)
		if !ok || r.Method != http.MethodPost || r.Header.Get("Mcp-Session-Id") != "" {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBytes))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "Bad Request: reading the body: "+err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(body, &msg) != nil || msg.Method != "initialize" {
			next.ServeHTTP(w, r) // the SDK answers what is not an initialize
			return
		}
		ts := g.serverFor(r.Context(), tenant)
		ts.sessMu.Lock()
		defer ts.sessMu.Unlock()
		if n := ts.initialized(); n >= max {
			g.log.Warn("mcp: session refused: the tenant holds the most open sessions allowed", "tenant", tenant, "max_sessions", max)
			w.Header().Set("Retry-After", strconv.Itoa(int(min(idle, time.Minute).Seconds())))
			http.Error(w, fmt.Sprintf("Too Many Requests: tenant %s holds %d open MCP sessions, the most allowed; "+
				"close sessions no longer used (HTTP DELETE) or wait for idle ones to time out", tenant, max), http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// initialized counts the tenant's sessions that completed their initialize
// request (others are closed by the SDK when their request ends). The
// passing sessions of sessionless requests, which have no id, do not count.
func (ts *tenantServer) initialized() int {
	n := 0
	for s := range ts.srv.Sessions() {
		if s.ID() != "" && s.InitializeParams() != nil {
			n++
		}
	}
	return n
}

// sessionlessVersion is the first protocol version without sessions or an
// initialize handshake (clients learn the server's versions with
// server/discover). Versions are dates, so they compare as strings.
const sessionlessVersion = "2026-07-28"

// byProtocol sends a request of a sessionless protocol version (its
// MCP-Protocol-Version header says which, as that protocol requires of every
// request) that names no session to sessionless, and the rest to next. So
// server/discover over HTTP lists the versions stdio lists, newest first,
// and a client of either era is served in its own.
func byProtocol(sessionless, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("Mcp-Protocol-Version") >= sessionlessVersion {
			sessionless.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sessionVersion serves a request of an open session at the protocol version
// the session negotiated when its Mcp-Protocol-Version header names an older
// one. The version decides whether a response stream is resumable (a priming
// event with an id, a retry field when the gateway closes it); a session
// negotiated at 2025-11-25 keeps its streams resumable whatever a request
// says. A header naming a newer version than negotiated is left to the SDK.
func (g *Gateway) sessionVersion(tenantOf func(*http.Request) (string, bool), next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, v := r.Header.Get("Mcp-Session-Id"), r.Header.Get("Mcp-Protocol-Version")
		if id != "" && v != "" && v < resumableVersion {
			if tenant, ok := tenantOf(r); ok {
				if nv := g.serverFor(r.Context(), tenant).negotiated(id); nv >= resumableVersion && nv < sessionlessVersion {
					r.Header.Set("Mcp-Protocol-Version", nv)
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// negotiated returns the protocol version of the tenant's session id, ""
// when there is no such session or it is not initialized.
func (ts *tenantServer) negotiated(id string) string {
	for s := range ts.srv.Sessions() {
		if s.ID() == id {
			if p := s.InitializeParams(); p != nil {
				return p.ProtocolVersion
			}
			return ""
		}
	}
	return ""
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
