package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/idemkey/canonical"
)

type callOptions struct {
	tenant, tool, args  string
	run, callID, source string
	traceParent         string
	binary, noWait      bool
}

func newCallCmd(g *globalOptions) *cobra.Command {
	var o callOptions
	cmd := &cobra.Command{
		Use:   "call --tenant T --tool N [--args JSON] [--run R] [--call-id C]",
		Short: "Publish a tool call and wait for its answer",
		Long: `Publish a tool call as a CloudEvent on toolexec.call.<tenant>.<tool>.<call_id> and wait for its
one answer, then print it: a line naming the kind, the tool, the run, the call and the
idempotency key, and a line with the outcome or the error. With --json the answer is
printed as one JSON object (kind, type, id, subject, time, tenant, tool, run_id,
call_id, key, and outcome, error, code, field, reason or body_entered as the kind has
them).

The run id and the call id are generated when not given, and printed with the answer.
A tenant, tool and call id name one call. A --call-id of a call answered before gets
that call's answer, and nothing runs again (this command marks a call whose id it did
not draw as a repeat, and the executors answer it from the stored answer). A --call-id
of a call of the same tenant and tool that waits to be answered is refused at once,
with exit status 5: 'emitter attach' waits for that call's answer. Another tenant's
call ids never touch this tenant's calls.

--args takes the arguments as a JSON object; "-" reads them from stdin, "@FILE" from a
file. Arguments that are not a JSON object, and a tenant, tool, run id or call id that
is not 1 to 128 characters of A-Z a-z 0-9 _ -, are refused before anything is sent.

When no answer comes within --timeout, the call may still be answered later: the
command says how to pick the answer up with 'emitter attach'. The commands it
suggests (attach, and inspect and resolve after an indeterminate answer) repeat
the connection options this one used, a password or token only as a variable. --no-wait publishes the
call, prints its call id and returns at once.

Exit status:
  0  completed, or TOOL_DEDUPLICATED (an earlier call's outcome answered it)
  3  failed or rejected: nothing happened that a retry would repeat
  4  TOOL_INDETERMINATE: nobody can say whether the effect landed (except with
     reason store_unavailable and body_entered=false, or key_underivable: then
     nothing ran, and the message says so and what to do)
  5  not stored: a call of the same tenant, tool and --call-id waits to be
     answered (with --no-wait too); the message gives the attach command
  2  bad input, refused before anything was published
  1  anything else: no connection, no answer within --timeout, interrupted`,
		Example: `  emitter call --tenant acme --tool lookup_fare --args '{"flight":"BA117"}'
  emitter call --tenant acme --run run_1 --tool book --args '{"flight":"BA117","seats":2,"request_id":"r-1"}'
  echo '{"flight":"BA117"}' | emitter call --tenant acme --tool lookup_fare --args - --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCall(cmd, g, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "", "tenant of the call (required)")
	f.StringVar(&o.tool, "tool", "", "tool to call (required)")
	f.StringVar(&o.args, "args", "{}", `the call's arguments, a JSON object; "-" reads stdin, "@FILE" a file`)
	f.StringVar(&o.run, "run", "", "run id of the call (default: a new one)")
	f.StringVar(&o.callID, "call-id", "", "call id (default: a new one)")
	f.StringVar(&o.source, "source", toolexec.DefaultSource, "CloudEvents source of the call: the agent")
	f.StringVar(&o.traceParent, "traceparent", "", "W3C trace context to send with the call")
	f.BoolVar(&o.binary, "binary", false, "publish in CloudEvents binary mode (attributes in ce- headers)")
	f.BoolVar(&o.noWait, "no-wait", false, "publish the call, print its call id and return without waiting")
	mustRequire(cmd, "tenant", "tool")
	return cmd
}

// buildCall checks the flags and returns the call to publish. Every error is
// bad input.
func buildCall(cmd *cobra.Command, g *globalOptions, o *callOptions) (events.Call, error) {
	if err := g.check(); err != nil {
		return events.Call{}, err
	}
	raw, err := readArgs(cmd.InOrStdin(), o.args)
	if err != nil {
		return events.Call{}, err
	}
	if err := argsSyntax(raw); err != nil {
		return events.Call{}, badInput(err)
	}
	c := events.Call{
		Tenant: o.tenant, Tool: o.tool, RunID: o.run, CallID: o.callID,
		Source: o.source, Arguments: raw, TraceParent: o.traceParent,
	}
	if c.RunID == "" {
		c.RunID = newID("run")
	}
	if c.CallID == "" {
		c.CallID = newID("call")
	} else {
		// An id the caller chose may name a call published before.
		c.Repeat = true
	}
	if c.TraceParent != "" && !validTraceParent(c.TraceParent) {
		return events.Call{}, badInput(fmt.Errorf("--traceparent %q is not a W3C traceparent (00-<32 hex>-<16 hex>-<2 hex>)", c.TraceParent))
	}
	// The event is built here, as the client will build it, so that everything
	// the client would refuse is refused before connecting.
	e, err := wire.CallEvent(c)
	if err != nil {
		return events.Call{}, badInput(callFlagError(err))
	}
	if err := e.Validate(); err != nil {
		return events.Call{}, badInput(fmt.Errorf("the call is not a valid CloudEvent: %w", err))
	}
	return c, nil
}

// argsSyntax refuses arguments that are not JSON, naming the byte offset where
// the parser stopped and what it wanted there, as 'emitter key' does.
func argsSyntax(raw []byte) error {
	if json.Valid(raw) {
		return nil // the wire's own checks (an object, sizes) come next
	}
	_, err := idemkey.Parse(raw)
	var ce *canonical.Error
	if errors.As(err, &ce) {
		return fmt.Errorf("--args: not valid JSON at byte %d: %s (%s)", ce.Offset, ce.Msg, ce.Code)
	}
	var se *json.SyntaxError
	if err := json.Unmarshal(raw, new(json.RawMessage)); errors.As(err, &se) {
		return fmt.Errorf("--args: not valid JSON at byte %d: %s", se.Offset-1, se.Error())
	}
	return fmt.Errorf("--args: not valid JSON")
}

// callFlagError restates a refusal of wire.CallEvent in terms of the flags.
func callFlagError(err error) error {
	var re *events.RejectedError
	if !errors.As(err, &re) {
		return err
	}
	flag := map[string]string{
		wire.ExtTenant: "--tenant", wire.ExtRunID: "--run", "id": "--call-id", "subject": "--tool",
		"source": "--source", "arguments": "--args",
	}[re.Field]
	if flag == "" {
		return err
	}
	return fmt.Errorf("%s: %s (%s)", flag, re.Message, re.Code)
}

func runCall(cmd *cobra.Command, g *globalOptions, o *callOptions) error {
	c, err := buildCall(cmd, g, o)
	if err != nil {
		return err
	}
	opts := []toolexec.ClientOption{toolexec.WithSource(c.Source)}
	if o.binary {
		opts = append(opts, toolexec.WithBinaryMode())
	}
	s, err := g.connect(cmd, opts...)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := g.withTimeout(cmd.Context())
	defer cancel()
	out := cmd.OutOrStdout()

	if o.noWait {
		r, err := s.client.Publish(ctx, c.Tenant, c.Tool, c.Arguments, publishOptions(c)...)
		if err != nil {
			return publishError(g, c, err)
		}
		if g.json {
			b, err := json.Marshal(map[string]any{
				"tenant": r.Tenant, "tool": r.Tool, "run_id": r.RunID, "call_id": r.CallID,
				"stream": r.Stream, "seq": r.Sequence, "duplicate": r.Duplicate,
			})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%s\n", b)
			return err
		}
		if _, err := fmt.Fprintln(out, c.CallID); err != nil {
			return err
		}
		note := "published"
		if r.Duplicate {
			note = "published (a try sent again after a lost acknowledgement found the first one stored)"
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%s; pick up the answer with:\n  %s\n", note, attachCommand(g, c))
		return nil
	}

	a, err := s.client.Call(ctx, c.Tenant, c.Tool, c.Arguments, publishOptions(c)...)
	if a == nil {
		if ended(ctx) {
			return waitError(cmd.Context(), g, c, "publishing the call or waiting for its answer", err)
		}
		return publishError(g, c, err)
	}
	return printAnswer(out, g, *a)
}

// publishOptions are the options that have the client publish c: its run,
// its trace context, and its id, which may repeat an earlier call's when the
// user chose it (c.Repeat) and is fresh when drawn here.
func publishOptions(c events.Call) []toolexec.CallOption {
	id := toolexec.WithFreshCallID(c.CallID)
	if c.Repeat {
		id = toolexec.WithCallID(c.CallID)
	}
	return []toolexec.CallOption{id, toolexec.WithRunID(c.RunID), toolexec.WithTraceParent(c.TraceParent, c.TraceState)}
}

// publishError gives the exit status of a Call or Publish error: bad input for a
// call the client refused, exitTaken for one refused because a call of its
// tenant, tool and call id waits in the stream, 1 otherwise.
func publishError(g *globalOptions, c events.Call, err error) error {
	var re *events.RejectedError
	switch {
	case errors.As(err, &re):
		return badInput(err)
	case errors.Is(err, events.ErrCallIDTaken):
		return &exitError{code: exitTaken, err: fmt.Errorf("call %s of tenant %s and tool %s was not stored: a call with that id "+
			"waits in the calls stream, not yet answered (published before by this tenant); choose another --call-id, "+
			"or wait for that call's answer with:\n  %s", c.CallID, c.Tenant, c.Tool, attachCommand(g, c))}
	}
	return noStreamHint(err)
}

// waitError explains a wait that ended without an answer: the call may still
// be answered, and attach finds the answer.
func waitError(parent context.Context, g *globalOptions, c events.Call, what string, err error) error {
	why := fmt.Sprintf("no answer within --timeout %v", g.timeout)
	if parent.Err() != nil {
		why = "interrupted"
	}
	return fmt.Errorf("%s (%s): %w\n"+
		"the call may still be answered; pick up its answer with:\n  %s", why, what, err, attachCommand(g, c))
}

// ended reports whether ctx has ended or its deadline has passed. The
// deadline is checked too because a JetStream read can fail on a deadline it
// sees has passed a moment before the context's own timer ends the context.
func ended(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	d, ok := ctx.Deadline()
	return ok && !time.Now().Before(d)
}

// attachCommand is the emitter command line that finds c's answer, on the
// server g reached, the way g reached it.
func attachCommand(g *globalOptions, c events.Call) string {
	conn, note := g.hint()
	return fmt.Sprintf("emitter%s attach --tenant %s --tool %s --run %s --call-id %s%s", conn, c.Tenant, c.Tool, c.RunID, c.CallID, note)
}

// readArgs returns the arguments --args names: the value itself, stdin for "-",
// or a file for "@FILE".
func readArgs(stdin io.Reader, v string) ([]byte, error) {
	var (
		r    io.Reader
		from string
	)
	switch {
	case v == "-":
		r, from = stdin, "stdin"
	case strings.HasPrefix(v, "@"):
		f, err := os.Open(v[1:])
		if err != nil {
			return nil, badInput(fmt.Errorf("--args: %w", err))
		}
		defer f.Close()
		r, from = f, v[1:]
	default:
		return []byte(v), nil
	}
	raw, err := io.ReadAll(io.LimitReader(r, maxStdinArgs+1))
	if err != nil {
		return nil, fmt.Errorf("--args: reading %s: %w", from, err)
	}
	if len(raw) > maxStdinArgs {
		return nil, badInput(fmt.Errorf("--args: %s holds more than %d bytes", from, maxStdinArgs))
	}
	return raw, nil
}

// newID returns a new run or call id: prefix, "_" and 32 random hex digits
// (128 bits), a valid token.
func newID(prefix string) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return prefix + "_" + hex.EncodeToString(b)
}

var traceParentRE = regexp.MustCompile(`^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$`)

// validTraceParent reports whether s is a W3C traceparent of a known shape:
// version other than ff, trace id and parent id not all zeros.
func validTraceParent(s string) bool {
	m := traceParentRE.FindStringSubmatch(s)
	if m == nil || m[1] == "ff" {
		return false
	}
	return strings.Trim(m[2], "0") != "" && strings.Trim(m[3], "0") != ""
}

// noArgs refuses positional arguments: these commands take flags only.
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q: this command takes flags only", args[0])
	}
	return nil
}

// mustRequire marks flags of cmd required.
func mustRequire(cmd *cobra.Command, names ...string) {
	for _, name := range names {
		if err := cmd.MarkFlagRequired(name); err != nil {
			panic(err) // a flag defined by the caller
		}
	}
}
