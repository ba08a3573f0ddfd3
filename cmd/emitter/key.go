package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec/idemkey"
)

// maxStdinArgs bounds what `--args -` reads from stdin.
const maxStdinArgs = 64 << 20

type keyOptions struct {
	tenant, run, tool string
	args              string
	keyArguments      string
	canonical         bool
}

func newKeyCmd() *cobra.Command {
	var o keyOptions
	cmd := &cobra.Command{
		Use:   "key --tenant T --run R --tool N --args JSON [--key-arguments a,b] [--canonical]",
		Short: "Derive a call's idempotency key",
		Long: `Derive the idempotency key of a tool call, as the executor does, and print it, 64
lowercase hex digits, followed by a newline (docs/PROTOCOL.md, section "The
idempotency key", describes the derivation). With --canonical, print the canonical
envelope that is hashed instead.

Without --key-arguments every argument counts; --key-arguments "" counts none (the key
is tenant, run and tool alone); otherwise the comma-separated names count (a name
cannot contain a comma).

Where no key can be derived (a key argument absent from the call, invalid JSON, a
refused number or string, arguments that are not an object) nothing is printed on
stdout, the reason and its code are printed on stderr, and the exit status is 2.`,
		Example: `  emitter key --tenant acme --run run_1 --tool book --args '{"flight":"BA117","request_id":"a"}' --key-arguments flight
  echo '{"flight":"BA117"}' | emitter key --tenant acme --run run_1 --tool book --args - --canonical`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("unexpected argument %q: key takes flags only (the call's arguments go in --args)", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runKey(cmd, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "", "tenant of the call (required)")
	f.StringVar(&o.run, "run", "", "run id of the call (required)")
	f.StringVar(&o.tool, "tool", "", "tool name (required)")
	f.StringVar(&o.args, "args", "", "the call's arguments, a JSON object; - reads them from stdin (required)")
	f.StringVar(&o.keyArguments, "key-arguments", "", `comma-separated key arguments; omitted: every argument; "": none`)
	f.BoolVar(&o.canonical, "canonical", false, "print the canonical envelope instead of the key")
	for _, name := range []string{"tenant", "run", "tool", "args"} {
		if err := cmd.MarkFlagRequired(name); err != nil {
			panic(err) // the flag is defined just above
		}
	}
	return cmd
}

func runKey(cmd *cobra.Command, o *keyOptions) error {
	raw := []byte(o.args)
	if o.args == "-" {
		var err error
		raw, err = io.ReadAll(io.LimitReader(cmd.InOrStdin(), maxStdinArgs+1))
		if err != nil {
			return fmt.Errorf("read arguments from stdin: %w", err)
		}
		if len(raw) > maxStdinArgs {
			return badInput(fmt.Errorf("arguments on stdin exceed %d bytes", maxStdinArgs))
		}
	}
	var keyArguments []string // nil: every argument
	if cmd.Flags().Changed("key-arguments") {
		keyArguments = splitKeyArguments(o.keyArguments)
	}
	key, err := idemkey.Derive(o.tenant, o.run, o.tool, raw, keyArguments)
	if err != nil {
		code := idemkey.Code(err)
		if code == "" {
			return err
		}
		return badInput(fmt.Errorf("no key can be derived (%s): %w", code, err))
	}
	out := key.Hex
	if o.canonical {
		out = string(key.Canonical)
	}
	if _, err := io.WriteString(cmd.OutOrStdout(), out+"\n"); err != nil {
		return errors.Join(errors.New("write the key"), err)
	}
	return nil
}

// splitKeyArguments splits the --key-arguments value: "" is the empty list, anything
// else comma-separated names, taken as they are.
func splitKeyArguments(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}
