package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec/events"
)

type attachOptions struct {
	tenant, tool, run, callID string
}

func newAttachCmd(g *globalOptions) *cobra.Command {
	var o attachOptions
	cmd := &cobra.Command{
		Use:   "attach --tenant T --tool N --run R --call-id C",
		Short: "Print the answer of a call published earlier",
		Long: `Print the answer of a call published earlier, by this emitter or any other client:
from the TOOLEXEC_EVENTS stream if it is stored there, else the moment it is, waiting
up to --timeout. It is how a caller that timed out, or restarted, finds its answer.
Answers are kept as long as the events stream keeps them (7 days by default). A
tenant whose NATS account has no JetStream asks the executors' history service
(toolexec.history.<tenant>) instead, without being told to; the operators'
account, which reaches no tenant's history subject, asks toolexec.admin.history.

The answer is printed as 'emitter call' prints it, with the same exit status:
  0  completed, or TOOL_DEDUPLICATED
  3  failed or rejected
  4  TOOL_INDETERMINATE
  2  bad input (a token that is not 1 to 128 characters of A-Z a-z 0-9 _ -)
  1  anything else: no connection, no answer within --timeout, interrupted`,
		Example: `  emitter attach --tenant acme --tool book --run run_1 --call-id call_1`,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAttach(cmd, g, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "", "tenant of the call (required)")
	f.StringVar(&o.tool, "tool", "", "tool of the call (required)")
	f.StringVar(&o.run, "run", "", "run id of the call (required)")
	f.StringVar(&o.callID, "call-id", "", "call id (required)")
	mustRequire(cmd, "tenant", "tool", "run", "call-id")
	return cmd
}

func runAttach(cmd *cobra.Command, g *globalOptions, o *attachOptions) error {
	if err := g.check(); err != nil {
		return err
	}
	for _, f := range []struct{ flag, v string }{
		{"--tenant", o.tenant}, {"--tool", o.tool}, {"--run", o.run}, {"--call-id", o.callID},
	} {
		if err := events.CheckToken(f.flag, f.v); err != nil {
			return badInput(err)
		}
	}
	s, err := g.connect(cmd)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	a, err := s.client.Attach(ctx, o.tenant, o.tool, o.run, o.callID)
	if a == nil {
		if ended(ctx) {
			c := events.Call{Tenant: o.tenant, Tool: o.tool, RunID: o.run, CallID: o.callID}
			return waitError(cmd.Context(), g, c, "no answer stored yet", err)
		}
		return noStreamHint(fmt.Errorf("reading the answer: %w", err))
	}
	return printAnswer(cmd.OutOrStdout(), g, *a)
}
