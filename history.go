package toolexec

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/backoff"
)

// HistoryPath is how a [Client] reads the events stored in TOOLEXEC_EVENTS;
// see WithHistoryPath.
type HistoryPath int

const (
	// HistoryAuto reads through JetStream, and through the history service from
	// the first time the JetStream API answers that the connection's account has
	// none (no responders, JetStream not enabled for the account): a client in
	// the executors' account, such as the console's, keeps reading through
	// JetStream; a tenant in an account of its own, which imports no JetStream
	// API, uses the service without being told to.
	HistoryAuto HistoryPath = iota
	// HistoryViaJetStream reads TOOLEXEC_EVENTS through JetStream only (a
	// message get for Attach, an ordered consumer for Watch).
	HistoryViaJetStream
	// HistoryViaService reads through the executors' history service
	// (bus.HistoryService) only. Which subject a read asks on depends on the
	// events it wants, since each account reaches its own:
	//
	//   - a filter naming one tenant (toolexec.event.acme.>, and every Attach):
	//     that tenant's toolexec.history.<tenant>, which a tenant's account
	//     imports; when nothing answers there, the operators'
	//     toolexec.admin.history with the same filter, which the admin account
	//     imports instead (it imports no tenant's history subject). So an
	//     operator's Attach to a tenant's call costs one request more, refused
	//     at once by the server, than a tenant's.
	//   - a filter with a wildcard in the tenant's place
	//     (toolexec.event.*.indeterminate.>, or "", every event):
	//     toolexec.admin.history only, served to the admin account only.
	HistoryViaService
)

// Bounds of a Watch through the history service.
const (
	// watchPendingMsgs and watchPendingBytes bound what the live subscription
	// holds while the reader is behind (paging through the history, or slow to
	// take from the channel); beyond either, events are dropped.
	watchPendingMsgs  = 1 << 20
	watchPendingBytes = 256 << 20
	// watchDedupeWindow is how many of the last events delivered a Watch
	// remembers (by CloudEvents id), to leave out those it hears again.
	watchDedupeWindow = 4096
)

// History asks the executors for a page of tenant's events stored in
// TOOLEXEC_EVENTS (see bus.HistoryRequest), on toolexec.history.<tenant>,
// whatever the client's HistoryPath. It waits at most bus.DefaultHistoryTimeout
// when ctx has no deadline. Errors: one matching events.ErrInvalidToken for a
// malformed tenant, ErrNoHistoryService, the *bus.HistoryError of the reply,
// the request's error (ctx's wrapped), or an error for a reply that is not the
// JSON expected.
func (c *Client) History(ctx context.Context, tenant string, req bus.HistoryRequest) (*bus.HistoryResponse, error) {
	if err := events.CheckToken("tenant", tenant); err != nil {
		return nil, err
	}
	return c.historyOn(ctx, wire.HistorySubject(tenant), req)
}

// AdminHistory asks the executors for a page of any tenant's events stored in
// TOOLEXEC_EVENTS, on toolexec.admin.history: the operators' history, where
// req.Filter may be any filter within toolexec.event. (empty: every event).
// The executors serve it to the admin account only
// (bus.HistoryConfig.AdminAccount; with deploy/accounts.conf no other account
// even reaches the subject). It waits at most bus.DefaultHistoryTimeout when
// ctx has no deadline. Errors: ErrNoHistoryService (no executor answers, or the
// connection's account does not import the subject), the *bus.HistoryError of
// the reply (bus.HistoryForbidden when the request did not come from the admin
// account), the request's error (ctx's wrapped), or an error for a reply that
// is not the JSON expected.
func (c *Client) AdminHistory(ctx context.Context, req bus.HistoryRequest) (*bus.HistoryResponse, error) {
	return c.historyOn(ctx, wire.AdminHistorySubject, req)
}

// historyOn sends req on subject, a history subject, and reads the reply.
func (c *Client) historyOn(ctx context.Context, subject string, req bus.HistoryRequest) (*bus.HistoryResponse, error) {
	data, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("toolexec: history request: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, bus.DefaultHistoryTimeout)
		defer cancel()
	}
	m, err := c.nc.RequestWithContext(ctx, subject, data)
	if errors.Is(err, nats.ErrNoResponders) {
		return nil, fmt.Errorf("%w on %s", ErrNoHistoryService, subject)
	}
	if err != nil {
		return nil, fmt.Errorf("toolexec: history request on %s: %w", subject, err)
	}
	var resp bus.HistoryResponse
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("toolexec: history reply on %s is not the JSON expected: %w", subject, err)
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return &resp, nil
}

// historyPage asks the history service for the page req describes, on the
// subject the client's account can reach for tenant (see HistoryViaService):
// with tenant "" (a filter with a wildcard in the tenant's place), the
// operators' toolexec.admin.history; otherwise the tenant's own
// toolexec.history.<tenant>, and, if nothing answers there, the operators'
// subject with the same request, which an admin account reaches (it imports
// no tenant's history subject) and a tenant's does not. When neither answers
// the error matches ErrNoHistoryService.
func (c *Client) historyPage(ctx context.Context, tenant string, req bus.HistoryRequest) (*bus.HistoryResponse, error) {
	if tenant == "" {
		return c.AdminHistory(ctx, req)
	}
	resp, err := c.History(ctx, tenant, req)
	if !errors.Is(err, ErrNoHistoryService) {
		return resp, err
	}
	resp, aerr := c.AdminHistory(ctx, req)
	if errors.Is(aerr, ErrNoHistoryService) {
		return nil, fmt.Errorf("%w on %s or %s", ErrNoHistoryService, wire.HistorySubject(tenant), wire.AdminHistorySubject)
	}
	return resp, aerr
}

// noJetStream reports whether err says that the connection's account has no
// JetStream API to ask: nobody answers it, or JetStream is not enabled for the
// account (or at all).
func noJetStream(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount)
}

// viaService reports whether stored events are read through the history
// service.
func (c *Client) viaService() bool {
	switch c.history {
	case HistoryViaService:
		return true
	case HistoryViaJetStream:
		return false
	}
	return c.noJetStream.Load()
}

// fallBack reports whether a read through JetStream that failed with err is to
// be made through the history service instead: with HistoryAuto, when err says
// the account has no JetStream; the client then uses the service from now on.
func (c *Client) fallBack(err error) bool {
	if c.history != HistoryAuto || !noJetStream(err) {
		return false
	}
	if !c.noJetStream.Swap(true) {
		c.log.Info("no JetStream for this connection's account: reading stored events through the history service", "error", err)
	}
	return true
}

// storedAnswer asks the history service once for the answer stored under
// filter (one call's answer subject); found is false when none is stored.
func (c *Client) storedAnswer(ctx context.Context, tenant, filter string) (a events.Answer, found bool, err error) {
	resp, err := c.historyPage(ctx, tenant, bus.HistoryRequest{Filter: filter, Limit: 1})
	if err != nil {
		return events.Answer{}, false, err
	}
	if len(resp.Events) == 0 {
		return events.Answer{}, false, nil
	}
	ev := resp.Events[0]
	if ev.Omitted {
		return events.Answer{}, false, fmt.Errorf("%w: %s (sequence %d) is larger than a history reply may be",
			ErrBadAnswer, ev.Subject, ev.Seq)
	}
	a, err = decodeAnswer(ev.Header, ev.Data)
	return a, err == nil, err
}

// attachService is an attach through the history service: see attachBy.
func (c *Client) attachService(ctx context.Context, tenant, filter, callID string) (events.Answer, error) {
	return c.attachBy(ctx, filter, callID, func(ctx context.Context) (events.Answer, bool, error) {
		return c.storedAnswer(ctx, tenant, filter)
	})
}

// watchService is WatchEvents through the history service.
func (c *Client) watchService(ctx context.Context, filter string, start watchStart) (<-chan Event, error) {
	tenant, ok := filterTenant(filter)
	if !ok {
		return nil, fmt.Errorf("%w: %q: its tenant token is not valid", ErrBadFilter, filter)
	}
	live := make(chan *nats.Msg, 64)
	sub, err := c.nc.Subscribe(filter, func(m *nats.Msg) {
		// Blocking here leaves the next events in the subscription's pending
		// list, bounded by its pending limits.
		select {
		case live <- m:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return nil, fmt.Errorf("toolexec: watching %s: %w", filter, err)
	}
	page, err := c.readyWatch(ctx, sub, tenant, filter, start)
	if err != nil {
		_ = sub.Unsubscribe()
		return nil, err
	}
	w := &serviceWatch{c: c, ctx: ctx, filter: filter, tenant: tenant,
		out: make(chan Event, 64), seen: newIDWindow(watchDedupeWindow)}
	go func() {
		defer close(w.out)
		defer sub.Unsubscribe()
		if page != nil && !w.replay(page) {
			return
		}
		w.follow(sub, live)
	}()
	return w.out, nil
}

// readyWatch readies a watch's subscription (pending limits, and a flush so
// that the server has it before Watch returns) and returns the first page of
// history that start asks for, nil when it asks for none.
func (c *Client) readyWatch(
	ctx context.Context, sub *nats.Subscription, tenant, filter string, start watchStart,
) (*bus.HistoryResponse, error) {
	if err := sub.SetPendingLimits(watchPendingMsgs, watchPendingBytes); err != nil {
		return nil, fmt.Errorf("toolexec: watching %s: %w", filter, err)
	}
	fctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		fctx, cancel = context.WithTimeout(ctx, bus.DefaultHistoryTimeout)
		defer cancel()
	}
	if err := c.nc.FlushWithContext(fctx); err != nil {
		return nil, fmt.Errorf("toolexec: watching %s: %w", filter, err)
	}
	if !start.history() {
		return nil, nil
	}
	page, err := c.historyPage(ctx, tenant, bus.HistoryRequest{Filter: filter, Since: start.since})
	if err != nil {
		return nil, fmt.Errorf("toolexec: watching %s: %w", filter, err)
	}
	return page, nil
}

// serviceWatch is one watch through the history service, once started.
type serviceWatch struct {
	c      *Client
	ctx    context.Context
	filter string
	tenant string // "" for every tenant's events: see historyPage
	out    chan Event
	seen   *idWindow
}

// replay delivers page and the pages after it, until the history is caught up
// with the stream's last sequence when the first page was read: everything
// stored later the subscription heard. It reports false if ctx ended.
func (w *serviceWatch) replay(page *bus.HistoryResponse) bool {
	until := page.LastSeq
	for {
		var last uint64
		for _, ev := range page.Events {
			last = ev.Seq
			if ev.Omitted {
				w.c.log.Warn("skipping an event larger than a history reply may be", "subject", ev.Subject, "seq", ev.Seq)
				continue
			}
			if !w.deliver(ev.Subject, ev.Header, ev.Data) {
				return false
			}
		}
		if !page.More || len(page.Events) == 0 || last >= until {
			return true
		}
		if page = w.nextPage(last); page == nil {
			return false
		}
	}
}

// nextPage asks for the page after sequence last until it has it, pausing
// longer after each failure; nil when ctx ends first.
func (w *serviceWatch) nextPage(last uint64) *bus.HistoryResponse {
	for failures := 1; ; failures++ {
		page, err := w.c.historyPage(w.ctx, w.tenant, bus.HistoryRequest{Filter: w.filter, AfterSeq: last})
		if err == nil {
			return page
		}
		if w.ctx.Err() != nil {
			return nil
		}
		pause := watchBackoff.Delay(failures)
		w.c.log.Warn("watching events: history request failed", "filter", w.filter, "error", err, "retry_in", pause)
		if !backoff.Sleep(w.ctx, pause) {
			return nil
		}
	}
}

// follow delivers what the subscription hears until ctx ends, logging the
// events it dropped.
func (w *serviceWatch) follow(sub *nats.Subscription, live <-chan *nats.Msg) {
	dropped := 0
	for {
		select {
		case m := <-live:
			if n, err := sub.Dropped(); err == nil && n > dropped {
				w.c.log.Warn("watching events: the subscription dropped events while the reader was behind",
					"filter", w.filter, "dropped", n-dropped)
				dropped = n
			}
			if !w.deliver(m.Subject, m.Header, m.Data) {
				return
			}
		case <-w.ctx.Done():
			return
		}
	}
}

// deliver sends the event in h and data on, unless it was delivered before;
// one that is neither a toolexec answer nor a note is logged and skipped. It
// reports false if ctx ended.
func (w *serviceWatch) deliver(subject string, h nats.Header, data []byte) bool {
	ev, id, err := decodeEvent(subject, h, data)
	if err != nil {
		w.c.log.Warn("skipping an event that is not a toolexec answer", "subject", subject, "error", err)
		return true
	}
	if !w.seen.add(id) {
		return true
	}
	select {
	case w.out <- ev:
		return true
	case <-w.ctx.Done():
		return false
	}
}

// idWindow remembers the last ids added to it, up to a bound.
type idWindow struct {
	ids  map[string]struct{}
	ring []string // the ids, oldest at next once full
	next int
}

func newIDWindow(n int) *idWindow {
	return &idWindow{ids: make(map[string]struct{}, n), ring: make([]string, 0, n)}
}

// add remembers id, forgetting the oldest id if the window is full, and
// reports whether id was new to it.
func (w *idWindow) add(id string) bool {
	if _, ok := w.ids[id]; ok {
		return false
	}
	if len(w.ring) < cap(w.ring) {
		w.ring = append(w.ring, id)
	} else {
		delete(w.ids, w.ring[w.next])
		w.ring[w.next] = id
		w.next = (w.next + 1) % len(w.ring)
	}
	w.ids[id] = struct{}{}
	return true
}
