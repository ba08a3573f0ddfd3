package toolexec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/backoff"
)

// WatchOption adjusts where Watch starts reading; see WatchFromStart and
// WatchSince.
type WatchOption func(*watchStart)

// watchStart is where Watch starts: with the events stored from now on (the
// zero value), every stored event, or those stored since a time.
type watchStart struct {
	all   bool
	since time.Time
}

// WatchFromStart makes Watch deliver every stored event that matches, then new
// ones.
func WatchFromStart() WatchOption {
	return func(w *watchStart) { *w = watchStart{all: true} }
}

// WatchSince makes Watch deliver the stored events from time t on, then new
// ones.
func WatchSince(t time.Time) WatchOption {
	return func(w *watchStart) { *w = watchStart{since: t} }
}

// history reports whether w asks for stored events.
func (w watchStart) history() bool { return w.all || !w.since.IsZero() }

// Watch delivers the answers and audit events of TOOLEXEC_EVENTS whose subject
// matches filter, in the order they were stored: "toolexec.event.acme.>" for
// one tenant, "toolexec.event.*.indeterminate.>" for an auditor, "" for every
// event. By default it starts with the events stored after it returns (see
// WatchFromStart and WatchSince). The channel is closed when ctx ends. Events
// that are not well-formed answers are logged and skipped. It returns an
// error matching ErrBadFilter for a filter outside toolexec.event. or not a
// well-formed subject filter.
//
// Through JetStream (see HistoryPath) it reads an ordered consumer: events come
// with no gaps, and a slow reader loses nothing. It returns JetStream's error
// when the consumer cannot be created.
//
// Through the history service, a tenant's filter must name its tenant
// ("toolexec.event.acme.>"), while a filter with a wildcard in the tenant's
// place is read through toolexec.admin.history, which serves the operators'
// account only. Watch subscribes to the filter, pages through the stored
// events from the start asked for, in stream order, and then delivers what
// the subscription heard, in the order it heard it, leaving out the events
// already delivered (by their CloudEvents id, among the last 4096). That
// live part is a plain subscription, and it can lose what an ordered
// consumer would not: events published while the connection is down or
// reconnecting, and events dropped when the reader falls more than 256 MiB
// behind (logged, and reported to the connection's asynchronous error
// handler as a slow consumer). It returns ErrNoHistoryService or a
// *bus.HistoryError when the first page cannot be had: a tenant's watch of
// another tenant, or of every tenant, finds no history service (its account
// imports neither subject), and a request on toolexec.admin.history from an
// account other than the admin account is bus.HistoryForbidden.
func (c *Client) Watch(ctx context.Context, filter string, opts ...WatchOption) (<-chan events.Answer, error) {
	evs, err := c.WatchEvents(ctx, filter, opts...)
	if err != nil {
		return nil, err
	}
	out := make(chan events.Answer)
	go func() {
		defer close(out)
		for ev := range evs {
			if ev.Answer == nil {
				continue // a note: see WatchEvents
			}
			select {
			case out <- *ev.Answer:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// Event is one event of TOOLEXEC_EVENTS as [Client.WatchEvents] delivers it:
// an answer or audit event, or a note (the progress or log record of a call's
// body, docs/PROTOCOL.md §13). Exactly one of the two is set.
type Event struct {
	Answer *events.Answer
	Note   *wire.Note
}

// decodeEvent reads an answer or a note from a message, and returns the
// event's id.
func decodeEvent(subject string, h nats.Header, data []byte) (Event, string, error) {
	if n, err := wire.DecodeNote(subject, data); err == nil {
		return Event{Note: &n}, n.ID, nil
	}
	e, err := wire.Decode(h, data)
	var a events.Answer
	if err == nil {
		a, err = wire.AnswerFromEvent(e)
	}
	if err != nil {
		return Event{}, "", fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	return Event{Answer: &a}, e.ID(), nil
}

// WatchEvents is [Client.Watch] with the notes the filter matches as well,
// each in its place in stream order.
func (c *Client) WatchEvents(ctx context.Context, filter string, opts ...WatchOption) (<-chan Event, error) {
	if filter == "" {
		filter = wire.EventSubjects
	}
	if _, err := bus.HistoryFilter("", filter); err != nil {
		var herr *bus.HistoryError
		if errors.As(err, &herr) {
			return nil, fmt.Errorf("%w: %s", ErrBadFilter, herr.Message)
		}
		return nil, fmt.Errorf("%w: %q", ErrBadFilter, filter)
	}
	var start watchStart
	for _, o := range opts {
		o(&start)
	}
	if !c.viaService() {
		ch, err := c.watchJetStream(ctx, filter, start)
		if err == nil || !c.fallBack(err) {
			return ch, err
		}
	}
	return c.watchService(ctx, filter, start)
}

// watchJetStream is WatchEvents through an ordered consumer.
func (c *Client) watchJetStream(ctx context.Context, filter string, start watchStart) (<-chan Event, error) {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverNewPolicy}
	switch {
	case start.all:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	case !start.since.IsZero():
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &start.since
	}
	cons, err := c.js.OrderedConsumer(ctx, wire.EventStream, cfg)
	if err != nil {
		return nil, fmt.Errorf("toolexec: watching %s: %w", filter, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("toolexec: watching %s: %w", filter, err)
	}
	out := make(chan Event, 64)
	go func() {
		defer close(out)
		stop := context.AfterFunc(ctx, it.Stop)
		defer stop()
		defer it.Stop()
		// The pause grows while the iterator keeps failing, so that a lasting
		// error (a permission refused, a stream gone) is not retried in a tight
		// loop.
		failures := 0
		for {
			m, err := it.Next()
			if err != nil {
				if errors.Is(err, jetstream.ErrMsgIteratorClosed) || ctx.Err() != nil {
					return
				}
				failures++
				pause := watchBackoff.Delay(failures)
				c.log.Warn("watching events", "filter", filter, "error", err, "retry_in", pause)
				if !backoff.Sleep(ctx, pause) {
					return
				}
				continue
			}
			failures = 0
			ev, _, err := decodeEvent(m.Subject(), m.Headers(), m.Data())
			if err != nil {
				c.log.Warn("skipping an event that is not a toolexec answer", "subject", m.Subject(), "error", err)
				continue
			}
			select {
			case out <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// watchBackoff paces a watch's retries after failures in a row: 50ms,
// doubling, at most five seconds.
var watchBackoff = backoff.Backoff{Initial: 50 * time.Millisecond, Max: 5 * time.Second}

// filterTenant returns the tenant an event filter names, or "" when its
// tenant token is a wildcard (every tenant's events, which only the operators'
// history subject serves); ok is false when the filter is outside
// toolexec.event. or its tenant token is not valid.
func filterTenant(filter string) (tenant string, ok bool) {
	rest, found := strings.CutPrefix(filter, wire.EventPrefix)
	if !found {
		return "", false
	}
	tenant, _, _ = strings.Cut(rest, ".")
	if tenant == "*" || tenant == ">" {
		return "", true
	}
	return tenant, events.ValidToken(tenant)
}
