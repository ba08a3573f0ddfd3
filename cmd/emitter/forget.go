package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

type forgetOptions struct {
	tenant string
	yes    bool
	store  storeOptions
}

func newForgetCmd(g *globalOptions) *cobra.Command {
	var o forgetOptions
	cmd := &cobra.Command{
		Use:   "forget --tenant T [--yes]",
		Short: "Erase every idempotency record of a tenant, and its calls and events",
		Long: `Ask an executor to erase every idempotency record of the tenant and to purge the
tenant's calls and events from the TOOLEXEC_CALLS_V2 and TOOLEXEC_EVENTS streams (and
from TOOLEXEC_CALLS, of wire version 1, where it still exists). It prints how many
records were erased where the store can count them (PostgreSQL, Redis and the memory
store); the JetStream KV bucket, the default, erases them with one purge that does not
say how many, so the command says only that they were erased (--json: "records": -1).
After this, every call of the tenant runs its tool again as if it had never been made.
It cannot be undone.

It asks for confirmation on the terminal unless --yes is given.

With --store it erases the records in the idempotency store itself (see 'emitter
resolve --help'), for when no executor is running, and purges the streams on
--server; if NATS cannot be reached, the records are erased all the same and the
command says that the calls and events were not purged.

Exit status: 0 when erased; 2 for bad input; 1 when not confirmed, when no executor
answers admin requests, and for anything else.`,
		Example: `  emitter forget --tenant acme
  emitter forget --tenant acme --yes --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runForget(cmd, g, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "", "tenant to forget (required)")
	f.BoolVarP(&o.yes, "yes", "y", false, "do not ask for confirmation")
	o.store.register(cmd)
	mustRequire(cmd, "tenant")
	return cmd
}

func runForget(cmd *cobra.Command, g *globalOptions, o *forgetOptions) error {
	if err := g.check(); err != nil {
		return err
	}
	if err := checkTenantKey(o.tenant, ""); err != nil {
		return err
	}
	if err := o.store.check(); err != nil {
		return err
	}
	if !o.yes {
		fmt.Fprintf(cmd.ErrOrStderr(), "Erase every idempotency record of tenant %s, and purge its calls and events? "+
			"This cannot be undone. [y/N] ", o.tenant)
		line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
		answer := strings.ToLower(strings.TrimSpace(line))
		if answer != "y" && answer != "yes" {
			if err != nil {
				fmt.Fprintln(cmd.ErrOrStderr())
			}
			return errors.New("not confirmed: nothing was erased (--yes skips the question)")
		}
	}
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	a, err := o.store.open(ctx, cmd, g, true)
	if err != nil {
		return err
	}
	defer a.Close()
	n, err := a.Forget(ctx, o.tenant)
	if err != nil {
		return a.explain(ctx, o.tenant, "", err)
	}
	out := cmd.OutOrStdout()
	if g.json {
		b, err := json.Marshal(map[string]any{"tenant": o.tenant, "records": n})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	if n < 0 {
		_, err = fmt.Fprintf(out, "forgot tenant %s: its records were erased (the store does not count them); its calls and events were purged\n",
			o.tenant)
		return err
	}
	_, err = fmt.Fprintf(out, "forgot tenant %s: %d %s erased; its calls and events were purged\n", o.tenant, n,
		plural(n, "record", "records"))
	return err
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
