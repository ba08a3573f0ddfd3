// Command emitter is the toolexec client, for people and scripts: it derives
// idempotency keys (emitter key), publishes calls and waits for their answers
// (emitter call, emitter attach), watches the event streams (emitter watch), and
// administers keys and tenants (emitter inspect, resolve, forget).
//
// Exit status: 0 on success; 2 for bad input, whether cobra refused the command line
// (unknown flag, missing required flag, stray argument) or a subcommand refused its
// input; 3 for a call that failed or was rejected (and an admin request's definite
// "no"); 4 for a call whose outcome is indeterminate; 5 for a call not stored
// because a call of the same tenant, tool and call id waits to be answered; 1
// for any other failure.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec/internal/buildinfo"
)

func main() {
	// An interrupt ends a wait or a watch through the context, so that commands
	// close their connection and report before the process exits.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// newRootCmd builds the emitter command tree. Register each subcommand here, one
// line each.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "emitter",
		Short: "Client for toolexec: derive idempotency keys, publish tool calls, watch their events, settle keys",
		// run reports errors itself, on stderr, with the exit status they call for.
		SilenceErrors: true,
		SilenceUsage:  true,
		Version:       buildinfo.Get().String(),
	}
	var g globalOptions
	g.register(root)
	root.AddCommand(newKeyCmd())
	root.AddCommand(newCallCmd(&g))
	root.AddCommand(newAttachCmd(&g))
	root.AddCommand(newWatchCmd(&g))
	root.AddCommand(newInspectCmd(&g))
	root.AddCommand(newResolveCmd(&g))
	root.AddCommand(newForgetCmd(&g))
	root.AddCommand(newIndeterminateCmd(&g))
	root.AddCommand(newBenchCmd(&g))
	root.AddCommand(newMCPCmd(&g))
	root.AddCommand(newMCPTokenCmd(&g))
	root.AddCommand(newConsoleTokenCmd(&g))
	return root
}

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// exitError is an error that chooses the process's exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput marks err as the caller's fault: exit status 2.
func badInput(err error) error { return &exitError{code: exitUsage, err: err} }

// run executes the command line args and returns the exit status. Errors are
// written to stderr, prefixed with the command's path.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	markRunErrors(root)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if cmd == nil {
		cmd = root
	}
	var ee *exitError
	if errors.As(err, &ee) {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
		return ee.code
	}
	// cobra refused the command line before any command ran.
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for usage.\n", cmd.CommandPath(), err, cmd.CommandPath())
	return exitUsage
}

// markRunErrors wraps the RunE of every command under root so that an error a
// running command returns carries an exit status (its own, or 1), which tells it
// apart from cobra's command-line errors (status 2).
func markRunErrors(root *cobra.Command) {
	if runE := root.RunE; runE != nil {
		root.RunE = func(cmd *cobra.Command, args []string) error {
			err := runE(cmd, args)
			var ee *exitError
			if err == nil || errors.As(err, &ee) {
				return err
			}
			return &exitError{code: exitFailure, err: err}
		}
	}
	for _, c := range root.Commands() {
		markRunErrors(c)
	}
}
