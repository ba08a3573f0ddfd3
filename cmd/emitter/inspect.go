package main

import (
	"github.com/spf13/cobra"
)

type inspectOptions struct {
	tenant, key string
	store       storeOptions
}

func newInspectCmd(g *globalOptions) *cobra.Command {
	var o inspectOptions
	cmd := &cobra.Command{
		Use:   "inspect --tenant T --key K",
		Short: "Print the idempotency record of a key",
		Long: `Ask an executor for the idempotency record of a tenant's key (the 64 hex digits an
answer or 'emitter key' prints) and print it: its state (claimed, completed,
indeterminate), the tool, run and call that made it, the outcome or the reason, the
holder and its lease, the revision and the times. Records never hold the call's
arguments, so neither does this.

With --store it reads the record from the idempotency store itself (see 'emitter
resolve --help'), for when no executor is running.

Exit status: 0 when printed; 3 when the tenant has no record for the key; 2 for bad
input; 1 when no executor answers admin requests (or the store cannot be reached),
and for anything else.`,
		Example: `  emitter inspect --tenant acme --key dcaca72c477ec402dd504f145eb9fa54d2964d52f26edc7cd656608baca21496
  emitter inspect --tenant acme --key dcaca72c…21496 --store postgres --postgres-url postgres://toolexec@db/toolexec`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInspect(cmd, g, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "", "tenant of the key (required)")
	f.StringVar(&o.key, "key", "", "the idempotency key, 64 hex digits (required)")
	o.store.register(cmd)
	mustRequire(cmd, "tenant", "key")
	return cmd
}

func runInspect(cmd *cobra.Command, g *globalOptions, o *inspectOptions) error {
	if err := g.check(); err != nil {
		return err
	}
	if err := checkTenantKey(o.tenant, o.key); err != nil {
		return err
	}
	if err := o.store.check(); err != nil {
		return err
	}
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	a, err := o.store.open(ctx, cmd, g, false)
	if err != nil {
		return err
	}
	defer a.Close()
	rec, err := a.Inspect(ctx, o.tenant, o.key)
	if err != nil {
		return a.explain(ctx, o.tenant, o.key, err)
	}
	return writeRecord(cmd.OutOrStdout(), g.json, rec)
}
