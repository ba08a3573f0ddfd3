// Command executor runs toolexec's worker: it takes tool calls from NATS
// JetStream, runs them under their idempotency policies and publishes the answers.
//
// With no NATS URL it starts an embedded NATS server with JetStream, so that one
// command runs the whole thing:
//
//	executor --demo
//
// Every flag can also be set with a TOOLEXEC_* variable (--server is
// TOOLEXEC_NATS_URL, --store is TOOLEXEC_STORE); a flag on the command line wins.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec/internal/buildinfo"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := newCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "executor:", err)
		var ue usageError
		if errors.As(err, &ue) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}

// usageError marks configuration errors (exit status 2).
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func newCommand() *cobra.Command {
	var cfg config
	cmd := &cobra.Command{
		Use:   "executor",
		Short: "Run tool calls from NATS JetStream with at most one side effect per idempotency key",
		Long: `executor takes tool calls (CloudEvents on toolexec.call.<tenant>.<tool>.<call_id>) from
the shared durable consumer of the TOOLEXEC_CALLS_V2 stream (and of TOOLEXEC_CALLS, the
calls stream of wire version 1, while it exists), claims each call's idempotency
key, runs the tool and publishes exactly one answer per call on
toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>.

With no server (no --server/-s, TOOLEXEC_NATS_URL, NATS_URL or nats CLI context
named by --context, TOOLEXEC_CONTEXT or NATS_CONTEXT) it starts an embedded NATS
server with JetStream on --nats-host:--nats-port, keeping its data under --data-dir.
The connection flags are the nats CLI's (--server, --creds, --nkey, --user,
--password, --tlscert, --tlskey, --tlsca, --context); each takes, in this order,
the flag, its TOOLEXEC_* variable (TOOLEXEC_NATS_URL, TOOLEXEC_NATS_CREDS, …,
TOOLEXEC_TLS_CERT, as before), the nats CLI's variable (NATS_URL, NATS_CREDS,
NATS_NKEY, NATS_USER, NATS_PASSWORD, NATS_CERT, NATS_KEY, NATS_CA), then the
context. The context the nats CLI has selected is not used: name it. Every other
flag can be set with a TOOLEXEC_* variable: --store is TOOLEXEC_STORE.
A server that cannot be reached yet is waited for (--nats-wait bounds the wait).

Operations: --metrics-addr serves Prometheus /metrics, /healthz and /readyz;
traces go out when the standard OTEL_* variables ask for them (for example
OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4318); --console-addr serves the
operators' web console, signed in to with each operator's own token
(--console-operators-file) or a shared TOOLEXEC_CONSOLE_TOKEN.

Agents: --mcp-addr serves the Model Context Protocol (Streamable HTTP at /mcp):
tools/list lists the executors' tools, tools/call is an ordinary call, answered
completed, deduplicated or indeterminate. Give --mcp-tenant for one tenant, or
--mcp-tokens-file to map bearer tokens to tenants.

Workers: a tool's body may run in a worker, a process in any language that
serves it with the NATS service API (docs/PROTOCOL.md §12). With --workers (on
by default) the executor asks $SRV.INFO.toolexec-worker when it starts and
every --workers-interval, and serves the tools the workers declare; a tool two
of them declare differently (or one declares unlike the tools file's nats:
tool, or like a tool the executor runs itself) is not run, its calls rejected
tool_conflict, until they agree: it is logged, counted and listed on /readyz.
With --workers the executor may start with no tools of its own.

MCP servers: the tools file's mcp_servers are started with the executor. One
that cannot be reached does not stop it: its tools are listed as unavailable,
their calls rejected upstream_unavailable (nothing runs), and it is tried again
in the background (restart_delay); /readyz and toolexec_mcp_server_state name
each server's state. A command that cannot be run at all stops the executor.

Tenants: on a server with an account per tenant (deploy/accounts.conf), give
--admin-account ADMIN so that admin requests (forget, inspect, list, resolve)
are served only when the server says they come from the admin account; workers
connect as the user worker, in the account WORKERS.`,
		Version:       buildinfo.Get().String(),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags(), os.LookupEnv); err != nil {
				return usageError{err}
			}
			if err := cfg.resolveNATS(os.LookupEnv); err != nil {
				return usageError{err}
			}
			if err := cfg.check(); err != nil {
				return usageError{err}
			}
			return run(cmd.Context(), cfg, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	cfg.register(cmd.Flags())
	cmd.AddCommand(newHealthcheckCommand())
	return cmd
}
