package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/mcpgate"
)

type mcpOptions struct {
	tenant                 string
	maxWait, progressEvery time.Duration
}

func newMCPCmd(g *globalOptions) *cobra.Command {
	var o mcpOptions
	cmd := &cobra.Command{
		Use:   "mcp --tenant T",
		Short: "Serve toolexec's tools to an MCP client over stdio (for agents that spawn their tools server)",
		Long: `Serve the Model Context Protocol on standard input and output, for one tenant: an
MCP client (a desktop agent, an IDE) that spawns its tools server runs this command.
tools/list lists the tools the executors declare; tools/call publishes an ordinary
call on toolexec.call.<tenant>.<tool>.<call_id>, which any executor runs, and returns its
answer: completed, deduplicated, or an error result that says plainly when the
outcome is unknown and that retrying will not run the tool again.

The calls of one session share a run (so a repeated call is deduplicated) unless a
request sets _meta io.tesserix.toolexec/run_id; a request that sets
io.tesserix.toolexec/call_id to an earlier call's id gets that call's answer.
Logs go to standard error; standard output carries MCP messages only.`,
		Example: `  emitter mcp --tenant acme -s nats://127.0.0.1:4222
  # in an MCP client's configuration:
  #   {"command": "emitter", "args": ["mcp", "--tenant", "acme", "-s", "nats://127.0.0.1:4222"]}`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runMCP(cmd, g, &o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "", "the tenant of every call (required)")
	f.DurationVar(&o.maxWait, "max-wait", mcpgate.DefaultMaxWait,
		"how long a tools/call waits for its answer before returning one that names the call, to ask again")
	f.DurationVar(&o.progressEvery, "progress-every", mcpgate.DefaultProgressEvery,
		"how often a client that sent a progressToken hears that its call still waits")
	mustRequire(cmd, "tenant")
	return cmd
}

func runMCP(cmd *cobra.Command, g *globalOptions, o *mcpOptions) error {
	if err := events.CheckToken("--tenant", o.tenant); err != nil {
		return badInput(err)
	}
	if o.maxWait <= 0 || o.progressEvery <= 0 {
		return badInput(fmt.Errorf("--max-wait %v, --progress-every %v: must be positive", o.maxWait, o.progressEvery))
	}
	s, err := g.connect(cmd)
	if err != nil {
		return err
	}
	defer s.Close()
	log := slog.New(slog.NewTextHandler(s.logw, &slog.HandlerOptions{Level: slog.LevelWarn}))
	gw, err := mcpgate.New(s.nc, mcpgate.Config{MaxWait: o.maxWait, ProgressEvery: o.progressEvery, Logger: log})
	if err != nil {
		return err
	}
	return gw.ServeStdio(cmd.Context(), o.tenant, io.NopCloser(cmd.InOrStdin()), nopCloser{cmd.OutOrStdout()})
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

type mcpTokenOptions struct{ tenant, file string }

func newMCPTokenCmd(g *globalOptions) *cobra.Command {
	var o mcpTokenOptions
	cmd := &cobra.Command{
		Use:   "mcp-token --tenant T",
		Short: "Make a bearer token for the MCP server, and its line for --mcp-tokens-file",
		Long: `Draw a fresh bearer token (256 bits from the system's random source) for an MCP
client of tenant T, and print it with the line that the executor's --mcp-tokens-file
needs: the tenant and the token's SHA-256 digest, so that the file never holds the
token itself. Give the token to the client; add the line to the file, or let
--tokens-file add it (the file is made, readable by its owner only, if it does not
exist), and then only the token is printed.`,
		Example: `  emitter mcp-token --tenant acme
  emitter mcp-token --tenant acme --json
  export TOOLEXEC_MCP_TOKEN=$(emitter mcp-token --tenant acme --tokens-file mcp-tokens)`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := events.CheckToken("--tenant", o.tenant); err != nil {
				return badInput(err)
			}
			var b [32]byte
			if _, err := rand.Read(b[:]); err != nil {
				return err
			}
			token := "mcp_" + hex.EncodeToString(b[:])
			line := o.tenant + " " + mcpgate.HashToken(token)
			out := cmd.OutOrStdout()
			if o.file != "" {
				if err := appendLine(o.file, line); err != nil {
					return err
				}
				if !g.json {
					_, err := fmt.Fprintln(out, token)
					return err
				}
			}
			if g.json {
				return json.NewEncoder(out).Encode(map[string]string{"tenant": o.tenant, "token": token, "tokens_file_line": line})
			}
			_, err := fmt.Fprintf(out, "# the bearer token, for the MCP client of %s:\n%s\n# the line for the executor's --mcp-tokens-file:\n%s\n",
				o.tenant, token, line)
			return err
		},
	}
	cmd.Flags().StringVar(&o.tenant, "tenant", "", "the tenant the token acts for (required)")
	cmd.Flags().StringVar(&o.file, "tokens-file", "", "add the token's line to this tokens file, and print the token alone")
	mustRequire(cmd, "tenant")
	return cmd
}

// appendLine adds line to the file at path, made readable by its owner only
// if it does not exist, in a folder made for its owner only if that does not
// exist either (the README keeps these files in ./.toolexec).
func appendLine(path, line string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("--tokens-file: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("--tokens-file: %w", err)
	}
	if _, err := fmt.Fprintln(f, line); err != nil {
		f.Close()
		return fmt.Errorf("--tokens-file: %w", err)
	}
	return f.Close()
}
