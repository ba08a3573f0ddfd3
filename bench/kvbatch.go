package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The fsync experiment. With sync_interval always, nats-server syncs the store
// before acknowledging each write, and the writes of one stream are stored one
// after the other, so a claim cycle pays two fsyncs however many run at once.
// An atomic batch (ADR-50, AllowAtomicPublish) is committed on a single server
// with one FlushAllPending for all its messages. These rows measure what group
// commit through atomic batches gives the raw KV cycle: concurrent writers
// queue their writes, one of them publishes everything queued as one batch
// while the others wait, and each learns its own revision from the batch's
// PubAck. Every write keeps its Nats-Expected-Last-Subject-Sequence, so a
// batch is all-or-nothing: one failed expectation rejects it whole, and its
// writes are then retried one by one.

// Headers of the atomic batch protocol and of a write's expectation.
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
	hdrExpectSubj  = "Nats-Expected-Last-Subject-Sequence"
	maxGroup       = 64
)

// groupWrite is one write waiting for its batch.
type groupWrite struct {
	subj   string
	data   []byte
	expect uint64
	rev    uint64
	err    error
	done   chan struct{}
}

// groupCommitter publishes concurrent writes to one stream as atomic batches.
type groupCommitter struct {
	nc *nats.Conn
	js jetstream.JetStream

	mu      sync.Mutex
	queue   []*groupWrite
	leading bool

	ids                       atomic.Uint64
	batches, writes, fallback atomic.Int64
}

// write stores data on subj if the subject's last sequence is expect (0: the
// subject holds nothing) and returns the new sequence.
func (g *groupCommitter) write(ctx context.Context, subj string, data []byte, expect uint64) (uint64, error) {
	w := &groupWrite{subj: subj, data: data, expect: expect, done: make(chan struct{})}
	g.mu.Lock()
	g.queue = append(g.queue, w)
	if g.leading {
		g.mu.Unlock()
		select {
		case <-w.done:
			return w.rev, w.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	g.leading = true
	for len(g.queue) > 0 {
		n := min(len(g.queue), maxGroup)
		batch := g.queue[:n:n]
		g.queue = g.queue[n:]
		g.mu.Unlock()
		g.commit(ctx, batch)
		g.mu.Lock()
	}
	g.leading = false
	g.mu.Unlock()
	<-w.done
	return w.rev, w.err
}

// commit publishes batch as one atomic batch and settles its writes; when the
// server rejects the batch, each write is published on its own.
func (g *groupCommitter) commit(ctx context.Context, batch []*groupWrite) {
	defer func() {
		for _, w := range batch {
			close(w.done)
		}
	}()
	g.batches.Add(1)
	g.writes.Add(int64(len(batch)))
	last, err := g.publishBatch(ctx, batch)
	if err == nil {
		for i, w := range batch {
			w.rev = last - uint64(len(batch)-1-i)
		}
		return
	}
	g.fallback.Add(1)
	for _, w := range batch {
		ack, err := g.js.PublishMsg(ctx, &nats.Msg{Subject: w.subj, Data: w.data},
			jetstream.WithExpectLastSequencePerSubject(w.expect))
		if err != nil {
			w.err = err
			continue
		}
		w.rev = ack.Sequence
	}
}

// batchAck is the reply to a batch's commit.
type batchAck struct {
	Seq   uint64 `json:"seq"`
	Count int    `json:"count"`
	Error *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

// publishBatch sends batch with the atomic batch headers, the last message
// committing it, and returns the stream sequence of the last message.
func (g *groupCommitter) publishBatch(ctx context.Context, batch []*groupWrite) (uint64, error) {
	id := "g" + strconv.FormatUint(g.ids.Add(1), 36)
	var reply *nats.Msg
	for i, w := range batch {
		m := nats.NewMsg(w.subj)
		m.Data = w.data
		m.Header.Set(hdrBatchID, id)
		m.Header.Set(hdrBatchSeq, strconv.Itoa(i+1))
		m.Header.Set(hdrExpectSubj, strconv.FormatUint(w.expect, 10))
		if i < len(batch)-1 {
			if err := g.nc.PublishMsg(m); err != nil {
				return 0, err
			}
			continue
		}
		m.Header.Set(hdrBatchCommit, "1")
		var err error
		if reply, err = g.nc.RequestMsgWithContext(ctx, m); err != nil {
			return 0, err
		}
	}
	var ack batchAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return 0, fmt.Errorf("batch reply %q: %w", reply.Data, err)
	}
	if ack.Error != nil {
		return 0, fmt.Errorf("batch rejected: %s (%d)", ack.Error.Description, ack.Error.ErrCode)
	}
	if ack.Count != len(batch) {
		return 0, fmt.Errorf("batch of %d committed %d", len(batch), ack.Count)
	}
	return ack.Seq, nil
}

// runKVCyclesGrouped is runKVCycles with the writes group-committed: the
// Updates only (groupCreates false), or the Creates too.
func (h *harness) runKVCyclesGrouped(ctx context.Context, id string, groupCreates bool, n int) Result {
	conc := h.cfg.concurrency
	name := "JetStream KV: Create + Update, Updates group-committed in atomic batches"
	if groupCreates {
		name = "JetStream KV: Create + Update, both group-committed in atomic batches"
	}
	r := Result{ID: id, Group: groupRawStore, Name: name, Concurrency: conc}
	env, js, kv, err := h.startRawKV(ctx, id, true)
	if err != nil {
		return failed(r, err)
	}
	defer env.stop()
	defer js.Conn().Close()
	r.Durability = env.fsyncName()
	s, err := js.Stream(ctx, "KV_"+rawBucket)
	if err != nil {
		return failed(r, err)
	}
	cfg := s.CachedInfo().Config
	cfg.AllowAtomicPublish = true
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		return failed(r, fmt.Errorf("allowing atomic batches: %w", err))
	}
	g := &groupCommitter{nc: js.Conn(), js: js}
	r = h.cycles(ctx, r, n, func(ctx context.Context, i int) error {
		key := "bench." + strconv.Itoa(i)
		subj := "$KV." + rawBucket + "." + key
		var rev uint64
		var err error
		if groupCreates {
			rev, err = g.write(ctx, subj, rawClaimValue, 0)
		} else {
			rev, err = kv.Create(ctx, key, rawClaimValue)
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", key, err)
		}
		if _, err := g.write(ctx, subj, rawDoneValue, rev); err != nil {
			return fmt.Errorf("update %s: %w", key, err)
		}
		return nil
	})
	if r.Err == "" {
		// The check: a sample of the keys, read back, holds the value
		// their Updates wrote.
		if err := checkGrouped(ctx, kv, n, rawDoneValue); err != nil {
			return failed(r, err)
		}
		b, w := g.batches.Load(), g.writes.Load()
		r.Check += fmt.Sprintf("; %d writes in %d atomic batches (%.1f a batch), %d batches rejected and written one by one",
			w, b, float64(w)/float64(max(b, 1)), g.fallback.Load())
	}
	return r
}

// checkGrouped reads back a sample of the keys written.
func checkGrouped(ctx context.Context, kv jetstream.KeyValue, n int, want []byte) error {
	for i := 0; i < n; i += max(1, n/50) {
		e, err := kv.Get(ctx, "bench."+strconv.Itoa(i))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // not reached before the time cap
		}
		if err != nil {
			return fmt.Errorf("reading back bench.%d: %w", i, err)
		}
		if string(e.Value()) != string(want) {
			return fmt.Errorf("bench.%d holds %q after its cycle", i, e.Value())
		}
	}
	return nil
}
