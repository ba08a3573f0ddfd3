package kvstoretest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

// checkOutage: for a harness with [Harness.Outages], a store whose server cannot
// be reached answers every operation — Claim, Get, Record, Release,
// MarkIndeterminate, Renew, TakeOver, Wait, Forget, Resolve, and List and
// DumpRaw where it has them — with an error matching kvstore.ErrUnavailable,
// within the suite's patience, and never with a grant, a record or a lease; and
// nothing it was asked to do happens. For such a store an ended context is one
// more way of not reaching the server: a Claim with one answers an error
// matching both kvstore.ErrUnavailable and the context's error, and grants
// nothing.
func checkOutage(e *env) {
	if len(e.outages) == 0 {
		e.t.Logf("note: the harness names no Outages (a store without a server); the store-away checks were skipped")
		return
	}
	// What the store holds when its server goes away: a claim, an
	// indeterminate record and a key never claimed.
	heldReq := e.req(e.digest(), "holder-a", longLease)
	held := e.claim(heldReq)
	heldRec := e.get(heldReq.Key)
	parkedD := e.digest()
	parkedLease := e.claim(e.req(parkedD, "holder-a", longLease))
	if !e.noErr("MarkIndeterminate", e.s.MarkIndeterminate(e.ctx, parkedLease, "body_failed", true)) {
		return
	}
	parkedRec := e.get(parkedD)
	free := e.digest()

	e.claimWithEndedContext(e.digest())

	for _, o := range e.outages {
		if o.Store == nil {
			e.t.Errorf("Outage %q has no Store function", o.Name)
			continue
		}
		s := o.Store()
		if s == nil {
			e.t.Errorf("Outage %q returned a nil store", o.Name)
			continue
		}
		ops := []outageOp{
			{"Claim of a free key", func(ctx context.Context) (string, error) {
				res, err := s.Claim(ctx, e.req(free, "holder-b", longLease))
				return claimAnswer(res), err
			}},
			{"Claim of a held key", func(ctx context.Context) (string, error) {
				res, err := s.Claim(ctx, e.req(heldReq.Key, "holder-b", longLease))
				return claimAnswer(res), err
			}},
			{"Get", func(ctx context.Context) (string, error) {
				r, err := s.Get(ctx, e.tenant, heldReq.Key)
				return recordAnswer(r), err
			}},
			{"Record", func(ctx context.Context) (string, error) {
				return "", s.Record(ctx, held, "outcome while away")
			}},
			{"Release", func(ctx context.Context) (string, error) {
				return "", s.Release(ctx, held)
			}},
			{"MarkIndeterminate", func(ctx context.Context) (string, error) {
				return "", s.MarkIndeterminate(ctx, held, "away", true)
			}},
			{"Renew", func(ctx context.Context) (string, error) {
				l, err := s.Renew(ctx, held, longLease)
				return leaseAnswer(l), err
			}},
			{"TakeOver", func(ctx context.Context) (string, error) {
				l, err := s.TakeOver(ctx, heldRec, e.req(heldReq.Key, "holder-b", longLease))
				return leaseAnswer(l), err
			}},
			{"Wait", func(ctx context.Context) (string, error) {
				r, err := s.Wait(ctx, heldRec)
				return recordAnswer(r), err
			}},
			{"Forget", func(ctx context.Context) (string, error) {
				_, err := s.Forget(ctx, e.tenant)
				return "", err
			}},
			{"Resolve to completed", func(ctx context.Context) (string, error) {
				r, err := s.Resolve(ctx, e.tenant, parkedD, kvstore.Resolution{Outcome: "operator"})
				return recordAnswer(r), err
			}},
			{"Resolve by release", func(ctx context.Context) (string, error) {
				r, err := s.Resolve(ctx, e.tenant, parkedD, kvstore.Resolution{Release: true})
				return recordAnswer(r), err
			}},
		}
		if l, ok := s.(kvstore.Lister); ok {
			ops = append(ops, outageOp{"List", func(ctx context.Context) (string, error) {
				recs, err := l.List(ctx, e.tenant, kvstore.StateIndeterminate, 0)
				return countAnswer(len(recs), "records"), err
			}})
		}
		if w, ok := s.(kvstore.Withdrawer); ok {
			ops = append(ops, outageOp{"Withdraw", func(ctx context.Context) (string, error) {
				return "", w.Withdraw(ctx, heldRec, heldRec.Holder)
			}})
		}
		if d, ok := s.(RawDumper); ok {
			ops = append(ops, outageOp{"DumpRaw", func(ctx context.Context) (string, error) {
				raw, err := d.DumpRaw(ctx, e.tenant)
				return countAnswer(len(raw), "raw records"), err
			}})
		}
		for _, op := range ops {
			e.outageCall(o.Name, op)
		}
	}

	// Nothing the unreachable stores were asked to do happened.
	e.unchanged("operations on a store whose server was out of reach", heldRec)
	e.unchanged("operations on a store whose server was out of reach", parkedRec)
	e.wantGone("after Claims on a store whose server was out of reach", e.tenant, free)
}

// outageOp is one operation on an unreachable store. call returns a description
// of whatever it answered besides the error (a grant, a record, a lease), or ""
// if it answered nothing.
type outageOp struct {
	name string
	call func(ctx context.Context) (answer string, err error)
}

// outageCall runs op and reports it unless it answers, within the suite's
// patience, an error matching kvstore.ErrUnavailable and nothing else. An
// operation that does not answer in time is left running until the subtest
// ends.
func (e *env) outageCall(outage string, op outageOp) {
	e.t.Helper()
	type result struct {
		answer string
		err    error
	}
	ch := make(chan result, 1)
	go func() {
		a, err := op.call(e.ctx)
		ch <- result{a, err}
	}()
	select {
	case r := <-ch:
		if !errors.Is(r.err, kvstore.ErrUnavailable) {
			e.t.Errorf("%s with the server out of reach (%s): error %v, want %v", op.name, outage, r.err, kvstore.ErrUnavailable)
		}
		if r.answer != "" {
			e.t.Errorf("%s with the server out of reach (%s): answered %s; an unreachable store answers nothing but the error", op.name, outage,
				r.answer)
		}
	case <-time.After(e.patience):
		e.t.Errorf("%s with the server out of reach (%s): no answer within %v; it must fail promptly with %v", op.name, outage, e.patience,
			kvstore.ErrUnavailable)
	}
}

// claimWithEndedContext claims digest on the live store with a context already
// cancelled and one past its deadline, and reports anything but an error
// matching kvstore.ErrUnavailable and the context's error, or an answer
// besides. Whether the write happened all the same is not judged: as after a
// timeout, it may have been on its way (pgstore's group commit can hand it to a
// writer before it notices the context).
func (e *env) claimWithEndedContext(digest string) {
	e.t.Helper()
	cancelled, cancel := context.WithCancel(e.ctx)
	cancel()
	expired, cancelExpired := context.WithDeadline(e.ctx, time.Now().Add(-time.Second))
	defer cancelExpired()
	for _, c := range []struct {
		what string
		ctx  context.Context
		want error
	}{
		{"cancelled", cancelled, context.Canceled},
		{"past its deadline", expired, context.DeadlineExceeded},
	} {
		res, err := e.s.Claim(c.ctx, e.req(digest, "holder-b", longLease))
		if !errors.Is(err, kvstore.ErrUnavailable) || !errors.Is(err, c.want) {
			e.t.Errorf("Claim with a context %s: error %v, want one matching both %v and %v", c.what, err, kvstore.ErrUnavailable, c.want)
		}
		if a := claimAnswer(res); a != "" {
			e.t.Errorf("Claim with a context %s: answered %s; an ended context claims nothing", c.what, a)
		}
	}
}

// claimAnswer describes a non-zero ClaimResult, or returns "".
func claimAnswer(res kvstore.ClaimResult) string {
	if res == (kvstore.ClaimResult{}) {
		return ""
	}
	return fmt.Sprintf("Claimed = %t, lease %+v, record %s", res.Claimed, res.Lease, fmtRecord(res.Record))
}

// recordAnswer describes a non-zero Record, or returns "".
func recordAnswer(r kvstore.Record) string {
	if r == (kvstore.Record{}) {
		return ""
	}
	return "record " + fmtRecord(r)
}

// leaseAnswer describes a non-zero Lease, or returns "".
func leaseAnswer(l kvstore.Lease) string {
	if l == (kvstore.Lease{}) {
		return ""
	}
	return fmt.Sprintf("lease %+v", l)
}

// countAnswer describes n things of a kind, or returns "" for none.
func countAnswer(n int, what string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d %s", n, what)
}
