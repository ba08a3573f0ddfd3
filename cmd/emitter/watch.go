package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// watchKeyLen is how many hex digits of a key a watch line shows, and
// watchValueLen how many characters of an outcome or error.
const (
	watchKeyLen   = 12
	watchValueLen = 80
)

type watchOptions struct {
	tenant, tool string
	kinds        []string
	fromStart    bool
	since        time.Duration
}

func newWatchCmd(g *globalOptions) *cobra.Command {
	var o watchOptions
	cmd := &cobra.Command{
		Use:   "watch [--tenant T] [--kind K,...] [--tool N] [--from-start | --since DURATION]",
		Short: "Print answers and audit events as they are published",
		Long: `Print the answers and audit events of the TOOLEXEC_EVENTS stream as they are
published, in stream order, one line each (time, tenant, kind, tool, run, call, the
first digits of the key, and the outcome, reason or error), or one JSON object a
line with --json, until interrupted (Ctrl-C).

--tenant, --kind and --tool narrow what is shown; each defaults to all. --kind takes
answer kinds (completed, deduplicated, indeterminate, failed, rejected), resolved
(an operator settled an indeterminate key), and progress and log (what a call's
body reported while it ran: an upstream MCP server's progress and log
notifications, bounded per call), comma-separated or repeated.

By default only events published from now on are shown; --from-start shows every
stored event first, --since DURATION those of the last DURATION.

A tenant whose NATS account has no JetStream (its own account, importing its
subjects from the executors') reads the stored events through the executors'
history service, without being told to; it must then give --tenant, its own.
The operators' account (ADMIN in deploy/accounts.conf), which has no JetStream
either, reads every tenant's through the executors' toolexec.admin.history.
Events published while the connection is down are not shown.

Exit status: 0 when interrupted, 2 for bad input, 1 for anything else.`,
		Example: `  emitter watch
  emitter watch --kind indeterminate,deduplicated          # an auditor's view
  emitter watch --tenant acme --tool book --since 1h --json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runWatch(cmd, g, &o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.tenant, "tenant", "", "only this tenant's events")
	f.StringSliceVar(&o.kinds, "kind", nil, "only events of these kinds")
	f.StringVar(&o.tool, "tool", "", "only this tool's events")
	f.BoolVar(&o.fromStart, "from-start", false, "show every stored event first")
	f.DurationVar(&o.since, "since", 0, "show the stored events of this last duration first")
	cmd.MarkFlagsMutuallyExclusive("from-start", "since")
	return cmd
}

// watchFilter returns the subject filter for the options and the kinds to keep
// on the client (nil: all those the filter lets through). One kind is filtered
// by the server; several are filtered here, so that events keep their stream
// order.
func watchFilter(o *watchOptions) (string, map[events.Kind]bool, error) {
	tenant, tool, kind := "*", "*", "*"
	if o.tenant != "" {
		if err := events.CheckToken("--tenant", o.tenant); err != nil {
			return "", nil, err
		}
		tenant = o.tenant
	}
	if o.tool != "" {
		if err := events.CheckToken("--tool", o.tool); err != nil {
			return "", nil, err
		}
		tool = o.tool
	}
	var keep map[events.Kind]bool
	for _, s := range o.kinds {
		k, err := events.ParseKind(strings.TrimSpace(s))
		if n := strings.TrimSpace(s); n == wire.NoteProgress || n == wire.NoteLog {
			k, err = events.Kind(n), nil
		}
		if err != nil {
			return "", nil, fmt.Errorf("--kind %q: %w (want one of %s)", s, err, kindNames())
		}
		if keep == nil {
			keep = map[events.Kind]bool{}
		}
		keep[k] = true
	}
	if len(keep) == 1 {
		for k := range keep {
			kind = string(k)
		}
		keep = nil
	}
	return wire.EventPrefix + tenant + "." + kind + "." + tool + ".>", keep, nil
}

func kindNames() string {
	var names []string
	for _, k := range events.Kinds() {
		names = append(names, string(k))
	}
	return strings.Join(append(names, wire.NoteProgress, wire.NoteLog), ", ")
}

func runWatch(cmd *cobra.Command, g *globalOptions, o *watchOptions) error {
	if err := g.check(); err != nil {
		return err
	}
	if o.since < 0 {
		return badInput(fmt.Errorf("--since %v is negative", o.since))
	}
	filter, keep, err := watchFilter(o)
	if err != nil {
		return badInput(err)
	}
	var opts []toolexec.WatchOption
	switch {
	case o.fromStart:
		opts = append(opts, toolexec.WatchFromStart())
	case o.since > 0:
		opts = append(opts, toolexec.WatchSince(time.Now().Add(-o.since)))
	}
	s, err := g.connect(cmd)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := cmd.Context()
	ch, err := s.client.WatchEvents(ctx, filter, opts...)
	if errors.Is(err, toolexec.ErrNoHistoryService) && o.tenant == "" {
		// Every tenant's history is the operators' (toolexec.admin.history),
		// which a tenant's account does not reach.
		return badInput(fmt.Errorf(
			"%w\n(this account reads events through the executors' history service, and only the operators' account reads every tenant's: give "+
				"--tenant)", err))
	}
	if err != nil {
		return noStreamHint(err)
	}
	if !g.json {
		fmt.Fprintf(cmd.ErrOrStderr(), "watching %s on %s (Ctrl-C to stop)\n", filter, s.url)
	}
	out := cmd.OutOrStdout()
	write, writeNote := writeWatchLine, writeNoteLine
	if g.json {
		write, writeNote = writeAnswerJSON, writeNoteJSON
	}
	for ev := range ch {
		var err error
		switch {
		case ev.Note != nil:
			if keep != nil && !keep[events.Kind(ev.Note.Kind)] {
				continue
			}
			err = writeNote(out, *ev.Note)
		case keep != nil && !keep[ev.Answer.Kind]:
			continue
		default:
			err = write(out, *ev.Answer)
		}
		if err != nil {
			return fmt.Errorf("writing an event: %w", err)
		}
	}
	return nil
}

// writeNoteLine writes a note (the progress or log record of a call's body)
// as one line for people, in the shape of an answer's.
func writeNoteLine(w io.Writer, n wire.Note) error {
	var b strings.Builder
	ts := "-"
	if !n.Time.IsZero() {
		ts = n.Time.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	fmt.Fprintf(&b, "%s  %s  %-13s  %s  run=%s call=%s seq=%d ", ts, n.Tenant, n.Kind, n.Tool, n.RunID, n.CallID, n.Seq)
	switch n.Kind {
	case wire.NoteProgress:
		fmt.Fprintf(&b, " progress=%g", n.Progress)
		if n.Total > 0 {
			fmt.Fprintf(&b, "/%g", n.Total)
		}
		if n.Message != "" {
			fmt.Fprintf(&b, " message=%s", shorten(n.Message))
		}
	case wire.NoteLog:
		fmt.Fprintf(&b, " level=%s", n.Level)
		if n.Logger != "" {
			fmt.Fprintf(&b, " logger=%s", shorten(n.Logger))
		}
		fmt.Fprintf(&b, " data=%s", shorten(string(n.Data)))
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// noteJSON is a note as watch --json writes it.
type noteJSON struct {
	Kind     string          `json:"kind"`
	Tenant   string          `json:"tenant"`
	Tool     string          `json:"tool"`
	RunID    string          `json:"run_id"`
	CallID   string          `json:"call_id"`
	Seq      int             `json:"seq"`
	Time     *time.Time      `json:"time,omitempty"`
	Progress *float64        `json:"progress,omitempty"`
	Total    *float64        `json:"total,omitempty"`
	Message  string          `json:"message,omitempty"`
	Level    string          `json:"level,omitempty"`
	Logger   string          `json:"logger,omitempty"`
	Data     json.RawMessage `json:"data,omitempty"`
}

func writeNoteJSON(w io.Writer, n wire.Note) error {
	j := noteJSON{Kind: n.Kind, Tenant: n.Tenant, Tool: n.Tool, RunID: n.RunID, CallID: n.CallID, Seq: n.Seq,
		Message: n.Message, Level: n.Level, Logger: n.Logger, Data: n.Data}
	if !n.Time.IsZero() {
		j.Time = &n.Time
	}
	if n.Kind == wire.NoteProgress {
		j.Progress = &n.Progress
		if n.Total > 0 {
			j.Total = &n.Total
		}
	}
	b, err := json.Marshal(j)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeWatchLine writes a as one line for people.
func writeWatchLine(w io.Writer, a events.Answer) error {
	var b strings.Builder
	ts := "-"
	if !a.Time.IsZero() {
		ts = a.Time.UTC().Format("2006-01-02T15:04:05.000Z")
	}
	fmt.Fprintf(&b, "%s  %s  %-13s  %s  run=%s call=%s", ts, a.Tenant, a.Kind, orDash(a.Tool), orDash(a.RunID), orDash(a.CallID))
	if a.Key != "" {
		k := a.Key
		if len(k) > watchKeyLen {
			k = k[:watchKeyLen]
		}
		fmt.Fprintf(&b, " key=%s", k)
	}
	b.WriteString(" ")
	switch a.Kind {
	case events.KindCompleted, events.KindDeduplicated:
		fmt.Fprintf(&b, " outcome=%s", shorten(a.Outcome))
	case events.KindIndeterminate:
		fmt.Fprintf(&b, " reason=%s body_entered=%t", a.Reason, a.BodyEntered)
	case events.KindFailed, events.KindRejected:
		fmt.Fprintf(&b, " code=%s", a.Code)
		if a.Field != "" {
			fmt.Fprintf(&b, " field=%s", shorten(a.Field))
		}
		fmt.Fprintf(&b, " error=%s", shorten(a.Error))
	case events.KindResolved:
		fmt.Fprintf(&b, " action=%s", a.Action)
		if a.Operator != "" {
			fmt.Fprintf(&b, " operator=%s", shorten(a.Operator))
		}
		if a.Action == events.ActionComplete {
			fmt.Fprintf(&b, " outcome=%s", shorten(a.Outcome))
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// shorten returns s quoted, cut to watchValueLen characters: a watch line
// stays one line whatever the outcome holds.
func shorten(s string) string {
	r := []rune(s)
	if len(r) > watchValueLen {
		return fmt.Sprintf("%q…", string(r[:watchValueLen]))
	}
	return fmt.Sprintf("%q", s)
}
