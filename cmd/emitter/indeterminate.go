package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/internal/app/console"
	"github.com/tesserix/toolexec/kvstore"
)

// newIndeterminateCmd is the approval path's list: the records of a tenant
// that wait for an operator.
func newIndeterminateCmd(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "indeterminate",
		Short: "The approval path: list the indeterminate keys of a tenant",
		Long: `An Effectful call whose outcome is unknown leaves its key indeterminate: every
duplicate is answered TOOL_INDETERMINATE until someone decides what happened. List
those keys with 'emitter indeterminate list', find out from the downstream system
whether each effect landed, then settle each with 'emitter resolve'.`,
		Args: noArgs,
	}
	cmd.AddCommand(newIndeterminateListCmd(g))
	return cmd
}

type listOptions struct {
	tenant string
	state  string
	limit  int
}

func newIndeterminateListCmd(g *globalOptions) *cobra.Command {
	var o listOptions
	cmd := &cobra.Command{
		Use:   "list --tenant T [--limit N]",
		Short: "List a tenant's indeterminate keys, oldest first: tool, run, call, reason, age",
		Long: `Ask an executor for the indeterminate records of a tenant, oldest first, and print
for each its age (since it became indeterminate, by the executor's clock), tool, run,
call, reason, whether the tool's body was entered, and its key — what 'emitter
resolve' takes. --state lists claimed or completed records instead. With --json, one
JSON object: the records, "more" when the tenant has more than were listed, and the
executor's time.

Exit status: 0 when listed (also when there are none); 2 for bad input; 1 when no
executor answers admin requests, when its store cannot list, and for anything else.`,
		Example: `  emitter indeterminate list --tenant acme
  emitter resolve --tenant acme --key <key from the list> --complete --outcome K7Q2ZD`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runIndeterminateList(cmd, g, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "", "the tenant whose records to list (required)")
	f.IntVar(&o.limit, "limit", admin.DefaultListLimit, fmt.Sprintf("list at most this many records (at most %d)", admin.MaxListLimit))
	f.StringVar(&o.state, "state", string(kvstore.StateIndeterminate), "list records in this state instead: claimed or completed")
	mustRequire(cmd, "tenant")
	return cmd
}

func runIndeterminateList(cmd *cobra.Command, g *globalOptions, o *listOptions) error {
	if err := g.check(); err != nil {
		return err
	}
	if err := checkTenantKey(o.tenant, ""); err != nil {
		return err
	}
	state := kvstore.State(o.state)
	if !state.Valid() {
		return badInput(fmt.Errorf("--state %q: want indeterminate, claimed or completed", o.state))
	}
	if o.limit < 1 || o.limit > admin.MaxListLimit {
		return badInput(fmt.Errorf("--limit %d: want 1 to %d", o.limit, admin.MaxListLimit))
	}
	s, err := g.connect(cmd)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	resp, err := s.admin.List(ctx, admin.ListRequest{Tenant: o.tenant, State: state, Limit: o.limit})
	if errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("the executor's idempotency store cannot list records: %w", err)
	}
	if err != nil {
		return adminError(ctx, g, o.tenant, "", err)
	}
	if g.json {
		b, err := json.Marshal(resp)
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(append(b, '\n'))
		return err
	}
	return writeList(cmd.OutOrStdout(), hintArgs(g), o.tenant, state, resp)
}

// writeList prints the records as a table for people; conn is the connection
// part of the command it suggests.
func writeList(w io.Writer, conn, tenant string, state kvstore.State, resp *admin.ListResponse) error {
	if len(resp.Records) == 0 {
		_, err := fmt.Fprintf(w, "tenant %s has no %s records\n", tenant, state)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	detail := "REASON\tBODY ENTERED"
	if state != kvstore.StateIndeterminate {
		detail = "HOLDER\tOUTCOME"
	}
	fmt.Fprintf(tw, "AGE\tTOOL\tRUN\tCALL\t%s\tKEY\n", detail)
	for _, r := range resp.Records {
		age := "?"
		if r.UpdatedAt != nil {
			age = console.FormatAge(resp.Now.Sub(*r.UpdatedAt))
		}
		d := fmt.Sprintf("%s\t%t", orDash(r.Reason), r.BodyEntered)
		if state != kvstore.StateIndeterminate {
			d = fmt.Sprintf("%s\t%s", orDash(r.Holder), orDash(cutRunes(displayLine(r.Outcome), 40)))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", age, orDash(display(r.Tool)), orDash(display(r.RunID)), orDash(display(r.CallID)), d, r.Key)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if resp.More {
		fmt.Fprintf(w, "(more %s records than shown: raise --limit, at most %d)\n", state, admin.MaxListLimit)
	}
	if state == kvstore.StateIndeterminate {
		_, err := fmt.Fprintf(w, "settle one: emitter%s resolve --tenant %s --key KEY (--complete --outcome TEXT | --release)\n", conn, tenant)
		return err
	}
	return nil
}

// cutRunes shortens s to at most n characters, marking the cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
