package redisstore

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Pipelining. Every store operation is one script run, and alone each costs a
// round trip: a write and a read system call on either side and a pooled
// connection held for the trip. When the client is a *redis.Client and
// Config.MaxBatch allows it, at most Config.Pipelines callers at a time send
// script runs; a caller that finds them all busy waits, and the next one to
// send takes the waiting runs with its own, up to MaxBatch, as one pipeline of
// EVALSHA commands. The senders are the callers themselves: there is no
// goroutine to hand a run to. Nothing waits on purpose: a run that arrives
// while fewer than Pipelines are on the wire goes at once, alone (as
// Script.Run, the way it always did); pipelines form only from runs that
// arrive while others are on the wire.
//
// Each command of a pipeline is the one the run would send alone, and Redis
// runs the scripts one after the other, each atomically, so its reply means
// what it means alone. What changes is failure:
//   - A NOSCRIPT reply (Redis restarted, or SCRIPT FLUSH) means that script
//     did not run. The sender loads the scripts concerned and sends those runs
//     again, once; a run refused again is handed back to its caller to run
//     alone. None runs twice.
//   - A reply that Redis cannot run the command now (LOADING, READONLY and
//     the others go-redis retries on) hands the run back to its caller, who
//     runs it alone with go-redis's retries, as before.
//   - A failure of the connection settles the runs whose replies were read
//     and leaves the others unknown, exactly as for a run alone. go-redis
//     would send the whole pipeline again, running again the scripts that had
//     already answered (and a second run of most scripts answers differently:
//     a record already completed is no longer the holder's claim): so the
//     pipeline is sent with retries off, and each run left unknown is handed
//     back to its caller, who runs it alone through Script.Run, with the
//     client's retries and errors, as a run that never went through a
//     pipeline. The pipeline's attempt comes on top of those: a lost reply is
//     followed by up to MaxRetries+1 more runs rather than MaxRetries, each
//     answering as a retried script always has (a claim recognises its own
//     token; a holder's write that had landed answers kvstore.ErrNotHolder).
//
// A waiting caller whose context ends returns at once with the context's
// error, its run either never sent or on the wire with its outcome unknown, as
// after a timeout. The others in the pipeline are not affected: a pipeline is
// sent under no caller's context. The sender's own caller waits for its
// pipeline whatever its context, as a run alone waits for its reply; the
// client's timeouts bound both.

// scriptRun is one script run.
type scriptRun struct {
	sc   *redis.Script
	keys []string
	args []any

	// Set by the sender before it closes done.
	val   any
	err   error
	alone bool // not settled by the pipeline: the caller runs it alone
	done  chan struct{}
}

// pipeliner bounds the callers sending script runs and hands them the runs
// waiting meanwhile.
type pipeliner struct {
	client   *redis.Client
	maxBatch int
	slots    chan struct{}   // one element per caller sending; capacity Config.Pipelines
	runs     chan *scriptRun // unbuffered: a run is with a sender or with its caller

	batches, batched, reloaded, alone atomic.Int64
}

// newPipeliner returns the pipeliner of a store over client, or nil when
// pipelining is off or client is not a single-node client (a cluster's or a
// ring's pipelines split and retry by node, which this file does not account
// for).
func newPipeliner(client redis.UniversalClient, cfg Config) *pipeliner {
	c, ok := client.(*redis.Client)
	if !ok || cfg.MaxBatch <= 1 {
		return nil
	}
	return &pipeliner{
		client: c, maxBatch: cfg.MaxBatch,
		slots: make(chan struct{}, cfg.Pipelines), runs: make(chan *scriptRun),
	}
}

// script runs sc on keys with args: in a pipeline when pipelining is on and
// others are on the wire, alone otherwise, or when the pipeline left the run's
// outcome unknown.
func (s *Store) script(ctx context.Context, sc *redis.Script, keys []string, args ...any) (any, error) {
	p := s.pipe
	if p == nil {
		return sc.Run(ctx, s.client, keys, args...).Result()
	}
	// A select between a free slot and an ended context picks either at
	// random: a caller whose context has ended must not send a run it will be
	// told failed.
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &scriptRun{sc: sc, keys: keys, args: args}
	select {
	case p.slots <- struct{}{}:
		p.lead(ctx, r)
	default:
		r.done = make(chan struct{})
		select {
		case p.slots <- struct{}{}:
			p.lead(ctx, r)
		case p.runs <- r:
			select {
			case <-r.done:
			case <-ctx.Done():
				// The run is on the wire: its outcome is as unknown as that
				// of a run alone whose caller gave up on it.
				return nil, ctx.Err()
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.done:
			return nil, ErrClosed
		}
	}
	if r.alone {
		return sc.Run(ctx, s.client, keys, args...).Result()
	}
	return r.val, r.err
}

// lead sends own, the run of a caller that holds a slot, together with the
// runs waiting (up to maxBatch in all), settles them, and frees the slot.
func (p *pipeliner) lead(ctx context.Context, own *scriptRun) {
	defer func() { <-p.slots }()
	batch := []*scriptRun{own}
more:
	for len(batch) < p.maxBatch {
		select {
		case r := <-p.runs:
			batch = append(batch, r)
		default:
			break more
		}
	}
	if len(batch) == 1 {
		own.val, own.err = own.sc.Run(ctx, p.client, own.keys, own.args...).Result()
		return
	}
	p.send(batch)
}

// send settles every run of batch, as one pipeline, and closes the done
// channels of those that have one.
func (p *pipeliner) send(batch []*scriptRun) {
	ctx := context.Background() // no caller's: bounded by the client's timeouts
	p.batches.Add(1)
	p.batched.Add(int64(len(batch)))
	again := p.pipeline(ctx, batch)
	if len(again) > 0 {
		p.reloaded.Add(int64(len(again)))
		if p.load(ctx, again) == nil {
			again = p.pipeline(ctx, again)
		}
		for _, r := range again {
			r.alone = true
		}
	}
	for _, r := range batch {
		if r.alone {
			p.alone.Add(1)
		}
		if r.done != nil {
			close(r.done)
		}
	}
}

// onceCmd is a command go-redis must not send again: a pipeline holding one is
// not retried as a whole after a connection failure (see the top of this file).
type onceCmd struct{ *redis.Cmd }

// NoRetry tells go-redis not to retry the pipeline that holds the command.
func (onceCmd) NoRetry() bool { return true }

// pipeline sends runs as one pipeline of EVALSHA commands and sets the result
// of each run it settles; it marks alone the runs whose outcome the connection
// left unknown, and returns those Redis refused with NOSCRIPT, which did not
// run.
func (p *pipeliner) pipeline(ctx context.Context, runs []*scriptRun) (noScript []*scriptRun) {
	pipe := p.client.Pipeline()
	cmds := make([]*redis.Cmd, len(runs))
	for i, r := range runs {
		argv := make([]any, 0, 3+len(r.keys)+len(r.args))
		argv = append(argv, "evalsha", r.sc.Hash(), len(r.keys))
		for _, k := range r.keys {
			argv = append(argv, k)
		}
		argv = append(argv, r.args...)
		cmds[i] = redis.NewCmd(ctx, argv...)
		_ = pipe.Process(ctx, onceCmd{cmds[i]}) // queues; Exec sends
	}
	_, _ = pipe.Exec(ctx) // each command carries its own error
	for i, r := range runs {
		val, err := cmds[i].Result()
		var replied redis.Error
		switch {
		case redis.HasErrorPrefix(err, "NOSCRIPT"):
			noScript = append(noScript, r)
		case err == nil || errors.As(err, &replied) && !notNow(err): // a reply, redis.Nil included
			r.val, r.err = val, err
		default:
			r.alone = true
		}
	}
	return noScript
}

// notNowReplies start the error replies with which Redis refuses a command it
// cannot run now (loading its data, a replica, no quorum, too many clients):
// go-redis retries a command alone on them, so a run in a pipeline that gets
// one goes back to its caller to run alone.
var notNowReplies = [...]string{"LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "NOREPLICAS",
	"max number of clients reached"}

// notNow reports whether err is one of notNowReplies.
func notNow(err error) bool {
	for _, p := range notNowReplies {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// load loads into Redis's script cache each script that runs use.
func (p *pipeliner) load(ctx context.Context, runs []*scriptRun) error {
	loaded := make(map[*redis.Script]bool, 2)
	for _, r := range runs {
		if loaded[r.sc] {
			continue
		}
		if err := r.sc.Load(ctx, p.client).Err(); err != nil {
			return err
		}
		loaded[r.sc] = true
	}
	return nil
}

// PipelineStats is what pipelining has done since the store was created.
type PipelineStats struct {
	Pipelines int64 // pipelines of two script runs or more
	Runs      int64 // script runs those pipelines carried
	Reloaded  int64 // runs refused with NOSCRIPT, sent again after loading their script
	Alone     int64 // runs the pipeline did not settle, handed back to run alone
}

// PipelineStats returns counts of the store's pipelines: all zero when
// pipelining is off.
func (s *Store) PipelineStats() PipelineStats {
	if s.pipe == nil {
		return PipelineStats{}
	}
	p := s.pipe
	return PipelineStats{Pipelines: p.batches.Load(), Runs: p.batched.Load(), Reloaded: p.reloaded.Load(), Alone: p.alone.Load()}
}
