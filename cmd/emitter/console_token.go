package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec/internal/app/console"
)

type consoleTokenOptions struct {
	operator, file string
	admin          bool
	tenants        []string
}

func newConsoleTokenCmd(g *globalOptions) *cobra.Command {
	var o consoleTokenOptions
	cmd := &cobra.Command{
		Use:   "console-token --operator NAME (--admin | --tenants T[,T…])",
		Short: "Make an operator's sign-in token for the web console, and its line for --console-operators-file",
		Long: `Draw a fresh sign-in token (256 bits from the system's random source) for the
console operator NAME, and print it with the line the executor's
--console-operators-file needs: the name, the token's SHA-256 digest (the file
never holds the token itself) and what the operator sees: every tenant and the
view across them (--admin), or the tenants named (--tenants). Give the token to
the operator; add the line to the file, or let --operators-file add it (the file
is made, readable by its owner only, if it does not exist), and then only the
token is printed. The executor reads the file when it starts.`,
		Example: `  emitter console-token --operator alice --admin
  emitter console-token --operator bob --tenants acme,globex --json
  emitter console-token --operator carol --tenants acme --operators-file console-operators`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var b [32]byte
			if _, err := rand.Read(b[:]); err != nil {
				return err
			}
			token := "tco_" + hex.EncodeToString(b[:])
			line, err := console.OperatorLine(o.operator, token, o.admin, o.tenants)
			if err != nil {
				return badInput(err)
			}
			out := cmd.OutOrStdout()
			if o.file != "" {
				if err := appendLine(o.file, line); err != nil {
					return fmt.Errorf("--operators-file: %w", errors.Unwrap(err)) // appendLine names its own flag
				}
				if !g.json {
					_, err := fmt.Fprintln(out, token)
					return err
				}
			}
			if g.json {
				return json.NewEncoder(out).Encode(map[string]string{"operator": o.operator, "token": token, "operators_file_line": line})
			}
			_, err = fmt.Fprintf(out, "# %s's sign-in token for the console:\n%s\n# the line for the executor's --console-operators-file:\n%s\n",
				o.operator, token, line)
			return err
		},
	}
	cmd.Flags().StringVar(&o.operator, "operator", "", "the operator's name, as the audit trail will carry it (required)")
	cmd.Flags().BoolVar(&o.admin, "admin", false, "the operator sees every tenant, and the view across them")
	cmd.Flags().StringSliceVar(&o.tenants, "tenants", nil, "the tenants the operator sees (comma-separated)")
	cmd.Flags().StringVar(&o.file, "operators-file", "", "add the operator's line to this operators file, and print the token alone")
	mustRequire(cmd, "operator")
	return cmd
}
