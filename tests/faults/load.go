package faults

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/tool"
)

// Policy is what the publisher needs to know of a tool to derive its calls'
// keys on its own.
type Policy struct {
	Kind         tool.Kind
	KeyArguments []string
}

// Defaults for [Publisher].
const (
	DefaultPublishers     = 16
	DefaultAttemptTimeout = 3 * time.Second
)

// Publisher publishes calls as a load generator that survives faults: each call
// is retried, with the same call id (so JetStream stores it once), until the
// server acknowledges it, and only then recorded as published. Fill in the
// fields before the first Publish.
type Publisher struct {
	// Client publishes the calls. Required.
	Client *toolexec.Client
	// Recorder receives every acknowledged call. Required.
	Recorder *Recorder
	// Policies are the tools' policies by tool name, for deriving keys; a tool
	// missing here is recorded without a key.
	Policies map[string]Policy
	// Concurrency is how many calls are in flight at once; default
	// DefaultPublishers.
	Concurrency int
	// Rate, when positive, bounds publishing to about that many calls a second.
	Rate int
	// AttemptTimeout bounds one attempt; default DefaultAttemptTimeout.
	AttemptTimeout time.Duration

	published atomic.Int64
	retries   atomic.Int64
}

// Published returns how many calls have been acknowledged so far.
func (p *Publisher) Published() int { return int(p.published.Load()) }

// Retries returns how many publish attempts failed and were tried again.
func (p *Publisher) Retries() int { return int(p.retries.Load()) }

// Publish publishes calls, in order as far as the concurrency allows, and
// returns once every one is acknowledged. It returns an error if a call is
// refused before sending (malformed) or ctx ends first; calls acknowledged by
// then are recorded.
func (p *Publisher) Publish(ctx context.Context, calls []events.Call) error {
	if p.Client == nil || p.Recorder == nil {
		return errors.New("faults: Publisher needs a Client and a Recorder")
	}
	n := p.Concurrency
	if n <= 0 {
		n = DefaultPublishers
	}
	var pace <-chan time.Time
	if p.Rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(p.Rate))
		defer t.Stop()
		pace = t.C
	}
	work := make(chan events.Call)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range work {
				if err := p.one(ctx, c); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var err error
feed:
	for _, c := range calls {
		if pace != nil {
			select {
			case <-pace:
			case <-ctx.Done():
				err = ctx.Err()
				break feed
			}
		}
		select {
		case work <- c:
		case err = <-errs:
			break feed
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs
	}
	if err != nil {
		return fmt.Errorf("faults: publishing: %w", err)
	}
	return nil
}

// one publishes c until the server acknowledges it.
func (p *Publisher) one(ctx context.Context, c events.Call) error {
	rec := Call{Tenant: c.Tenant, RunID: c.RunID, CallID: c.CallID, Tool: c.Tool, Sent: time.Now()}
	if pol, ok := p.Policies[c.Tool]; ok {
		rec.Kind = pol.Kind
		if pol.Kind.Deduplicated() {
			k, err := idemkey.Derive(c.Tenant, c.RunID, c.Tool, c.Arguments, pol.KeyArguments)
			if err != nil {
				return fmt.Errorf("call %s: deriving its key: %w", c.CallID, err)
			}
			rec.Key = k.Hex
		}
	}
	timeout := p.AttemptTimeout
	if timeout <= 0 {
		timeout = DefaultAttemptTimeout
	}
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, timeout)
		_, err := p.Client.Publish(actx, c.Tenant, c.Tool, c.Arguments, toolexec.WithRunID(c.RunID), toolexec.WithFreshCallID(c.CallID))
		cancel()
		if err == nil {
			rec.Acked = time.Now()
			p.Recorder.Published(rec)
			p.published.Add(1)
			return nil
		}
		var re *events.RejectedError
		if errors.As(err, &re) {
			return fmt.Errorf("call %s: %w", c.CallID, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("call %s unacknowledged after %d attempts: %w", c.CallID, attempt, err)
		}
		p.retries.Add(1)
		select {
		case <-time.After(min(time.Duration(attempt)*50*time.Millisecond, time.Second)):
		case <-ctx.Done():
			return fmt.Errorf("call %s unacknowledged after %d attempts: %w", c.CallID, attempt, err)
		}
	}
}
