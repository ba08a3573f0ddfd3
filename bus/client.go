package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/backoff"
	"github.com/tesserix/toolexec/internal/connloss"
	"github.com/tesserix/toolexec/internal/eventlog"
)

// DefaultCallSource is the CloudEvents source of calls whose Source is empty.
const DefaultCallSource = "/toolexec/client"

// ClientConfig configures a [Client]. The zero value is usable.
type ClientConfig struct {
	// Source is the CloudEvents source of calls that do not name their own;
	// default DefaultCallSource.
	Source string
	// Binary publishes calls in binary mode (attributes in ce- headers) instead of
	// structured mode.
	Binary bool
	// Logger receives answers that cannot be read while watching; default
	// slog.Default().
	Logger *slog.Logger
	// OnPending, when set, is asked by Call about a call that the calls stream
	// refused because a call of the same tenant, tool and call id is stored
	// and not yet answered (see ErrCallPending): nil lets Call wait for that
	// call's answer, an error is returned by Call as its own. Default: return
	// an error matching ErrCallPending.
	OnPending func(call events.Call) error
	// History says how Attach, Watch and Call read the events stored in
	// TOOLEXEC_EVENTS; default HistoryAuto (see HistoryPath).
	History HistoryPath
}

// HistoryPath is how a [Client] reads stored events.
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
	// HistoryViaService reads through the executors' history service (see
	// HistoryService) only. Which subject a read asks on depends on the events
	// it wants, since each account reaches its own:
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

// Client publishes calls and reads their answers, for programs and the emitter.
// (The admin requests have a client of their own: package admin.) It is safe
// for concurrent use.
type Client struct {
	js   jetstream.JetStream
	nc   *nats.Conn
	cfg  ClientConfig
	log  *slog.Logger
	mode wire.Mode
	// noJetStream is set, with HistoryAuto, once the JetStream API said the
	// account has none: stored events are read through the history service.
	noJetStream atomic.Bool

	stored *eventlog.Log // TOOLEXEC_EVENTS, read by subject
	// reached holds the tenants of which this client has stored a call: a
	// stream took their calls once (see publish).
	reached sync.Map
}

// NewClient returns a client on js. It returns an error matching
// ErrInvalidConfig if js is nil or cfg.History is not a HistoryPath.
func NewClient(js jetstream.JetStream, cfg ClientConfig) (*Client, error) {
	if js == nil {
		return nil, invalidConfig("client: a JetStream context is required")
	}
	if cfg.History < HistoryAuto || cfg.History > HistoryViaService {
		return nil, invalidConfig("client: History %d is not a HistoryPath", cfg.History)
	}
	if cfg.Source == "" {
		cfg.Source = DefaultCallSource
	}
	c := &Client{js: js, nc: js.Conn(), cfg: cfg, log: cfg.Logger, mode: wire.Structured, stored: eventlog.New(js)}
	if c.log == nil {
		c.log = slog.Default()
	}
	if cfg.Binary {
		c.mode = wire.Binary
	}
	return c, nil
}

// callMsg checks call and encodes it, from the client's source when it names
// none, in the client's mode; see Publish and wire.CallMsg.
func (c *Client) callMsg(call events.Call) (*nats.Msg, error) {
	if call.Source == "" {
		call.Source = c.cfg.Source
	}
	return wire.CallMsg(call, c.mode)
}

// Publish stores call in TOOLEXEC_CALLS_V2 and returns the PubAck, without
// waiting for the answer (see Attach). The stream keeps one call at most under
// its subject (tenant, tool and call id), so a try whose PubAck does not come
// within 5 s, or whose connection is lost, is made again until ctx ends, marked
// as a repeat (wire.RepeatHeader): if the first try was stored, the second is
// refused while it waits in the stream, and the PubAck returned says
// Duplicate; if an executor has answered it meanwhile, the second is stored
// and the executor answers it from the stored answer without running it
// again. A try that no stream answered while the calls stream elects a leader
// is made again too: once this client has stored a call of the tenant, no
// responders means that election (a crashed leader's followers wait out their
// election timeout first); before, it means no stream takes the tenant's
// calls, and Publish fails at once with an error matching
// jetstream.ErrNoStreamResponse.
//
// A call that is not well formed (a token that is not valid, arguments that are
// not a JSON object) is refused before anything is sent, with the
// *events.RejectedError an executor would have answered. A first try refused
// because a call of the same tenant, tool and call id waits in the stream
// returns an error matching ErrCallPending, and one that a stream of wire
// version 1 took an error matching ErrOldCallStream.
func (c *Client) Publish(ctx context.Context, call events.Call) (*jetstream.PubAck, error) {
	msg, err := c.callMsg(call)
	if err != nil {
		return nil, err
	}
	return c.publish(ctx, msg, call.Tenant, call.CallID)
}

// publish stores msg, the call of tenant with callID, in TOOLEXEC_CALLS_V2 and
// returns the PubAck; see Publish for the tries.
func (c *Client) publish(ctx context.Context, msg *nats.Msg, tenant, callID string) (*jetstream.PubAck, error) {
	var refused error // the last try's error other than a context's
	for attempt := 1; ; attempt++ {
		if attempt == 2 {
			wire.MarkRepeat(msg)
		}
		pctx, cancel := connloss.Attempt(ctx, c.nc, callPublishAttempt)
		ack, err := c.js.PublishMsg(pctx, msg)
		lost := pctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil {
			c.reached.Store(tenant, true)
			return ack, nil
		}
		switch stored := storeRefusal(err); {
		case stored == refusedPending && attempt > 1:
			// An earlier try, whose PubAck was lost, stored the call.
			c.reached.Store(tenant, true)
			return &jetstream.PubAck{Stream: wire.CallStream, Duplicate: true}, nil
		case stored == refusedPending:
			return nil, fmt.Errorf("%w: call %s of tenant %s (subject %s)", ErrCallPending, callID, tenant, msg.Subject)
		case stored == refusedOldStream:
			return nil, fmt.Errorf("%w: a stream other than %s (%s, of wire version 1, where the executors are older) took %s; "+
				"upgrade the executors before their callers (docs/PROTOCOL.md §11)", ErrOldCallStream, wire.CallStream, wire.LegacyCallStream,
				msg.Subject)
		}
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			refused = err
		}
		_, reachedBefore := c.reached.Load(tenant)
		electing := reachedBefore && errors.Is(err, jetstream.ErrNoStreamResponse)
		if ctx.Err() == nil && (lost || electing) && backoff.Sleep(ctx, callPublishBackoff.Delay(attempt)) {
			continue
		}
		if ctxErr := ctx.Err(); ctxErr != nil && refused != nil {
			return nil, fmt.Errorf("bus: publishing call %s: %w (the last refusal: %w)", callID, ctxErr, refused)
		}
		return nil, fmt.Errorf("bus: publishing call %s: %w", callID, err)
	}
}

// Timing of a call's publication (see Client.publish): how long one try
// waits for its PubAck (a variable so that tests can shorten it), and the
// pauses between tries: 50ms, doubling, at most half a second.
var (
	callPublishAttempt = 5 * time.Second
	callPublishBackoff = backoff.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
)

// A publication's refusal, as storeRefusal reads it.
const (
	refusedOther     = iota
	refusedPending   // a message is stored under the subject already
	refusedOldStream // the subject belongs to another stream than the one expected
)

// JetStream's error codes for the refusals storeRefusal tells apart.
const (
	errCodeStoreFailed    = 10077 // JSStreamStoreFailedF: "maximum messages per subject exceeded", among others
	errCodeStreamNotMatch = 10060 // JSStreamNotMatchErr: "expected stream does not match"
)

// storeRefusal reads why JetStream refused to store a call.
func storeRefusal(err error) int {
	var api *jetstream.APIError
	if !errors.As(err, &api) {
		return refusedOther
	}
	switch {
	case api.ErrorCode == errCodeStoreFailed && strings.Contains(api.Description, "per subject"):
		return refusedPending
	case api.ErrorCode == errCodeStreamNotMatch:
		return refusedOldStream
	}
	return refusedOther
}

// Call publishes call and waits for its answer. It subscribes to the call's
// answer subject before publishing, so the answer cannot slip past; when the
// call may repeat one published before (call.Repeat, or a try sent again: see
// Publish), or the stream refused it because a call of the same tenant, tool
// and call id waits there, it also looks for the answer stored in
// TOOLEXEC_EVENTS (as Attach reads it: see HistoryPath). The answer it waits
// for is that of the call's tenant, tool and call id under any run id: those
// three name a call, and a call published again with another run gets the
// answer of its first publication.
//
// A refusal because such a call waits in the stream is an error matching
// ErrCallPending unless ClientConfig.OnPending says to wait for that call's
// answer.
//
// Every answer is returned with a nil error, rejected, failed and indeterminate
// ones included (events.Answer.Err turns one into an error). Errors: the
// *events.RejectedError of a call refused before sending (see Publish), a publish
// failure (ErrCallPending, ErrOldCallStream among them), an error matching
// ErrBadAnswer, or ctx's error wrapped when ctx ends first — the call may still
// be answered later; Attach finds the answer.
func (c *Client) Call(ctx context.Context, call events.Call) (events.Answer, error) {
	msg, err := c.callMsg(call)
	if err != nil {
		return events.Answer{}, err
	}
	// Any run: a tenant, tool and call id name one call, and one published
	// before under another run (a retry from a new session that did not know
	// the first run) is answered with the first publication's answer.
	filter := wire.AnswerFilter(call.Tenant, call.Tool, "*", call.CallID)
	ch := make(chan *nats.Msg, 4)
	sub, err := c.nc.ChanSubscribe(filter, ch)
	if err != nil {
		return events.Answer{}, fmt.Errorf("bus: subscribing to %s: %w", filter, err)
	}
	defer sub.Unsubscribe()
	// The subscription hears answers while its connection lives: one
	// published while the connection was lost is looked for in the stream.
	life := connloss.Context(c.nc)
	ack, err := c.publish(ctx, msg, call.Tenant, call.CallID)
	pending := errors.Is(err, ErrCallPending)
	if pending {
		// The call that holds the subject may have been answered a moment ago,
		// its acknowledgement not yet in: then its answer is stored, or about
		// to be.
		if a, found := c.answeredJustNow(ctx, call.Tenant, filter); found {
			return a, nil
		}
		if c.cfg.OnPending == nil {
			return events.Answer{}, err
		}
		if err := c.cfg.OnPending(call); err != nil {
			return events.Answer{}, err
		}
	} else if err != nil {
		return events.Answer{}, err
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// lookup looks for the answer stored in TOOLEXEC_EVENTS until it is found:
	// the live subscription does not hear one stored before it, nor the
	// answer to a repeat that an executor acknowledges without answering it
	// again. A look that fails (no executor answers the history service yet)
	// is tried again.
	lookup := func() <-chan lookupResult {
		stored := make(chan lookupResult, 1)
		look := func(ctx context.Context) (events.Answer, bool, error) {
			a, found, err := c.findStored(ctx, call.Tenant, filter)
			if err != nil && !errors.Is(err, ErrBadAnswer) {
				c.log.Debug("looking for a call's stored answer failed; trying again", "call_id", call.CallID, "error", err)
				return a, false, nil
			}
			return a, found, err
		}
		go func() {
			if a, found, err := look(lctx); found {
				stored <- lookupResult{a, err}
				return
			}
			lookAgain(lctx, look, stored)
		}()
		return stored
	}
	var stored <-chan lookupResult
	if pending || wire.IsRepeat(msg.Header) || ack.Duplicate {
		// Published before, perhaps answered before this subscription existed:
		// read the stream too.
		stored = lookup()
	}
	return c.await(ctx, call.CallID, ch, stored, life, lookup)
}

// pendingGrace is how long Call looks for the stored answer of a call that
// the stream refused as waiting, before it takes the call for one that waits
// indeed: a call leaves the stream when acknowledged, a moment after its
// answer is published, and the answer is stored a moment after a subscriber
// heard it.
const pendingGrace = 500 * time.Millisecond

// answeredJustNow looks for the answer stored under filter, a few times within
// pendingGrace.
func (c *Client) answeredJustNow(ctx context.Context, tenant, filter string) (events.Answer, bool) {
	gctx, cancel := context.WithTimeout(ctx, pendingGrace)
	defer cancel()
	pauses := backoff.Backoff{Initial: 25 * time.Millisecond, Max: pendingGrace}
	for n := 1; ; n++ {
		if a, found, err := c.findStored(gctx, tenant, filter); err == nil && found {
			return a, true
		}
		if !backoff.Sleep(gctx, pauses.Delay(n)) {
			return events.Answer{}, false
		}
	}
}

type lookupResult struct {
	a   events.Answer
	err error
}

// await returns the first answer from ch or from stored. When the
// connection's life ends (life), the answer may have been published while no
// subscription could hear it: unless a look in the stream is under way
// already, await starts one with lookup (it waits for the reconnection, as
// every request on the connection does). Without lookup, life is not watched.
func (c *Client) await(ctx context.Context, callID string, ch <-chan *nats.Msg, stored <-chan lookupResult,
	life context.Context, lookup func() <-chan lookupResult) (events.Answer, error) {
	var lost <-chan struct{}
	if lookup != nil {
		lost = life.Done()
	}
	for {
		select {
		case m := <-ch:
			return decodeAnswer(m.Header, m.Data)
		case r := <-stored:
			if ctx.Err() == nil {
				return r.a, r.err
			}
			stored = nil
		case <-lost:
			lost = connloss.Context(c.nc).Done() // the next life's
			if stored == nil {
				stored = lookup()
			}
		case <-ctx.Done():
			return events.Answer{}, fmt.Errorf("bus: waiting for the answer to call %s: %w", callID, ctx.Err())
		}
	}
}

// Attach returns the answer to a call published earlier, by this client or
// another: from TOOLEXEC_EVENTS if it is stored, else the moment it is stored.
// It is how a caller that subscribes late, or restarts, finds its answer.
//
// Either way it subscribes to the call's answer subject first, then looks for
// the stored answer once, and returns whichever comes first. Through JetStream
// (see HistoryPath) the look is one message get from TOOLEXEC_EVENTS, the
// first event under the answer subject: no consumer is made, so attaches leave
// nothing behind on the server and never meet its consumer limit, however
// many there are.
// Through the history service it asks the service (on the tenant's subject, or
// the operators': see HistoryViaService).
//
// Errors: one matching events.ErrInvalidToken for a malformed token,
// ErrBadAnswer, a JetStream error, ErrNoHistoryService or a *HistoryError from
// the service, or ctx's error wrapped when ctx ends first.
func (c *Client) Attach(ctx context.Context, tenant, tool, runID, callID string) (events.Answer, error) {
	for _, f := range []struct{ name, v string }{{"tenant", tenant}, {"tool", tool}, {"runid", runID}, {"callid", callID}} {
		if err := events.CheckToken(f.name, f.v); err != nil {
			return events.Answer{}, err
		}
	}
	filter := wire.AnswerFilter(tenant, tool, runID, callID)
	if !c.viaService() {
		a, err := c.attach(ctx, filter, callID)
		if err == nil || !c.fallBack(err) {
			return a, err
		}
	}
	return c.attachService(ctx, tenant, filter, callID)
}

// Find looks once for the stored answer to tenant's call callID, whatever its
// tool and run (the first stored, should the id have been used for two tools),
// without waiting: found is false, with a nil error, when no
// answer is stored yet. It reads as Attach does (see HistoryPath). Errors: one
// matching events.ErrInvalidToken for a malformed token, ErrBadAnswer, a
// JetStream error, ErrNoHistoryService or a *HistoryError.
func (c *Client) Find(ctx context.Context, tenant, callID string) (a events.Answer, found bool, err error) {
	for _, f := range []struct{ name, v string }{{"tenant", tenant}, {"callid", callID}} {
		if err := events.CheckToken(f.name, f.v); err != nil {
			return events.Answer{}, false, err
		}
	}
	return c.findStored(ctx, tenant, wire.EventSubject(tenant, "*", "*", "*", callID))
}

// findStored looks once for the first event of tenant stored under filter,
// without waiting; see Find.
func (c *Client) findStored(ctx context.Context, tenant, filter string) (a events.Answer, found bool, err error) {
	if !c.viaService() {
		lctx, cancel := context.WithTimeout(ctx, lookTimeout)
		a, found, err := c.lookStored(filter)(lctx)
		cancel()
		if err == nil || !c.fallBack(err) {
			return a, found, err
		}
	}
	return c.storedAnswer(ctx, tenant, filter)
}

// attach waits for the first event stored under filter, oldest first, read
// through JetStream: see attachBy.
func (c *Client) attach(ctx context.Context, filter, callID string) (events.Answer, error) {
	return c.attachBy(ctx, filter, callID, c.lookStored(filter))
}

// lookStored returns the look of attach: the first event stored under filter,
// by one message get.
func (c *Client) lookStored(filter string) lookFunc {
	return func(ctx context.Context) (events.Answer, bool, error) {
		m, err := c.stored.First(ctx, filter)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return events.Answer{}, false, nil
		case err != nil:
			return events.Answer{}, false, fmt.Errorf("bus: reading %s: %w", filter, err)
		}
		a, err := decodeAnswer(m.Header, m.Data)
		return a, true, err
	}
}

// lookFunc looks once for the answer stored under one call's answer subject:
// found is false, with a nil error, when none is stored yet.
type lookFunc func(ctx context.Context) (a events.Answer, found bool, err error)

// attachBy subscribes to filter, then looks for the stored answer with look,
// and returns whichever comes first. When nothing is stored yet (or the look
// went unanswered), the answer is heard live from then on; but one published
// just before the subscription took effect was not heard, and may not have
// been stored yet when looked for (the server stores a message after handing
// it to subscribers): it looks again, less and less often, until one of the
// two finds it. A look that fails otherwise ends the attach with its error,
// unless the answer was heard meanwhile.
func (c *Client) attachBy(ctx context.Context, filter, callID string, look lookFunc) (events.Answer, error) {
	ch := make(chan *nats.Msg, 4)
	sub, err := c.nc.ChanSubscribe(filter, ch)
	if err != nil {
		return events.Answer{}, fmt.Errorf("bus: subscribing to %s: %w", filter, err)
	}
	defer sub.Unsubscribe()
	lctx, cancel := context.WithTimeout(ctx, lookTimeout)
	a, found, err := look(lctx)
	cancel()
	switch {
	case found:
		return a, err
	case err == nil, errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		stored := make(chan lookupResult, 1)
		go lookAgain(actx, look, stored)
		return c.await(ctx, callID, ch, stored, nil, nil) // lookAgain keeps looking
	}
	select {
	case m := <-ch: // heard live while the look failed
		return decodeAnswer(m.Header, m.Data)
	default:
	}
	if cerr := contextEnded(ctx); cerr != nil {
		return events.Answer{}, fmt.Errorf("bus: waiting for the answer to call %s: %w", callID, cerr)
	}
	return events.Answer{}, err
}

// Looking for a stored answer: each look is bounded by lookTimeout (a request
// the server dropped under load must not hold an attach until its context
// ends), and looks again after lookFirstPause, doubling up to lookMaxPause.
const (
	lookTimeout    = 5 * time.Second
	lookFirstPause = 100 * time.Millisecond
	lookMaxPause   = 5 * time.Second
)

// lookAgain looks until look finds the answer, which it sends to out, or ctx
// ends. Looks that fail are tried again.
func lookAgain(ctx context.Context, look lookFunc, out chan<- lookupResult) {
	pauses := backoff.Backoff{Initial: lookFirstPause, Max: lookMaxPause}
	for n := 1; ; n++ {
		if !backoff.Sleep(ctx, pauses.Delay(n)) {
			return
		}
		lctx, cancel := context.WithTimeout(ctx, lookTimeout)
		a, found, err := look(lctx)
		cancel()
		if found {
			out <- lookupResult{a, err}
			return
		}
	}
}

// contextEnded returns ctx's error, or context.DeadlineExceeded once ctx's deadline
// has passed even if ctx has not noticed yet: nats.go refuses a request whose
// deadline is already behind it with an error of its own, which must not read as
// anything but a timeout.
func contextEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// decodeAnswer reads an answer (or a resolution) from the headers and payload of
// a message in either mode, as [wire.DecodeAnswer] does. Errors match
// ErrBadAnswer, and wrap the error of wire.DecodeAnswer that says what is wrong.
func decodeAnswer(h nats.Header, data []byte) (events.Answer, error) {
	a, err := wire.DecodeAnswer(h, data)
	if err != nil {
		return events.Answer{}, fmt.Errorf("%w: %w", ErrBadAnswer, err)
	}
	return a, nil
}

// WatchOption adjusts where Watch starts reading.
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

// WatchSince makes Watch deliver stored events from time t on, then new ones.
func WatchSince(t time.Time) WatchOption {
	return func(w *watchStart) { *w = watchStart{since: t} }
}

// history reports whether w asks for stored events.
func (w watchStart) history() bool { return w.all || !w.since.IsZero() }

// Watch delivers the answers and audit events of TOOLEXEC_EVENTS whose subject
// matches filter — "toolexec.event.*.indeterminate.>" for an auditor, or ""
// for every event — starting with events published after Watch returns (see
// WatchFromStart and WatchSince). The channel is closed when ctx ends. Events
// that are not well-formed answers are logged and skipped. It returns
// ErrBadFilter for a filter outside toolexec.event.> or not a well-formed
// subject filter.
//
// Through JetStream (see HistoryPath) it reads an ordered consumer: events come
// in stream order with no gaps, and a slow reader loses nothing. It returns
// JetStream's error when the consumer cannot be created.
//
// Through the history service (on the subject HistoryViaService says: a
// tenant's own, or, for every tenant's events, the operators'
// toolexec.admin.history) Watch subscribes to the filter, pages through the stored events from the start asked for, in stream
// order, and then delivers what the subscription heard, in the order it heard
// it, leaving out the events already delivered (by their CloudEvents id, among
// the last WatchDedupeWindow delivered). That live part is a plain
// subscription, and it can lose what an ordered consumer would not: events
// published while the connection is down or reconnecting, and events dropped
// when the reader falls more than WatchPendingBytes behind (logged, and
// reported to the connection's asynchronous error handler as a slow
// consumer). It returns ErrNoHistoryService or a *HistoryError when the first
// page cannot be had: a tenant's watch of another tenant, or of every tenant,
// finds no history service (its account imports neither subject), and a
// request on toolexec.admin.history from an account other than the admin
// account is HistoryForbidden.
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
// each in its place in stream order: what emitter watch shows.
func (c *Client) WatchEvents(ctx context.Context, filter string, opts ...WatchOption) (<-chan Event, error) {
	if filter == "" {
		filter = wire.EventSubjects
	}
	if !strings.HasPrefix(filter, wire.EventPrefix) || len(filter) == len(wire.EventPrefix) || filterFault(filter) != "" {
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
		return nil, fmt.Errorf("bus: watching %s: %w", filter, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return nil, fmt.Errorf("bus: watching %s: %w", filter, err)
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
