package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/retry"
)

// Defaults for [StreamsConfig] and the shared consumer.
const (
	// DefaultDuplicates is the window within which TOOLEXEC_EVENTS drops a
	// message whose Nats-Msg-Id it has seen: an answer published twice.
	DefaultDuplicates = 2 * time.Minute
	// DefaultEventMaxAge is how long answers and audit events are kept.
	DefaultEventMaxAge = 7 * 24 * time.Hour

	// DefaultDurable names the durable consumer every executor shares.
	DefaultDurable = "toolexec-executor"
	// DefaultAckWait is how long a delivered call may go without an ack or an
	// in-progress signal before JetStream redelivers it.
	DefaultAckWait = 30 * time.Second
	// DefaultMaxDeliver bounds how often one call is delivered.
	DefaultMaxDeliver = 10
	// DefaultMaxAckPending bounds how many calls may be delivered and not yet
	// acknowledged, across all executors.
	DefaultMaxAckPending = 1000
)

// StreamsConfig shapes the two streams. The zero value is usable.
type StreamsConfig struct {
	// Replicas is how many servers keep each stream (1..5); default 1. Use 3 on
	// a cluster.
	Replicas int
	// Storage is the streams' storage; default file.
	Storage jetstream.StorageType
	// Duplicates is the duplicate window of the events stream; default
	// DefaultDuplicates. The calls stream needs none (see CallStreamConfig).
	Duplicates time.Duration
	// EventMaxAge is how long TOOLEXEC_EVENTS keeps an event; default
	// DefaultEventMaxAge. A caller can attach to a call's answer only within it.
	EventMaxAge time.Duration
	// CallMaxAge, when positive, drops calls that no executor took within it;
	// default zero (kept until taken).
	CallMaxAge time.Duration
}

// CallStreamConfig returns the configuration of the calls stream,
// TOOLEXEC_CALLS_V2: subjects toolexec.call.<tenant>.<tool>.<call_id>,
// work-queue retention (a call leaves the stream once acknowledged or
// terminated), and at most one message per subject, a second one refused
// while the first is stored. That refusal is what makes a call published
// twice (its PubAck lost, say) stored once; it concerns one subject, so one
// tenant's publication never touches another's. Nats-Msg-Id plays no part:
// callers set none, and the duplicate window is the least the server allows,
// so that one set anyway drops nothing of anyone's for longer.
func (cfg StreamsConfig) CallStreamConfig() jetstream.StreamConfig {
	cfg = cfg.withDefaults()
	return jetstream.StreamConfig{
		Name:                 wire.CallStream,
		Description:          "toolexec tool calls, one per call subject, taken by the executors' shared consumer",
		Subjects:             []string{wire.CallSubjects},
		Retention:            jetstream.WorkQueuePolicy,
		Storage:              cfg.Storage,
		Replicas:             cfg.Replicas,
		MaxMsgsPerSubject:    1,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
		Duplicates:           minDuplicates,
		MaxAge:               cfg.CallMaxAge,
	}
}

// minDuplicates is the shortest duplicate window nats-server accepts.
const minDuplicates = 100 * time.Millisecond

// EventStreamConfig returns the configuration of the events stream: subjects
// toolexec.event.>, limits retention with MaxAge EventMaxAge.
func (cfg StreamsConfig) EventStreamConfig() jetstream.StreamConfig {
	cfg = cfg.withDefaults()
	return jetstream.StreamConfig{
		Name:        wire.EventStream,
		Description: "toolexec answers and audit events",
		Subjects:    []string{wire.EventSubjects},
		Retention:   jetstream.LimitsPolicy,
		Storage:     cfg.Storage,
		Replicas:    cfg.Replicas,
		Duplicates:  capDuplicates(cfg.Duplicates, cfg.EventMaxAge),
		MaxAge:      cfg.EventMaxAge,
	}
}

func (cfg StreamsConfig) withDefaults() StreamsConfig {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.Duplicates <= 0 {
		cfg.Duplicates = DefaultDuplicates
	}
	if cfg.EventMaxAge <= 0 {
		cfg.EventMaxAge = DefaultEventMaxAge
	}
	return cfg
}

// capDuplicates keeps the duplicate window within the stream's MaxAge, as the
// server requires.
func capDuplicates(d, maxAge time.Duration) time.Duration {
	if maxAge > 0 && d > maxAge {
		return maxAge
	}
	return d
}

// EnsureStreams creates TOOLEXEC_CALLS_V2 and TOOLEXEC_EVENTS as cfg
// describes, or updates them if they exist. An update the server refuses
// (changing a stream's retention, say) is returned as an error naming the
// stream. A request whose reply is lost (routes still forming in a new
// cluster) or that JetStream cannot serve yet is tried again until ctx ends.
//
// Where the calls stream of wire version 1, TOOLEXEC_CALLS, exists and takes
// every call subject, its subjects are first narrowed to those of version 1
// (toolexec.call.<tenant>.<tool>), so that the two streams can live side by
// side; its calls stay, for a worker of their own (WorkerConfig.Stream,
// HasLegacyCallStream). It is never created.
func EnsureStreams(ctx context.Context, js jetstream.JetStream, cfg StreamsConfig) error {
	if cfg.Replicas > 5 {
		return invalidConfig("streams: Replicas must be 1 to 5, got %d", cfg.Replicas)
	}
	if err := retry.Setup(ctx, setupAttempt, func(ctx context.Context) error { return narrowLegacyCalls(ctx, js) }); err != nil {
		return fmt.Errorf("bus: stream %s: %w", wire.LegacyCallStream, err)
	}
	for _, sc := range []jetstream.StreamConfig{cfg.CallStreamConfig(), cfg.EventStreamConfig()} {
		err := retry.Setup(ctx, setupAttempt, func(ctx context.Context) error {
			_, err := js.CreateOrUpdateStream(ctx, sc)
			return err
		})
		if err != nil {
			return fmt.Errorf("bus: stream %s: %w", sc.Name, err)
		}
	}
	return nil
}

// narrowLegacyCalls narrows the subjects of the calls stream of wire version 1,
// if it exists, to those of version 1, leaving the rest of its configuration
// and its calls as they are.
func narrowLegacyCalls(ctx context.Context, js jetstream.JetStream) error {
	s, err := js.Stream(ctx, wire.LegacyCallStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	sc := s.CachedInfo().Config
	if len(sc.Subjects) == 1 && sc.Subjects[0] == wire.LegacyCallSubjects {
		return nil
	}
	sc.Subjects = []string{wire.LegacyCallSubjects}
	_, err = js.UpdateStream(ctx, sc)
	return err
}

// HasLegacyCallStream reports whether the calls stream of wire version 1,
// TOOLEXEC_CALLS, exists: then calls published by callers of that version
// still land there, and a worker with WorkerConfig.Stream set to it takes them
// until an operator deletes the stream.
func HasLegacyCallStream(ctx context.Context, js jetstream.JetStream) (bool, error) {
	var found bool
	err := retry.Setup(ctx, setupAttempt, func(ctx context.Context) error {
		_, err := js.Stream(ctx, wire.LegacyCallStream)
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			found = false
			return nil
		case err != nil:
			return err
		}
		found = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("bus: stream %s: %w", wire.LegacyCallStream, err)
	}
	return found, nil
}

// setupAttempt bounds one try of a request that creates or updates a stream or
// the consumer (see retry.Setup). A variable so that tests can shorten it.
var setupAttempt = retry.SetupAttempt

// ConsumerConfig shapes the durable pull consumer all executors share on the
// calls stream. Every executor should use the same values: each one creates or
// updates the consumer when it starts.
type ConsumerConfig struct {
	// Stream is the calls stream the consumer reads; default TOOLEXEC_CALLS_V2
	// (wire.CallStream).
	Stream string
	// Durable names the consumer; default DefaultDurable.
	Durable string
	// AckWait is how long a delivered call may go without an ack or an in-progress
	// signal before it is redelivered; default DefaultAckWait.
	AckWait time.Duration
	// MaxDeliver bounds deliveries of one call; default DefaultMaxDeliver. A call
	// delivered that often stays in the stream unanswered, and the server
	// publishes a MAX_DELIVERIES advisory.
	MaxDeliver int
	// MaxAckPending bounds calls delivered and not yet acknowledged across all
	// executors; default DefaultMaxAckPending. Keep it at least the sum of the
	// executors' concurrency.
	MaxAckPending int
}

func (cfg ConsumerConfig) withDefaults() ConsumerConfig {
	if cfg.Stream == "" {
		cfg.Stream = wire.CallStream
	}
	if cfg.Durable == "" {
		cfg.Durable = DefaultDurable
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = DefaultMaxDeliver
	}
	if cfg.MaxAckPending <= 0 {
		cfg.MaxAckPending = DefaultMaxAckPending
	}
	return cfg
}

// JetStreamConfig returns the consumer's JetStream configuration: durable,
// explicit acks, no filter (a work-queue stream allows one unfiltered consumer).
func (cfg ConsumerConfig) JetStreamConfig() jetstream.ConsumerConfig {
	cfg = cfg.withDefaults()
	return jetstream.ConsumerConfig{
		Durable:       cfg.Durable,
		Description:   "toolexec executors",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    cfg.MaxDeliver,
		MaxAckPending: cfg.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}
}

// EnsureConsumer creates the shared consumer on its stream (TOOLEXEC_CALLS_V2
// by default), or updates it,
// and returns it. The stream must exist (see EnsureStreams): otherwise the error
// matches jetstream.ErrStreamNotFound. Lost replies are tried again, as in
// EnsureStreams.
func EnsureConsumer(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig) (jetstream.Consumer, error) {
	return ensureConsumer(ctx, js, cfg, setupAttempt)
}

// ensureConsumer is EnsureConsumer with tries of attempt each.
func ensureConsumer(ctx context.Context, js jetstream.JetStream, cfg ConsumerConfig, attempt time.Duration) (jetstream.Consumer, error) {
	jc := cfg.JetStreamConfig()
	stream := cfg.withDefaults().Stream
	var c jetstream.Consumer
	err := retry.Setup(ctx, attempt, func(ctx context.Context) (err error) {
		c, err = js.CreateOrUpdateConsumer(ctx, stream, jc)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bus: consumer %s on %s: %w", jc.Durable, stream, err)
	}
	return c, nil
}

// consumerGone reports whether err says the consumer or its stream no longer
// exists, so that it is worth creating again.
func consumerGone(err error) bool {
	return errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) ||
		errors.Is(err, jetstream.ErrConsumerDoesNotExist) || errors.Is(err, jetstream.ErrStreamNotFound)
}
