package natsstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Group commit (Config.GroupCommit).
//
// A server that syncs every write (sync_interval always) stores one stream's
// writes one after the other, each synced before it is acknowledged: every
// claim and every record costs a disk sync of its own, however many calls run
// at once. nats-server 2.12 and later store an atomic batch (ADR-50) under one
// sync. With group commit the store's writes that arrive while a batch is being
// committed go together in the next one, each keeping its expected revision, so
// fencing is unchanged.
//
// An atomic batch is all or nothing: one write whose key moved on rejects the
// whole batch, and nothing of it is stored. Its writes are then published
// again one by one, each judged on its own. To keep that rare, Claim reads the
// key before writing when group commit is on (a read costs no sync), and two
// writes to one key never share a batch: the later one, and one made while a
// batch holding its key is being committed, is published on its own after that
// batch.

// The headers of an atomic batch.
const (
	hdrBatchID     = "Nats-Batch-Id"
	hdrBatchSeq    = "Nats-Batch-Sequence"
	hdrBatchCommit = "Nats-Batch-Commit"
)

// Error codes of a batch the server refused without storing any of it.
const (
	codeAtomicDisabled   = 10174 // the stream does not allow atomic batches
	codeAtomicMissingSeq = 10175
	codeAtomicIncomplete = 10176 // a message of the batch never arrived
	codeAtomicHeader     = 10177 // a header batches cannot carry
	codeAtomicTooLarge   = 10199
	codeAtomicCommit     = 10200
	codeAtomicDuplicate  = 10201
	codeAtomicInflight   = 10210 // too many batches open on the server
)

// DefaultMaxBatch is how many writes one atomic batch carries at most.
const DefaultMaxBatch = 64

// offFor is how long the store publishes every write on its own after the
// stream refused atomic batches (a process that created the bucket without
// group commit reset the stream's setting) before it tries a batch again.
const offFor = 30 * time.Second

// committer publishes the store's writes as atomic batches.
type committer struct {
	nc      *nats.Conn
	single  func(ctx context.Context, m *nats.Msg) (uint64, error)
	timeout time.Duration
	max     int
	idBase  string // this committer's batch ids, before a counter

	mu       sync.Mutex
	queue    []*groupWrite
	leading  bool        // a goroutine is committing batches
	current  *groupBatch // the batch being committed
	ids      uint64
	offUntil atomic.Int64 // unix nanoseconds: no batches before then

	batches, writes, rejected atomic.Int64
}

// GroupStats counts what group commit did, for metrics and benchmarks.
type GroupStats struct {
	// Batches is the number of atomic batches committed.
	Batches int64
	// Writes is the number of writes those batches carried.
	Writes int64
	// Rejected is the number of batches the server refused whole, whose
	// writes were then published one by one.
	Rejected int64
}

// groupBatch is a batch being committed.
type groupBatch struct {
	writes   []*groupWrite
	subjects map[string]struct{}
	done     chan struct{} // closed when its writes are settled
}

// groupWrite is one write waiting for its batch.
type groupWrite struct {
	ctx   context.Context
	msg   *nats.Msg
	rev   uint64
	err   error
	alone bool // publish it on its own
	taken bool // in a batch: the server may store it
	done  chan struct{}
}

func newCommitter(nc *nats.Conn, single func(ctx context.Context, m *nats.Msg) (uint64, error), timeout time.Duration, max int) *committer {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &committer{nc: nc, single: single, timeout: timeout, max: max, idBase: "tx" + hex.EncodeToString(b[:]) + "-"}
}

// write stores m (a write with its expected-revision header) and returns its
// new revision, as publishing it on its own would.
func (c *committer) write(ctx context.Context, m *nats.Msg) (uint64, error) {
	if time.Now().UnixNano() < c.offUntil.Load() {
		return c.single(ctx, m)
	}
	c.mu.Lock()
	if b := c.current; b != nil {
		if _, busy := b.subjects[m.Subject]; busy {
			// Its expected revision was read before that batch's write to
			// the key was committed: in the next batch it would most likely
			// fail and take the batch with it.
			c.mu.Unlock()
			select {
			case <-b.done:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
			return c.single(ctx, m)
		}
	}
	w := &groupWrite{ctx: ctx, msg: m, done: make(chan struct{})}
	c.queue = append(c.queue, w)
	lead := !c.leading
	c.leading = true
	c.mu.Unlock()
	if lead {
		c.lead(w)
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		c.mu.Lock()
		if !w.taken {
			c.remove(w)
			c.mu.Unlock()
			return 0, ctx.Err()
		}
		c.mu.Unlock()
		// In a batch being sent: its data is in use until the batch is
		// settled, which the commit's timeout bounds.
		<-w.done
	}
	if w.alone {
		return c.single(ctx, m)
	}
	return w.rev, w.err
}

// remove takes w, not yet in a batch, out of the queue. c.mu is held.
func (c *committer) remove(w *groupWrite) {
	for i, q := range c.queue {
		if q == w {
			c.queue = append(c.queue[:i], c.queue[i+1:]...)
			return
		}
	}
}

// lead commits batches until own's is settled; a goroutine of its own commits
// whatever is queued after that, so that no caller waits for others' batches.
func (c *committer) lead(own *groupWrite) {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.leading = false
			c.mu.Unlock()
			return
		}
		b, later := c.take()
		c.current = b
		c.mu.Unlock()

		c.commit(b)

		close(b.done)
		for _, w := range later {
			close(w.done)
		}
		c.mu.Lock()
		c.current = nil
		idle := len(c.queue) == 0
		if idle {
			c.leading = false
		}
		c.mu.Unlock()
		if idle {
			return
		}
		if own != nil && settled(own) {
			go c.lead(nil)
			return
		}
	}
}

func settled(w *groupWrite) bool {
	select {
	case <-w.done:
		return true
	default:
		return false
	}
}

// take moves the next batch out of the queue: up to max writes, one per key.
// A second write to a key in the batch is returned in later, marked to go on
// its own once the batch is settled. c.mu is held.
func (c *committer) take() (*groupBatch, []*groupWrite) {
	n := min(len(c.queue), c.max)
	b := &groupBatch{
		writes:   make([]*groupWrite, 0, n),
		subjects: make(map[string]struct{}, n),
		done:     make(chan struct{}),
	}
	var later []*groupWrite
	i := 0
	for ; i < len(c.queue) && len(b.writes) < c.max; i++ {
		w := c.queue[i]
		w.taken = true
		if _, dup := b.subjects[w.msg.Subject]; dup {
			w.alone = true
			later = append(later, w)
			continue
		}
		b.subjects[w.msg.Subject] = struct{}{}
		b.writes = append(b.writes, w)
	}
	rest := copy(c.queue, c.queue[i:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	return b, later
}

// commit publishes b as one atomic batch and settles its writes: with their
// revisions; marked to go alone when the server refused the batch without
// storing any of it; or with the error when the outcome is unknown.
func (c *committer) commit(b *groupBatch) {
	ws := b.writes
	defer func() {
		for _, w := range ws {
			close(w.done)
		}
	}()
	if len(ws) == 1 {
		// Nothing to share a sync with: a batch would only cost more.
		w := ws[0]
		w.rev, w.err = c.single(w.ctx, w.msg)
		return
	}
	last, err := c.publish(ws)
	var rej *batchRejected
	switch {
	case err == nil:
		c.batches.Add(1)
		c.writes.Add(int64(len(ws)))
		for i, w := range ws {
			w.rev = last - uint64(len(ws)-1-i)
		}
	case errors.As(err, &rej), errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrConnectionClosed):
		// Nothing of the batch was stored: each write on its own.
		if rej != nil {
			c.rejected.Add(1)
			if rej.code == codeAtomicDisabled {
				c.offUntil.Store(time.Now().Add(offFor).UnixNano())
			}
		}
		for _, w := range ws {
			w.alone = true
		}
	default:
		for _, w := range ws {
			w.err = err
		}
	}
}

// batchRejected is a batch the server refused whole, storing none of it.
type batchRejected struct {
	code jetstream.ErrorCode
	desc string
}

func (e *batchRejected) Error() string {
	return fmt.Sprintf("atomic batch refused: %s (%d)", e.desc, e.code)
}

// batchAck is the server's answer to a batch's commit.
type batchAck struct {
	Seq   uint64              `json:"seq"`
	Count int                 `json:"count"`
	Error *jetstream.APIError `json:"error"`
}

// publish sends ws as one atomic batch, the last message committing it, and
// returns the stream sequence of the last write. A batch the server refused
// without storing any of it is a *batchRejected.
func (c *committer) publish(ws []*groupWrite) (uint64, error) {
	c.mu.Lock()
	c.ids++
	id := c.idBase + strconv.FormatUint(c.ids, 36)
	c.mu.Unlock()
	var reply *nats.Msg
	for i, w := range ws {
		h := make(nats.Header, len(w.msg.Header)+3)
		for k, v := range w.msg.Header {
			h[k] = v
		}
		h[hdrBatchID] = []string{id}
		h[hdrBatchSeq] = []string{strconv.Itoa(i + 1)}
		m := &nats.Msg{Subject: w.msg.Subject, Header: h, Data: w.msg.Data}
		if i < len(ws)-1 {
			if err := c.nc.PublishMsg(m); err != nil {
				return 0, err
			}
			continue
		}
		h[hdrBatchCommit] = []string{"1"}
		var err error
		if reply, err = c.nc.RequestMsg(m, c.timeout); err != nil {
			return 0, err
		}
	}
	var ack batchAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		return 0, fmt.Errorf("atomic batch: answer %q: %w", reply.Data, err)
	}
	if ack.Error != nil {
		switch code := ack.Error.ErrorCode; code {
		case codeWrongLastSequence, codeWrongLastSequenceConstant, codeAtomicDisabled, codeAtomicMissingSeq,
			codeAtomicIncomplete, codeAtomicHeader, codeAtomicTooLarge, codeAtomicCommit, codeAtomicDuplicate, codeAtomicInflight:
			return 0, &batchRejected{code: code, desc: ack.Error.Description}
		}
		return 0, ack.Error
	}
	if ack.Count != len(ws) {
		return 0, fmt.Errorf("atomic batch of %d writes: the server committed %d", len(ws), ack.Count)
	}
	return ack.Seq, nil
}
