package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/mcpgate"
)

// mcpPath is where the MCP server answers on --mcp-addr.
const mcpPath = "/mcp"

// mcpFlags are the MCP gateway's flags.
type mcpFlags struct {
	addr, tenant, tokensFile string
	origins                  []string
	maxSessions              int
}

// check refuses MCP settings that cannot work or would be unsafe: a gateway
// with no tenant, or one reachable from other hosts with no tokens.
func (f mcpFlags) check() error {
	if f.maxSessions < 0 {
		return fmt.Errorf("--mcp-max-sessions %d: give a positive bound", f.maxSessions)
	}
	if f.addr == "" {
		if f.tenant != "" || f.tokensFile != "" || len(f.origins) > 0 {
			return errors.New("--mcp-tenant, --mcp-tokens-file and --mcp-allowed-origins need --mcp-addr")
		}
		return nil
	}
	switch {
	case f.tenant == "" && f.tokensFile == "":
		return errors.New("--mcp-addr needs --mcp-tenant (one tenant) or --mcp-tokens-file (a tenant per bearer token)")
	case f.tenant != "" && f.tokensFile != "":
		return errors.New("--mcp-tenant and --mcp-tokens-file: give one")
	case f.tenant != "":
		if err := events.CheckToken("tenant", f.tenant); err != nil {
			return fmt.Errorf("--mcp-tenant: %w", err)
		}
		if !loopback(f.addr) {
			return fmt.Errorf(
				"--mcp-addr %s is not a loopback address: anyone who reaches it would act as tenant %s; give --mcp-tokens-file instead of --mcp-tenant",
				f.addr, f.tenant)
		}
	}
	return nil
}

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// startMCP serves the MCP gateway on --mcp-addr.
func startMCP(f mcpFlags, nc *nats.Conn, log *slog.Logger) (func(), error) {
	gw, err := mcpgate.New(nc, mcpgate.Config{Logger: log})
	if err != nil {
		return nil, err
	}
	hc := mcpgate.HTTPConfig{Tenant: f.tenant, AllowedOrigins: f.origins, MaxSessions: f.maxSessions}
	if f.tokensFile != "" {
		if hc.Tokens, err = mcpgate.LoadTokens(f.tokensFile); err != nil {
			return nil, usageError{fmt.Errorf("--mcp-tokens-file: %w", err)}
		}
	}
	h, err := gw.Handler(hc)
	if err != nil {
		return nil, usageError{fmt.Errorf("--mcp-addr: %w", err)}
	}
	mux := http.NewServeMux()
	mux.Handle(mcpPath, h)
	stop, err := serveHTTP("--mcp-addr", f.addr, mux, log)
	if err != nil {
		gw.Close()
		return nil, err
	}
	return func() { stop(); gw.Close() }, nil
}
