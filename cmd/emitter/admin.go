package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
)

// The admin commands (forget, inspect, resolve) share what is here: checking a
// tenant and a key, printing a record, and turning admin errors into messages
// and exit statuses.

var keyRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkTenantKey refuses a tenant that is not a token and a key that is not 64
// lower-case hex digits (a key printed by 'emitter key' or an answer).
func checkTenantKey(tenant, key string) error {
	if err := events.CheckToken("--tenant", tenant); err != nil {
		return badInput(err)
	}
	if key != "" && !keyRE.MatchString(key) {
		return badInput(fmt.Errorf("--key %q is not an idempotency key (64 lower-case hex digits)", cut(key, 80)))
	}
	return nil
}

func cut(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// adminError explains an admin request's failure, for tenant and key (empty
// for forget), with its exit status: 3 for a definite answer (no such record,
// not indeterminate), 2 for a request the executor found invalid, 1 otherwise.
func adminError(ctx context.Context, g *globalOptions, tenant, key string, err error) error {
	var ae *admin.Error
	switch {
	case errors.Is(err, admin.ErrNoResponder):
		return fmt.Errorf("no executor answers admin requests on this server (is one running, and connected to it?): %w", err)
	case errors.Is(err, kvstore.ErrNotFound):
		return &exitError{code: exitFailed, err: fmt.Errorf(
			"tenant %s has no record for key %s: never claimed, released, expired or forgotten", tenant, key)}
	case errors.Is(err, kvstore.ErrNotIndeterminate):
		return &exitError{code: exitFailed, err: fmt.Errorf(
			"key %s of tenant %s is not indeterminate, so there is nothing to resolve (see 'emitter%s inspect --tenant %s --key %s')",
			key, tenant, hintArgs(g), tenant, key)}
	case errors.Is(err, kvstore.ErrInvalid), errors.Is(err, kvstore.ErrTooLarge):
		return badInput(fmt.Errorf("the executor refused the request: %w", err))
	case errors.Is(err, kvstore.ErrUnavailable):
		return fmt.Errorf("the executor cannot reach its idempotency store: %w", err)
	case errors.Is(err, admin.ErrAuditNotPublished):
		return fmt.Errorf("the resolution was applied, but its resolved event was not stored in TOOLEXEC_EVENTS: %w", err)
	case ended(ctx):
		return fmt.Errorf("no reply from an executor within --timeout %v: %w", g.timeout, err)
	case errors.As(err, &ae):
		return fmt.Errorf("the executor could not answer: %w", err)
	}
	return err
}

// writeRecord prints r: for people as aligned "name: value" lines, with --json
// as one JSON object.
func writeRecord(w io.Writer, asJSON bool, r *admin.RecordInfo) error {
	if asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(name, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", name, v)
		}
	}
	ts := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	}
	line("tenant", r.Tenant)
	line("key", r.Key)
	line("state", string(r.State))
	line("tool", r.Tool)
	line("run", r.RunID)
	line("call", r.CallID)
	if r.State == kvstore.StateCompleted {
		o := displayLine(r.Outcome)
		if o == "" {
			o = `""`
		}
		line("outcome", o)
	}
	if r.State == kvstore.StateIndeterminate {
		line("reason", r.Reason)
		line("body entered", fmt.Sprint(r.BodyEntered))
	}
	line("holder", r.Holder)
	line("lease", r.Lease)
	if r.LeaseUntil != nil {
		until := ts(r.LeaseUntil)
		if r.LeaseExpired {
			until += " (run out)"
		}
		line("lease until", until)
	}
	line("check digest", r.CheckDigest)
	line("revision", fmt.Sprint(r.Revision))
	line("created", ts(r.CreatedAt))
	line("updated", ts(r.UpdatedAt))
	line("expires", ts(r.ExpiresAt))
	return tw.Flush()
}

// displayLine is display for a value that must stay on its line.
func displayLine(s string) string {
	if strings.ContainsAny(s, "\n\t") {
		return fmt.Sprintf("%q", s)
	}
	return display(s)
}
