package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tesserix/toolexec/kvstore"
)

// Store operation label values.
const (
	OpClaim             = "claim"
	OpGet               = "get"
	OpRecord            = "record"
	OpRelease           = "release"
	OpMarkIndeterminate = "mark_indeterminate"
	OpRenew             = "renew"
	OpTakeOver          = "take_over"
	OpWithdraw          = "withdraw"
	OpWait              = "wait"
	OpForget            = "forget"
	OpResolve           = "resolve"
	OpList              = "list"
)

// Store wraps s so that every operation is timed in
// toolexec_store_operation_duration_seconds and every failure counted in
// toolexec_store_errors_total, labelled with name (jetstream, postgres, redis,
// memory) and the operation. The store's answers — not found, not holder,
// lease held, not indeterminate — and a caller's cancelled context are not
// failures. The wrapper implements kvstore.Lister and kvstore.Withdrawer when s
// does. Closing it closes s.
func (m *Metrics) Store(s kvstore.Store, name string) kvstore.Store {
	is := &instrumented{s: s, m: m, name: name}
	l, lists := s.(kvstore.Lister)
	w, withdraws := s.(kvstore.Withdrawer)
	switch {
	case lists && withdraws:
		return &instrumentedListerWithdrawer{instrumentedLister: instrumentedLister{instrumented: is, l: l}, w: w}
	case lists:
		return &instrumentedLister{instrumented: is, l: l}
	case withdraws:
		return &instrumentedWithdrawer{instrumented: is, w: w}
	}
	return is
}

// instrumented times the operations of s.
type instrumented struct {
	s    kvstore.Store
	m    *Metrics
	name string
}

// instrumentedLister is instrumented with List.
type instrumentedLister struct {
	*instrumented
	l kvstore.Lister
}

// instrumentedWithdrawer is instrumented with Withdraw.
type instrumentedWithdrawer struct {
	*instrumented
	w kvstore.Withdrawer
}

// instrumentedListerWithdrawer is instrumented with List and Withdraw.
type instrumentedListerWithdrawer struct {
	instrumentedLister
	w kvstore.Withdrawer
}

var (
	_ kvstore.Store      = (*instrumented)(nil)
	_ kvstore.Lister     = (*instrumentedLister)(nil)
	_ kvstore.Withdrawer = (*instrumentedWithdrawer)(nil)
	_ kvstore.Lister     = (*instrumentedListerWithdrawer)(nil)
	_ kvstore.Withdrawer = (*instrumentedListerWithdrawer)(nil)
)

// observe records one operation that started at start and ended with err.
func (s *instrumented) observe(op string, start time.Time, err error) {
	s.m.storeDuration.WithLabelValues(s.name, op).Observe(time.Since(start).Seconds())
	if class := errorClass(err); class != "" {
		s.m.storeErrors.WithLabelValues(s.name, op, class).Inc()
	}
}

// errorClass names a store failure for the error label, or returns "" for no
// failure: nil, one of the store's answers, or a caller that gave up.
func errorClass(err error) string {
	switch {
	case err == nil,
		errors.Is(err, kvstore.ErrNotFound), errors.Is(err, kvstore.ErrNotHolder),
		errors.Is(err, kvstore.ErrLeaseHeld), errors.Is(err, kvstore.ErrNotIndeterminate),
		errors.Is(err, context.Canceled):
		return ""
	case errors.Is(err, kvstore.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return "unavailable"
	case errors.Is(err, kvstore.ErrInvalid):
		return "invalid"
	case errors.Is(err, kvstore.ErrTooLarge):
		return "too_large"
	}
	return Other
}

func (s *instrumented) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	start := time.Now()
	res, err := s.s.Claim(ctx, req)
	s.observe(OpClaim, start, err)
	return res, err
}

func (s *instrumented) Get(ctx context.Context, tenant, digest string) (kvstore.Record, error) {
	start := time.Now()
	r, err := s.s.Get(ctx, tenant, digest)
	s.observe(OpGet, start, err)
	return r, err
}

func (s *instrumented) Record(ctx context.Context, lease kvstore.Lease, outcome string) error {
	start := time.Now()
	err := s.s.Record(ctx, lease, outcome)
	s.observe(OpRecord, start, err)
	return err
}

func (s *instrumented) Release(ctx context.Context, lease kvstore.Lease) error {
	start := time.Now()
	err := s.s.Release(ctx, lease)
	s.observe(OpRelease, start, err)
	return err
}

func (s *instrumented) MarkIndeterminate(ctx context.Context, lease kvstore.Lease, reason string, bodyEntered bool) error {
	start := time.Now()
	err := s.s.MarkIndeterminate(ctx, lease, reason, bodyEntered)
	s.observe(OpMarkIndeterminate, start, err)
	return err
}

func (s *instrumented) Renew(ctx context.Context, lease kvstore.Lease, d time.Duration) (kvstore.Lease, error) {
	start := time.Now()
	l, err := s.s.Renew(ctx, lease, d)
	s.observe(OpRenew, start, err)
	return l, err
}

func (s *instrumented) TakeOver(ctx context.Context, seen kvstore.Record, req kvstore.ClaimRequest) (kvstore.Lease, error) {
	start := time.Now()
	l, err := s.s.TakeOver(ctx, seen, req)
	s.observe(OpTakeOver, start, err)
	return l, err
}

func (s *instrumented) Wait(ctx context.Context, seen kvstore.Record) (kvstore.Record, error) {
	start := time.Now()
	r, err := s.s.Wait(ctx, seen)
	s.observe(OpWait, start, err)
	return r, err
}

func (s *instrumented) Forget(ctx context.Context, tenant string) (int64, error) {
	start := time.Now()
	n, err := s.s.Forget(ctx, tenant)
	s.observe(OpForget, start, err)
	return n, err
}

func (s *instrumented) Resolve(ctx context.Context, tenant, digest string, res kvstore.Resolution) (kvstore.Record, error) {
	start := time.Now()
	r, err := s.s.Resolve(ctx, tenant, digest, res)
	s.observe(OpResolve, start, err)
	return r, err
}

func (s *instrumented) Close() error { return s.s.Close() }

func (s *instrumentedLister) List(ctx context.Context, tenant string, state kvstore.State, limit int) ([]kvstore.Record, error) {
	start := time.Now()
	recs, err := s.l.List(ctx, tenant, state, limit)
	s.observe(OpList, start, err)
	return recs, err
}

// GroupCommits exports the group commits of a store that writes concurrent
// operations together (pgstore), read from stats at each scrape:
// toolexec_store_group_commits_total (transactions of two writes or more),
// toolexec_store_group_commit_writes_total (the writes they carried) and
// toolexec_store_group_commits_refused_total (those the store refused, whose
// writes then went one by one), labelled with the store's name. Writes over
// group commits is the average batch.
func GroupCommits(reg prometheus.Registerer, store string, stats func() (batches, writes, refused int64)) error {
	for _, c := range []struct {
		name, help string
		pick       func(b, w, r int64) int64
	}{
		{"store_group_commits_total", "Transactions (or batches) of two store writes or more, by store.", func(b, _, _ int64) int64 { return b }},
		{"store_group_commit_writes_total", "Store writes carried by group commits, by store.", func(_, w, _ int64) int64 { return w }},
		{"store_group_commits_refused_total", "Group commits the store refused, whose writes were then made one by one, by store.",
			func(_, _, r int64) int64 { return r }},
	} {
		f := prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: Namespace, Name: c.name, Help: c.help, ConstLabels: prometheus.Labels{"store": store},
		}, func() float64 { return float64(c.pick(stats())) })
		if err := reg.Register(f); err != nil {
			return err
		}
	}
	return nil
}

func (s *instrumentedWithdrawer) Withdraw(ctx context.Context, seen kvstore.Record, holder string) error {
	return s.withdraw(ctx, s.w, seen, holder)
}

func (s *instrumentedListerWithdrawer) Withdraw(ctx context.Context, seen kvstore.Record, holder string) error {
	return s.withdraw(ctx, s.w, seen, holder)
}

func (s *instrumented) withdraw(ctx context.Context, w kvstore.Withdrawer, seen kvstore.Record, holder string) error {
	start := time.Now()
	err := w.Withdraw(ctx, seen, holder)
	s.observe(OpWithdraw, start, err)
	return err
}
