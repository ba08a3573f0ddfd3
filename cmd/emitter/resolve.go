package main

import (
	"errors"
	"fmt"
	"os"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/events"
)

type resolveOptions struct {
	tenant, key       string
	complete, release bool
	outcome           string
	operator          string
	store             storeOptions
}

func newResolveCmd(g *globalOptions) *cobra.Command {
	var o resolveOptions
	cmd := &cobra.Command{
		Use:   "resolve --tenant T --key K (--complete --outcome TEXT | --release) [--operator NAME]",
		Short: "Settle an indeterminate key: record its outcome, or release it",
		Long: `Settle an indeterminate key once you know what happened to its effect (ask the
downstream system):

  --complete --outcome TEXT   the effect landed: record TEXT as the key's outcome, and
                              answer every duplicate with it (TOOL_DEDUPLICATED)
  --release                   the effect did not land: free the key, so that the next
                              call runs the tool

The executor publishes a resolved audit event naming --operator (default $USER, else
"admin"), and this command prints the record as it now is (for a release, as it was).

With --store jetstream|postgres|redis it works on the idempotency store itself, for
when no executor is running: --store jetstream uses the KV bucket on the NATS server
of --server; --store postgres takes --postgres-url and --postgres-schema, --store
redis takes --redis-url and --redis-prefix (defaults: the executor's TOOLEXEC_*
variables), and both take --retention (give the executors' own). The resolved audit
event is still published to TOOLEXEC_EVENTS on --server; if NATS cannot be reached,
the store is resolved all the same and the command says that no event was stored.

Exit status: 0 when resolved; 3 when the key is not indeterminate or the tenant has no
record for it; 2 for bad input; 1 when no executor answers admin requests (or the
store cannot be reached), when the resolution was applied but its audit event was not
stored, and for anything else.`,
		Example: `  emitter resolve --tenant acme --key dcaca72c…21496 --complete --outcome K7Q2ZD --operator alice
  emitter resolve --tenant acme --key dcaca72c…21496 --release
  emitter resolve --tenant acme --key dcaca72c…21496 --release --store redis --redis-url redis://cache:6379/0`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runResolve(cmd, g, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "", "tenant of the key (required)")
	f.StringVar(&o.key, "key", "", "the indeterminate idempotency key, 64 hex digits (required)")
	f.BoolVar(&o.complete, "complete", false, "record --outcome as the key's outcome")
	f.StringVar(&o.outcome, "outcome", "", "the outcome to record, with --complete")
	f.BoolVar(&o.release, "release", false, "free the key: the next call runs the tool")
	f.StringVar(&o.operator, "operator", os.Getenv("USER"), "who decided, for the audit event")
	o.store.register(cmd)
	mustRequire(cmd, "tenant", "key")
	cmd.MarkFlagsMutuallyExclusive("complete", "release")
	cmd.MarkFlagsOneRequired("complete", "release")
	cmd.MarkFlagsMutuallyExclusive("outcome", "release")
	return cmd
}

func runResolve(cmd *cobra.Command, g *globalOptions, o *resolveOptions) error {
	if err := g.check(); err != nil {
		return err
	}
	if err := checkTenantKey(o.tenant, o.key); err != nil {
		return err
	}
	req := admin.ResolveRequest{Tenant: o.tenant, Key: o.key, Operator: o.operator}
	switch {
	case o.complete && !cmd.Flags().Changed("outcome"):
		return badInput(errors.New("--complete needs --outcome: the outcome to record"))
	case o.complete:
		req.Action, req.Outcome = events.ActionComplete, o.outcome
	default:
		req.Action = events.ActionRelease
	}
	if utf8.RuneCountInString(o.operator) > events.MaxOperatorLen || !utf8.ValidString(o.operator) {
		return badInput(fmt.Errorf("--operator: at most %d characters of valid UTF-8", events.MaxOperatorLen))
	}
	if !utf8.ValidString(o.outcome) {
		return badInput(errors.New("--outcome is not valid UTF-8"))
	}
	if err := o.store.check(); err != nil {
		return err
	}
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	a, err := o.store.open(ctx, cmd, g, true)
	if err != nil {
		return err
	}
	defer a.Close()
	rec, err := a.Resolve(ctx, req)
	if rec != nil {
		if !g.json {
			verb := "completed"
			if req.Action == events.ActionRelease {
				verb = "released (the next call runs the tool); the record was"
			}
			op := req.Operator
			if op == "" {
				op = admin.DefaultOperator
			}
			fmt.Fprintf(cmd.OutOrStdout(), "resolved by %s: %s\n", display(op), verb)
		}
		if werr := writeRecord(cmd.OutOrStdout(), g.json, rec); werr != nil && err == nil {
			return werr
		}
	}
	if err != nil {
		return a.explain(ctx, o.tenant, o.key, err)
	}
	return nil
}
