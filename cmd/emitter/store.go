package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/internal/app/storeflags"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/pgstore"
)

// The admin commands (inspect, resolve, forget) ask an executor over the admin
// subjects, or, with --store, work on the idempotency store directly: for an
// operator with no executor running. What is here opens either, behind one
// interface, so that each command's code is the same both ways.

// adminConn is where an admin command's requests go.
type adminConn interface {
	Inspect(ctx context.Context, tenant, key string) (*admin.RecordInfo, error)
	Resolve(ctx context.Context, req admin.ResolveRequest) (*admin.RecordInfo, error)
	Forget(ctx context.Context, tenant string) (int64, error)
	// explain turns an error from the methods above into what the command
	// reports, with its exit status (tenant and key as the request had them;
	// key is empty for forget).
	explain(ctx context.Context, tenant, key string, err error) error
	Close()
}

// storeOptions are the flags that choose direct administration, named as the
// executor names them (package storeflags, for Administer). Unset, the URLs,
// schema, prefix and retention take the executor's TOOLEXEC_* variables, so
// that an operator with the executor's environment needs only --store.
type storeOptions struct {
	flags storeflags.Flags
}

// register defines the store flags on cmd.
func (o *storeOptions) register(cmd *cobra.Command) {
	o.flags.Register(cmd.Flags(), storeflags.Administer)
}

// check applies the TOOLEXEC_* variables to the store flags not given, and
// refuses store flags that cannot work, before anything is contacted.
func (o *storeOptions) check() error {
	if err := o.flags.Check(); err != nil {
		return badInput(err)
	}
	return nil
}

// open returns where the command's requests go: an executor over NATS
// without --store, else the store itself. needNATS says that the command has
// something to do on NATS besides the store (resolve publishes its audit event,
// forget purges the streams): with a PostgreSQL or Redis store it then tries to
// connect, and carries on without NATS if it cannot, saying so when it
// explains what did not happen.
func (o *storeOptions) open(ctx context.Context, cmd *cobra.Command, g *globalOptions, needNATS bool) (adminConn, error) {
	kind := o.flags.Kind
	if kind == "" {
		s, err := g.connect(cmd)
		if err != nil {
			return nil, err
		}
		return &busConn{s: s, g: g}, nil
	}
	d := &directConn{g: g, where: o.flags.Describe()}
	ok := false
	defer func() {
		if !ok {
			d.Close()
		}
	}()
	var js jetstream.JetStream
	if kind == storeflags.JetStream || needNATS {
		s, err := g.connect(cmd)
		switch {
		case err == nil:
			d.nats = s
			if js, err = jetstream.New(s.nc); err != nil {
				return nil, fmt.Errorf("jetstream: %w", err)
			}
		case kind == storeflags.JetStream:
			return nil, err
		default:
			d.natsErr = err
		}
	}
	if kind == storeflags.JetStream {
		d.where += " on " + d.nats.url
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var err error
	d.store, d.closeStore, err = o.flags.Open(ctx, js, 0, log)
	var ue *storeflags.UsageError
	if errors.As(err, &ue) {
		return nil, badInput(err)
	}
	if err != nil {
		return nil, err
	}
	if d.admin, err = admin.New(js, d.store, admin.Config{Logger: log}); err != nil {
		return nil, err
	}
	ok = true
	return d, nil
}

// busConn asks an executor over the admin subjects.
type busConn struct {
	s *session
	g *globalOptions
}

func (b *busConn) Inspect(ctx context.Context, tenant, key string) (*admin.RecordInfo, error) {
	return b.s.admin.Inspect(ctx, tenant, key)
}

func (b *busConn) Resolve(ctx context.Context, req admin.ResolveRequest) (*admin.RecordInfo, error) {
	return b.s.admin.Resolve(ctx, req)
}

func (b *busConn) Forget(ctx context.Context, tenant string) (int64, error) {
	return b.s.admin.Forget(ctx, tenant)
}

func (b *busConn) explain(ctx context.Context, tenant, key string, err error) error {
	return adminError(ctx, b.g, tenant, key, err)
}

func (b *busConn) Close() { b.s.Close() }

// directConn works on a store itself, through an in-process admin.Service, so
// that a resolution publishes the same audit event an executor's would.
type directConn struct {
	g          *globalOptions
	where      string // the store, for messages
	store      kvstore.Store
	closeStore func() // closes store and what it holds
	admin      *admin.Service
	nats       *session // nil when NATS could not be reached
	natsErr    error    // why, when nats is nil and was needed
}

func (d *directConn) Inspect(ctx context.Context, tenant, key string) (*admin.RecordInfo, error) {
	rec, err := d.store.Get(ctx, tenant, key)
	if err != nil {
		return nil, err
	}
	return admin.NewRecordInfo(rec), nil
}

func (d *directConn) Resolve(ctx context.Context, req admin.ResolveRequest) (*admin.RecordInfo, error) {
	return d.admin.Resolve(ctx, req)
}

func (d *directConn) Forget(ctx context.Context, tenant string) (int64, error) {
	return d.admin.Forget(ctx, tenant)
}

func (d *directConn) explain(ctx context.Context, tenant, key string, err error) error {
	noNATS := ""
	if d.natsErr != nil {
		noNATS = fmt.Sprintf("\n(NATS could not be reached: %v)", d.natsErr)
	}
	switch {
	case errors.Is(err, admin.ErrAuditNotPublished):
		return fmt.Errorf("the resolution was applied to %s, but its resolved event was NOT stored in TOOLEXEC_EVENTS: %w%s",
			d.where, err, noNATS)
	case errors.Is(err, kvstore.ErrInvalid), errors.Is(err, kvstore.ErrTooLarge):
		return badInput(fmt.Errorf("%s refused the request: %w", d.where, err))
	case errors.Is(err, kvstore.ErrNotFound), errors.Is(err, kvstore.ErrNotIndeterminate):
		return adminError(ctx, d.g, tenant, key, err)
	case errors.Is(err, kvstore.ErrUnavailable):
		hint := ""
		if errors.Is(err, pgstore.ErrNoSchema) {
			hint = "\n(no toolexec tables in that schema: check --postgres-schema, or start an executor once with --ensure-schema)"
		}
		return fmt.Errorf("working on %s: %w%s%s", d.where, err, hint, noNATS)
	case ended(ctx):
		return fmt.Errorf("%s did not answer within --timeout %v: %w", d.where, d.g.timeout, err)
	}
	return fmt.Errorf("working on %s: %w", d.where, err)
}

func (d *directConn) Close() {
	if d.closeStore != nil {
		d.closeStore()
	}
	if d.nats != nil {
		d.nats.Close()
	}
}
