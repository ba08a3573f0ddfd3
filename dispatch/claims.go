package dispatch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tesserix/toolexec/internal/backoff"
	"github.com/tesserix/toolexec/kvstore"
)

// Bounds on withdrawing claims whose grant was lost (see settle).
const (
	// settleLeases is how many leases a settler keeps reading a key back while
	// the store does not answer, before it leaves the claim to run out.
	settleLeases = 10
	// maxSettlers bounds the settlers running at once: in a long outage every
	// failed Claim would start one, and each reads its key about once a second.
	maxSettlers = 1024
	// maxBookKeys bounds the keys the book remembers. Past it no settler starts:
	// claims whose grant was lost then run out, as they would without settlers.
	maxBookKeys = 100_000
)

// claimBook is what this process knows of its own claims, key by key: how many
// of its calls are asking the store for the key, how many hold a lease on it, and
// whether a lease on it ended without its end being written. A settler reads it
// before withdrawing a claim in this process's name, so that a claim one of its
// calls may be running under is never withdrawn.
type claimBook struct {
	mu       sync.Mutex
	keys     map[bookKey]*bookEntry
	settlers int
}

type bookKey struct{ tenant, key string }

type bookEntry struct {
	asking   int  // Claim and TakeOver calls in flight
	held     int  // leases granted and not yet ended
	settlers int  // settlers reading this key back
	tainted  bool // a lease ended without its end (record, mark, release) written
}

// entry returns k's entry, making it. b.mu is held.
func (b *claimBook) entry(k bookKey) *bookEntry {
	e := b.keys[k]
	if e == nil {
		if b.keys == nil {
			b.keys = map[bookKey]*bookEntry{}
		}
		e = &bookEntry{}
		b.keys[k] = e
	}
	return e
}

// forgetIdle drops k's entry if nothing about it is left to know. A tainted
// entry is kept for the life of the process: the claim it names may stay in
// the store, in this holder's name, until somebody takes it over. b.mu is held.
func (b *claimBook) forgetIdle(k bookKey, e *bookEntry) {
	if e.asking == 0 && e.held == 0 && e.settlers == 0 && !e.tainted {
		delete(b.keys, k)
	}
}

// asking notes a Claim or TakeOver of k about to be sent.
func (b *claimBook) asking(k bookKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entry(k).asking++
}

// answered notes the answer to a Claim or TakeOver noted by asking: granted or
// not.
func (b *claimBook) answered(k bookKey, granted bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(k)
	e.asking--
	if granted {
		e.held++
	}
	b.forgetIdle(k, e)
}

// ended notes the end of a lease granted on k: written (recorded, marked,
// released, or found taken over) or not.
func (b *claimBook) ended(k bookKey, written bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entry(k)
	e.held--
	if !written {
		e.tainted = true
	}
	b.forgetIdle(k, e)
}

// startSettling notes a settler for k, or reports false if too many run or the
// book is full.
func (b *claimBook) startSettling(k bookKey) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.settlers >= maxSettlers || len(b.keys) >= maxBookKeys {
		return false
	}
	b.settlers++
	b.entry(k).settlers++
	return true
}

// doneSettling notes the end of a settler started by startSettling.
func (b *claimBook) doneSettling(k bookKey) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.settlers--
	e := b.entry(k)
	e.settlers--
	b.forgetIdle(k, e)
}

// mayWithdraw says whether a claim of k in this process's name may be withdrawn:
// "yes" when no call of this process asks for k, holds it, or ended a lease on
// it without writing its end; "later" when one is asking (its answer will say
// whose the claim is); "never" otherwise.
func (b *claimBook) mayWithdraw(k bookKey) withdrawVerdict {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.keys[k]
	switch {
	case e == nil:
		return withdrawYes
	case e.held > 0 || e.tainted:
		return withdrawNever
	case e.asking > 0:
		return withdrawLater
	}
	return withdrawYes
}

type withdrawVerdict int

const (
	withdrawYes withdrawVerdict = iota
	withdrawLater
	withdrawNever
)

// settleLater starts a settler for a claim of the call whose Claim got no
// answer: the write may have landed. Nothing ran under such a claim; left alone
// it runs out and the key's next call is answered holder_lost although nothing
// happened. Only a Claim's lost answer is settled, never a TakeOver's: a claim
// taken over may have run its body before.
//
// A store that can still tell, before Claim returns, that a write whose
// answer was lost is its own returns it granted, and the call runs: only the
// store can turn a record back into a lease. What is left to settle here is
// what Claim gave up on (an error, the call already answered
// store_unavailable): only the dispatcher knows whether a call of its own may
// run under a claim in its name, and the store may answer again only long
// after the call was answered.
func (r *run) settleLater() {
	w, ok := r.d.store.(kvstore.Withdrawer)
	if !ok {
		return
	}
	k := bookKey{r.call.Tenant, r.key}
	if !r.d.book.startSettling(k) {
		r.d.log.WarnContext(r.logCtx, "a claim whose grant was lost is left to run out: too many to settle", r.logAttrs()...)
		return
	}
	go r.settle(w, k)
}

// settle reads k back until the store answers, and withdraws what it finds if
// it is a claim in this process's name for this call that no call of the
// process may be running under.
func (r *run) settle(w kvstore.Withdrawer, k bookKey) {
	defer r.d.book.doneSettling(k)
	ctx := context.Background()
	giveUp := r.d.clock.Now().Add(settleLeases * r.d.lease)
	for i := 0; ; i++ {
		if i > 0 && r.d.clock.Now().After(giveUp) {
			r.d.log.WarnContext(r.logCtx, "a claim whose grant was lost could not be read back; it is left to run out", r.logAttrs()...)
			return
		}
		backoff.SleepOn(context.Background(), r.d.clock, storeBackoff.Delay(i+1))
		rec, err := r.d.store.Get(ctx, k.tenant, k.key)
		switch {
		case errors.Is(err, kvstore.ErrNotFound):
			return // the claim never landed, or is gone already
		case err != nil:
			continue
		case rec.State != kvstore.StateClaimed || rec.Holder != r.d.holder || rec.CallID != r.call.CallID:
			return // not ours, or no longer a claim
		}
		switch r.d.book.mayWithdraw(k) {
		case withdrawNever:
			return
		case withdrawLater:
			continue
		}
		err = w.Withdraw(ctx, rec, r.d.holder)
		switch {
		case err == nil:
			r.d.stats.Withdrawn.Add(1)
			r.d.log.InfoContext(r.logCtx, "withdrew a claim whose grant was lost; nothing ran under it", r.logAttrs()...)
			return
		case errors.Is(err, kvstore.ErrNotHolder), errors.Is(err, kvstore.ErrNotFound), errors.Is(err, kvstore.ErrInvalid):
			return // it moved on: someone took it over, or it is gone
		}
	}
}

// storeBackoff paces the retries of a store operation that found the store
// away: 50 ms, doubling, at most half a second.
var storeBackoff = backoff.Backoff{Initial: 50 * time.Millisecond, Max: 500 * time.Millisecond}
