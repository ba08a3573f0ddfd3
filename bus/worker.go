package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/propagation"
	"golang.org/x/sync/semaphore"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/internal/backoff"
	"github.com/tesserix/toolexec/internal/eventlog"
	"github.com/tesserix/toolexec/internal/jsapi"
)

// Defaults for [WorkerConfig].
const (
	DefaultConcurrency     = 64
	DefaultPullWait        = 5 * time.Second
	DefaultMaxMessageBytes = 1 << 20
	DefaultAnswerSource    = "/toolexec/executor"
	// DefaultMaxInFlightMemory bounds the memory the calls in flight may take
	// together; see WorkerConfig.MaxInFlightMemory.
	DefaultMaxInFlightMemory = 128 << 20
)

// CallMemory estimates, from above, the memory a call takes while the worker
// handles it: the message, the decoded event, the canonical arguments and their
// decoded value, the schema check, the answer. Buffers grow with the message's
// bytes, the decoded value with the values it holds, of which a message has at
// most one per two bytes and at most maxValues (the dispatcher's limit,
// idemkey.Limits). TestCallMemory holds the estimate above what calls at the
// default limits take, in the shapes that cost the most.
func CallMemory(messageBytes, maxValues int) int64 {
	values := min(messageBytes/2, maxValues)
	return memoryPerByte*int64(messageBytes) + memoryPerValue*int64(values)
}

// Measured by TestCallMemory, with room to spare.
const (
	memoryPerByte  = 12
	memoryPerValue = 128
)

// flushTimeout bounds the wait for the last acknowledgements and hand-backs
// to be sent when the worker stops.
const flushTimeout = 5 * time.Second

// retryBackoff paces the worker's own retries (a failed pull, an answer's
// publication): 50ms, doubling, at most a second.
var retryBackoff = backoff.Backoff{Initial: 50 * time.Millisecond, Max: time.Second}

// WorkerConfig configures a [Worker]. The zero value is usable.
type WorkerConfig struct {
	// Stream is the calls stream the worker takes calls from; default
	// TOOLEXEC_CALLS_V2 (wire.CallStream). The worker of the calls stream of
	// wire version 1 (wire.LegacyCallStream; see HasLegacyCallStream) sets it,
	// with StopWhenStreamGone.
	Stream string
	// StopWhenStreamGone makes Run return nil, once the calls in flight are
	// done, when Stream does not exist or is deleted: an operator deleting the
	// calls stream of wire version 1 ends its worker.
	StopWhenStreamGone bool
	// Durable names the shared consumer; default DefaultDurable.
	Durable string
	// Concurrency bounds the calls this worker runs at once; default
	// DefaultConcurrency.
	Concurrency int
	// AckWait and MaxDeliver configure the shared consumer (see ConsumerConfig);
	// defaults DefaultAckWait and DefaultMaxDeliver.
	AckWait    time.Duration
	MaxDeliver int
	// MaxAckPending configures the shared consumer; default the larger of
	// DefaultMaxAckPending and Concurrency.
	MaxAckPending int
	// InProgressEvery is the longest time between two of the signals telling
	// JetStream that a call is still being worked on, and between its delivery
	// and the first, until it is acknowledged; a signal comes no sooner than
	// half of it. Default AckWait/3.
	InProgressEvery time.Duration
	// PullWait is how long JetStream keeps one pull request open; default
	// DefaultPullWait. The worker listens to a pull until JetStream ends it
	// (its end comes behind every call it delivered into the pull), and gives
	// it up on its own only a PullWait after it should have ended, or when the
	// connection it was sent on is lost. A graceful shutdown stops listening
	// at once.
	PullWait time.Duration
	// Source is the CloudEvents source of the answers this worker publishes;
	// default DefaultAnswerSource.
	Source string
	// MaxMessageBytes bounds a call message, headers included; larger ones are
	// rejected (too_large) unread. Default DefaultMaxMessageBytes.
	MaxMessageBytes int
	// MaxInFlightMemory bounds the memory the calls in flight may take
	// together, so that large calls cannot exhaust it whatever they hold: each
	// call weighs CallMemory of its message's size (headers included, at most
	// MaxMessageBytes) and MaxValues, and a delivered call waits, kept in
	// progress, until its weight fits. A call heavier than the whole budget runs
	// alone. Default DefaultMaxInFlightMemory. Small calls never wait: 64 calls
	// of 4 KiB weigh about 19 MiB.
	MaxInFlightMemory int64
	// MaxValues is the most values a call's arguments may hold (the
	// dispatcher's idemkey.Limits), for CallMemory; default
	// idemkey.DefaultMaxValues.
	MaxValues int
	// BinaryAnswers publishes answers in binary mode instead of structured mode.
	BinaryAnswers bool
	// Relay bounds what a call's body may ask of its caller and report while
	// it runs (docs/PROTOCOL.md §13); zero fields take their defaults.
	Relay RelayLimits
	// Logger receives one line per notable event (never arguments); default
	// slog.Default(). Each answer stored is logged at debug level (indeterminate
	// ones at info) with its tenant, tool, run and call ids, kind, reason and
	// key.
	Logger *slog.Logger
	// Observer is told what the worker does with its messages, for metrics;
	// default none.
	Observer WorkerObserver
}

func (cfg WorkerConfig) withDefaults() WorkerConfig {
	if cfg.Stream == "" {
		cfg.Stream = wire.CallStream
	}
	if cfg.Durable == "" {
		cfg.Durable = DefaultDurable
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = DefaultMaxDeliver
	}
	if cfg.MaxAckPending <= 0 {
		cfg.MaxAckPending = max(DefaultMaxAckPending, cfg.Concurrency)
	}
	if cfg.InProgressEvery <= 0 {
		cfg.InProgressEvery = cfg.AckWait / 3
	}
	if cfg.PullWait <= 0 {
		cfg.PullWait = DefaultPullWait
	}
	if cfg.Source == "" {
		cfg.Source = DefaultAnswerSource
	}
	if cfg.MaxMessageBytes <= 0 {
		cfg.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if cfg.MaxInFlightMemory <= 0 {
		cfg.MaxInFlightMemory = DefaultMaxInFlightMemory
	}
	if cfg.MaxValues <= 0 {
		cfg.MaxValues = idemkey.DefaultMaxValues
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Observer == nil {
		cfg.Observer = nopWorkerObserver{}
	}
	return cfg
}

// WorkerStats counts what a worker did with the messages it received. Its fields
// are safe to read concurrently.
type WorkerStats struct {
	// Received counts messages delivered to this worker.
	Received atomic.Int64
	// Answered counts answers stored in TOOLEXEC_EVENTS (PubAck received), the
	// bus's own rejections included.
	Answered atomic.Int64
	// Rejected counts messages the bus itself rejected before dispatching them
	// (malformed, oversize, not a call).
	Rejected atomic.Int64
	// Unaddressable counts messages terminated without an answer because their
	// subject names no valid tenant to answer.
	Unaddressable atomic.Int64
	// HandedBack counts messages negatively acknowledged for redelivery: the
	// dispatch ended without an answer, the answer could not be stored, or the
	// worker was stopping.
	HandedBack atomic.Int64
	// PublishRetries counts answer publications tried again after a failure.
	PublishRetries atomic.Int64
	// MemoryWaits counts calls that waited for room in MaxInFlightMemory.
	MemoryWaits atomic.Int64
	// AlreadyAnswered counts calls delivered again whose answer was already
	// stored: acknowledged without being dispatched again.
	AlreadyAnswered atomic.Int64
}

// Worker takes calls from the shared durable consumer on TOOLEXEC_CALLS_V2, has
// a dispatch.Settler run each through a dispatch.Runner, and carries out what
// the settler decides: its answers go to TOOLEXEC_EVENTS, its
// acknowledgements, terminations and hand-backs to JetStream. Any number of
// workers, in any number of processes, may share the consumer.
//
// For each call, in order: the message is decoded (structured or binary mode)
// and checked; a malformed one is answered rejected and terminated without
// being run. Otherwise the settler runs it while the worker sends in-progress
// signals. Answers are published with Nats-Msg-Id wire.MsgID, and the worker
// waits for their PubAck, retrying transient failures; only then is the
// message settled, as dispatch.Settler says.
type Worker struct {
	js     jetstream.JetStream
	settle *dispatch.Settler
	cfg    WorkerConfig
	log    *slog.Logger
	obs    WorkerObserver

	stats    WorkerStats
	progress *progressKeeper     // sends the in-progress signals of the calls being worked on
	memory   *semaphore.Weighted // MaxInFlightMemory, weighed out to the calls in flight

	mu         sync.Mutex // protects the fields below
	started    bool
	stopping   bool               // Shutdown was called
	stopPull   context.CancelFunc // cancels pulling (graceful stop)
	hardCancel context.CancelFunc // cancels dispatches and publishing (hard stop)
	done       chan struct{}      // closed when Run returns
}

// NewWorker returns a worker that runs the calls it takes from js with r
// (*dispatch.Dispatcher is one). It returns an error matching
// ErrInvalidConfig if js or r is nil.
func NewWorker(js jetstream.JetStream, r dispatch.Runner, cfg WorkerConfig) (*Worker, error) {
	if js == nil {
		return nil, invalidConfig("worker: a JetStream context is required")
	}
	if r == nil {
		return nil, invalidConfig("worker: a dispatch.Runner is required")
	}
	cfg = cfg.withDefaults()
	w := &Worker{
		js: js, cfg: cfg, log: cfg.Logger, obs: cfg.Observer,
		progress: newProgressKeeper(cfg.InProgressEvery, cfg.Logger),
		memory:   semaphore.NewWeighted(cfg.MaxInFlightMemory),
		done:     make(chan struct{}),
	}
	mode := wire.Structured
	if cfg.BinaryAnswers {
		mode = wire.Binary
	}
	answers := &answerStream{js: js, stored: eventlog.New(js), source: cfg.Source, mode: mode, log: cfg.Logger, retried: func() {
		w.stats.PublishRetries.Add(1)
		w.obs.AnswerPublishRetried()
	}}
	relayed := &relaying{r: r, nc: js.Conn(), log: cfg.Logger, lim: cfg.Relay, source: cfg.Source}
	w.settle = dispatch.NewSettler(relayed, answers, cfg.Logger)
	return w, nil
}

// Stats returns the worker's counters.
func (w *Worker) Stats() *WorkerStats { return &w.stats }

// Run creates or updates the shared consumer (see ConsumerConfig) and takes
// calls until it is stopped, then returns once every call it started has been
// acknowledged or handed back. The streams must exist (EnsureStreams).
//
// Two ways to stop it:
//
//   - Shutdown is graceful: no more calls are taken, calls delivered but not
//     started are handed back, and calls in flight run to their answer — their
//     bodies are not cancelled.
//   - Cancelling ctx is a hard stop: calls in flight see their context
//     cancelled too; those the dispatcher can still abandon are handed back, and
//     answers not yet stored are left to redelivery, where the idempotency record
//     answers them.
//
// Run returns nil when stopped either way, an error if the consumer cannot be
// created, [ErrRunning] if called twice, and an error wrapping
// nats.ErrConnectionClosed if the connection is closed under it.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return ErrRunning
	}
	w.started = true
	hctx, hardCancel := context.WithCancel(ctx)
	pctx, stopPull := context.WithCancel(hctx)
	w.hardCancel, w.stopPull = hardCancel, stopPull
	stopping := w.stopping
	w.mu.Unlock()
	defer close(w.done)
	defer hardCancel()
	if stopping {
		return nil
	}

	cc := ConsumerConfig{Stream: w.cfg.Stream, Durable: w.cfg.Durable, AckWait: w.cfg.AckWait, MaxDeliver: w.cfg.MaxDeliver,
		MaxAckPending: w.cfg.MaxAckPending}
	if _, err := EnsureConsumer(hctx, w.js, cc); err != nil {
		if pctx.Err() != nil || w.cfg.StopWhenStreamGone && errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil
		}
		return err
	}
	err := w.consume(pctx, hctx, cc)
	// Acks and hand-backs are not waited for: send what is buffered before the
	// caller closes the connection.
	if ferr := w.js.Conn().FlushTimeout(flushTimeout); ferr != nil && err == nil && !errors.Is(ferr, nats.ErrConnectionClosed) {
		w.log.Warn("flushing the last acknowledgements failed; their calls will be redelivered and answered from their records", "error", ferr)
	}
	return err
}

// Shutdown stops the worker gracefully (see Run) and waits for Run to return.
// If ctx ends first, it stops the worker hard, waits for Run to return and
// returns ctx's error. A worker that is not running yet will not start.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	w.stopping = true
	started := w.started
	if w.stopPull != nil {
		w.stopPull()
	}
	w.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	w.mu.Lock()
	w.hardCancel()
	w.mu.Unlock()
	<-w.done
	return ctx.Err()
}

// maxPulls bounds the pull requests one worker has outstanding at once. A
// request asks for as many calls as there are free goroutines when it is sent,
// so more of them only split the same capacity into smaller pulls; a few let
// the next pull be on its way while the calls of the previous one start.
const maxPulls = 4

// pullEnd is how one pull request ended: the calls it delivered and why it
// ended (nil: it was filled or expired).
type pullEnd struct {
	got int
	err error
}

// consume runs Concurrency long-lived goroutines that each take one call at a
// time, and feeds them from pull requests on the consumer until pctx ends.
// A pull asks for no more calls than there are goroutines free to start them
// (each free goroutine is a token in slots), so every delivered call starts
// at once and is kept in progress from its delivery on: none waits in the
// client, unstarted, while its ack wait runs out. A pull is listened to until
// JetStream ends it (see internal/jsapi), so no call delivered into it is
// dropped.
func (w *Worker) consume(pctx, hctx context.Context, cc ConsumerConfig) error {
	work := make(chan jetstream.Msg)
	slots := make(chan struct{}, w.cfg.Concurrency)
	stopProgress := make(chan struct{})
	var keeping sync.WaitGroup
	keeping.Go(func() { w.progress.run(stopProgress) })
	defer keeping.Wait()
	defer close(stopProgress)
	var running sync.WaitGroup
	for range w.cfg.Concurrency {
		slots <- struct{}{}
		running.Go(func() {
			for m := range work {
				w.handle(hctx, m)
				slots <- struct{}{}
			}
		})
	}
	defer running.Wait()
	defer close(work)

	p := newPuller(w.js, w.cfg.Stream, cc.Durable, w.cfg.PullWait)
	conn := w.js.Conn()
	events := conn.StatusChanged(nats.CONNECTED, nats.CLOSED)
	defer conn.RemoveStatusListener(events)
	ended := make(chan pullEnd, maxPulls)
	var pulling sync.WaitGroup
	defer pulling.Wait()
	// lost is closed when the connection the outstanding pulls were sent on
	// is lost: on a reconnection (the server may have restarted and forgotten
	// them), on the connection's close, and when consume returns.
	lost := make(chan struct{})
	defer func() { close(lost) }()
	pulls, failures := 0, 0
	for {
		if conn.IsClosed() {
			return fmt.Errorf("bus: worker: %w", nats.ErrConnectionClosed)
		}
		free := slots
		if pulls == maxPulls {
			free = nil
		}
		select {
		case <-pctx.Done():
			return nil
		case <-events:
			close(lost)
			lost = make(chan struct{})
			continue
		case e := <-ended:
			pulls--
			if e.err == nil || e.got > 0 {
				failures = 0
			}
			if e.err == nil || pctx.Err() != nil || errors.Is(e.err, jsapi.ErrLost) {
				continue
			}
			if errors.Is(e.err, jsapi.ErrSilent) {
				w.log.Warn(
					"a pull heard no heartbeat from JetStream; it was given up (the consumer's leader may have gone), and calls it may still deliver "+
						"will return after their ack wait",
					"pull_wait", w.cfg.PullWait)
				continue
			}
			if errors.Is(e.err, jsapi.ErrGivenUp) {
				w.log.Warn(
					"JetStream did not end a pull within PullWait of its expiry; it was given up, and calls it may still deliver will return after "+
						"their ack wait",
					"pull_wait", w.cfg.PullWait)
				continue
			}
			failures++
			if w.pullFailed(pctx, e.err, failures, cc) {
				return nil
			}
			continue
		case <-free:
		}
		n := 1
	grab:
		for n < w.cfg.Concurrency {
			select {
			case <-slots:
				n++
			default:
				break grab
			}
		}
		pl, err := p.Start(n, lost)
		if err != nil {
			release(slots, n)
			if errors.Is(err, nats.ErrConnectionClosed) {
				return fmt.Errorf("bus: worker: %w", err)
			}
			failures++
			if w.pullFailed(pctx, err, failures, cc) {
				return nil
			}
			continue
		}
		pulls++
		pulling.Go(func() {
			e := w.deliver(pctx, pl, work)
			release(slots, n-e.got)
			ended <- e
		})
	}
}

// deliver hands the calls of one pull to the goroutines reading work, or back
// to JetStream once pctx has ended, and returns how many it handed over and
// why the pull ended.
func (w *Worker) deliver(pctx context.Context, pl *jsapi.Pull, work chan<- jetstream.Msg) pullEnd {
	got := 0
	for {
		m, err := pl.Next(pctx)
		if m == nil {
			return pullEnd{got: got, err: err}
		}
		if pctx.Err() != nil {
			w.handBack(m, "the worker is stopping")
			continue
		}
		work <- m
		got++
	}
}

// newPuller returns the puller of a worker's pulls on the consumer of stream.
func newPuller(js jetstream.JetStream, stream, consumer string, expires time.Duration) *jsapi.Puller {
	return jsapi.New(js.Conn(), jsapi.NextSubject(js, stream, consumer), expires)
}

// release puts n tokens back in slots.
func release(slots chan<- struct{}, n int) {
	for range n {
		slots <- struct{}{}
	}
}

// pullFailed logs a failed pull, waits a growing while, and creates the
// consumer again when it has gone. It reports true when the stream has gone
// and the worker is to stop (WorkerConfig.StopWhenStreamGone).
func (w *Worker) pullFailed(ctx context.Context, err error, failures int, cc ConsumerConfig) (stop bool) {
	w.log.Warn("pulling calls failed; retrying", "error", err, "failures", failures)
	backoff.Sleep(ctx, retryBackoff.Delay(failures))
	// A pull that finds no responder has no consumer (or no JetStream) to
	// answer it either, or its consumer is electing a leader: then the
	// request to create it goes unanswered until one leads, and tries of
	// recreateAttempt find the new leader soon after.
	if (consumerGone(err) || errors.Is(err, nats.ErrNoResponders)) && ctx.Err() == nil {
		if _, err := ensureConsumer(ctx, w.js, cc, recreateAttempt); err != nil {
			if w.cfg.StopWhenStreamGone && errors.Is(err, jetstream.ErrStreamNotFound) {
				w.log.Info("the calls stream is gone; its worker stops", "stream", w.cfg.Stream)
				return true
			}
			w.log.Warn("creating the consumer again failed", "error", err)
		}
	}
	return false
}

// recreateAttempt bounds one try of the worker's request to create its
// consumer again after a failed pull.
const recreateAttempt = time.Second

// handle takes one delivered message to its end: a call is settled by the
// settler, a rejection the worker made too; a message that cannot be answered
// is terminated, and one the worker cannot start on is handed back.
func (w *Worker) handle(ctx context.Context, m jetstream.Msg) {
	w.stats.Received.Add(1)
	delivery := 0
	if md, err := m.Metadata(); err == nil {
		delivery = int(md.NumDelivered)
	}
	w.obs.MessageReceived(delivery > 1)
	held := w.progress.hold(m)
	defer w.progress.release(held)
	size := len(m.Data()) + headerSize(m.Headers())
	weight := w.weigh(size)
	if !w.memory.TryAcquire(weight) {
		w.stats.MemoryWaits.Add(1)
		if err := w.memory.Acquire(ctx, weight); err != nil {
			w.handBack(m, "the worker is stopping")
			return
		}
	}
	defer w.memory.Release(weight)

	in := w.decode(m, size)
	switch {
	case in.unaddressable != "":
		w.stats.Unaddressable.Add(1)
		w.obs.MessageRejected("")
		w.log.Warn("terminating a call that cannot be answered", "subject", in.subject, "reason", in.unaddressable)
		if err := m.TermWithReason(in.unaddressable); err != nil {
			w.log.Warn("terminating a message failed", "subject", in.subject, "error", err)
		}
	case in.rejected != nil:
		w.stats.Rejected.Add(1)
		a := *in.rejected
		w.obs.MessageRejected(a.Code)
		w.log.InfoContext(withTraceParent(ctx, a.TraceParent), "call rejected", "tenant", a.Tenant, "tool", a.Tool, "call_id", a.CallID,
			"code", a.Code, "field", a.Field)
		w.count(w.settle.Answer(ctx, a, msgDelivery{m}))
	default:
		in.call.Delivery = delivery
		w.count(w.settle.Settle(ctx, in.call, msgDelivery{m}))
	}
}

// count adds how a message was settled to the worker's counters.
func (w *Worker) count(s dispatch.Settlement) {
	switch s {
	case dispatch.Answered:
		w.stats.Answered.Add(1)
	case dispatch.AnsweredBefore:
		w.stats.AlreadyAnswered.Add(1)
	case dispatch.HandedBack:
		w.stats.HandedBack.Add(1)
		w.obs.CallHandedBack()
	}
}

// weigh returns the share of MaxInFlightMemory a call whose message is size
// bytes (headers included) takes: what handling it may cost in memory, within
// the whole budget. A message over MaxMessageBytes is refused unread.
func (w *Worker) weigh(size int) int64 {
	size = min(size, w.cfg.MaxMessageBytes)
	return min(CallMemory(size, w.cfg.MaxValues), w.cfg.MaxInFlightMemory)
}

// handBack hands back a message the worker does not start on, for why.
func (w *Worker) handBack(m jetstream.Msg, why string) {
	w.stats.HandedBack.Add(1)
	w.obs.CallHandedBack()
	if err := m.Nak(); err != nil {
		w.log.Warn("handing a message back failed; it returns after the ack wait", "reason", why, "error", err)
	}
}

// withTraceParent returns ctx with the span context of traceparent, when it
// is a valid one, for the log line about a message the worker rejected.
func withTraceParent(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{wire.TraceParentHeader: traceparent})
}
