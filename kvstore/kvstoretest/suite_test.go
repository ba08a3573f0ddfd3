package kvstoretest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/clock"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
)

// recorder is a tb that collects failures instead of failing the test, so that a
// check can be run against a broken store and its verdict inspected.
type recorder struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex // protects errs, logs and cleanups
	errs     []string
	logs     []string
	cleanups []func()
}

func newRecorder() *recorder {
	ctx, cancel := context.WithCancel(context.Background())
	return &recorder{ctx: ctx, cancel: cancel}
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// Fatalf records the failure and ends the check's goroutine, as testing does.
func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

func (r *recorder) Cleanup(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cleanups = append(r.cleanups, f)
}

func (r *recorder) Context() context.Context { return r.ctx }

// runCheck runs the named check against h in a recorder and returns the failures
// it reported.
func runCheck(t *testing.T, name string, h Harness) []string {
	t.Helper()
	var c *check
	for i := range checks {
		if checks[i].name == name {
			c = &checks[i]
		}
	}
	if c == nil {
		t.Fatalf("no check named %q", name)
	}
	r := newRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e := newEnv(r, h)
		e.patience = 2 * time.Second // a broken store may never wake a Wait
		c.run(e)
	}()
	<-done
	r.cancel()
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
	return r.errs
}

// fakeHarness returns a memstore on a fake clock, wrapped by wrap if it is not nil.
func fakeHarness(t *testing.T, opts Options, wrap func(kvstore.Store) kvstore.Store) Harness {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := memstore.New(memstore.Config{Clock: fc, Retention: opts.Retention})
	t.Cleanup(func() { s.Close() })
	var st kvstore.Store = s
	if wrap != nil {
		st = wrap(s)
	}
	return Harness{Store: st, Advance: fc.Advance}
}

func optsOf(name string) Options {
	for _, c := range checks {
		if c.name == name {
			return c.opts
		}
	}
	return Options{}
}

// TestChecksPassOnMemstore is the control: every check, run through the recorder
// against the honest reference store, reports nothing. Without it the failures
// below could come from the harness rather than the breakage.
func TestChecksPassOnMemstore(t *testing.T) {
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if errs := runCheck(t, c.name, fakeHarness(t, c.opts, nil)); len(errs) > 0 {
				t.Errorf("check %s failed on memstore:\n%s", c.name, strings.Join(errs, "\n"))
			}
		})
	}
}

// TestSuiteCatchesBrokenStores: each deliberately broken store fails the checks
// that guard the rule it breaks.
func TestSuiteCatchesBrokenStores(t *testing.T) {
	tests := []struct {
		name   string
		wrap   func(kvstore.Store) kvstore.Store
		checks []string // each must report at least one failure
		want   string   // a phrase the failures must contain
	}{
		{
			name:   "grants a taken key",
			wrap:   func(s kvstore.Store) kvstore.Store { return grantsTwice{s} },
			checks: []string{"ClaimExisting", "ConcurrentClaims", "ClaimNeverTakesOver"},
			want:   "granted",
		},
		{
			name:   "claim takes over run-out leases",
			wrap:   func(s kvstore.Store) kvstore.Store { return claimTakesOver{s} },
			checks: []string{"ClaimNeverTakesOver"},
			want:   "granted twice",
		},
		{
			name:   "ignores fencing tokens",
			wrap:   func(s kvstore.Store) kvstore.Store { return &unfenced{Store: s, latest: map[string]kvstore.Lease{}} },
			checks: []string{"FencingAfterTakeOver", "FencingAfterRelease"},
			want:   "want kvstore: lease is not the current holder",
		},
		{
			name:   "renew does nothing",
			wrap:   func(s kvstore.Store) kvstore.Store { return renewNoop{s} },
			checks: []string{"Renew", "TakeOverStaleSeen", "WaitAlreadyChanged"},
			want:   "Renew",
		},
		{
			name:   "take over ignores the revision",
			wrap:   func(s kvstore.Store) kvstore.Store { return takeOverLatest{s} },
			checks: []string{"TakeOverStaleSeen", "TakeOverChangedRecord"},
			want:   "TakeOver",
		},
		{
			name:   "withdraw ignores the revision and the holder",
			wrap:   func(s kvstore.Store) kvstore.Store { return withdrawsLatest{s} },
			checks: []string{"WithdrawChanged", "WithdrawRefused"},
			want:   "Withdraw",
		},
		{
			name:   "wait never reports lease expiry",
			wrap:   func(s kvstore.Store) kvstore.Store { return waitIgnoresExpiry{s} },
			checks: []string{"WaitLeaseExpiry"},
			want:   "the lease ran out",
		},
		{
			name:   "wait returns at once",
			wrap:   func(s kvstore.Store) kvstore.Store { return waitReturnsSeen{s} },
			checks: []string{"WaitRecord", "WaitRelease", "WaitContext"},
			want:   "had not changed",
		},
		{
			name:   "forget ignores the tenant",
			wrap:   func(s kvstore.Store) kvstore.Store { return &forgetsAll{Store: s, tenants: map[string]bool{}} },
			checks: []string{"Forget"},
			want:   "Forget of another tenant",
		},
		{
			name:   "resolve accepts any state",
			wrap:   func(s kvstore.Store) kvstore.Store { return resolvesAnything{s} },
			checks: []string{"ResolveWrongState"},
			want:   "kvstore: record is not indeterminate",
		},
		{
			name:   "records never expire",
			wrap:   func(s kvstore.Store) kvstore.Store { return &immortal{Store: s, kept: map[string]kvstore.Record{}} },
			checks: []string{"Retention"},
			want:   "want ErrNotFound",
		},
		{
			name:   "no input validation",
			wrap:   func(s kvstore.Store) kvstore.Store { return sanitizes{s} },
			checks: []string{"InvalidInput"},
			want:   "kvstore: invalid request",
		},
		{
			name:   "raw dump hides what is stored",
			wrap:   func(s kvstore.Store) kvstore.Store { return emptyDump{s} },
			checks: []string{"NoArguments"},
			want:   "without the digest",
		},
		{
			name:   "list ignores the state",
			wrap:   func(s kvstore.Store) kvstore.Store { return listsEveryState{s} },
			checks: []string{"List"},
			want:   "List(completed)",
		},
		{
			name:   "list ignores the limit and the order",
			wrap:   func(s kvstore.Store) kvstore.Store { return listsUnordered{s} },
			checks: []string{"List"},
			want:   "limit 2",
		},
		{
			name:   "list accepts any tenant and state",
			wrap:   func(s kvstore.Store) kvstore.Store { return listsAnything{s} },
			checks: []string{"List"},
			want:   "kvstore: invalid request",
		},
		{
			name:   "outcome truncated",
			wrap:   func(s kvstore.Store) kvstore.Store { return truncates{s} },
			checks: []string{"OutcomeRoundTrip"},
			want:   "byte for byte",
		},
	}
	for _, tt := range tests {
		for _, name := range tt.checks {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				errs := runCheck(t, name, fakeHarness(t, optsOf(name), tt.wrap))
				if len(errs) == 0 {
					t.Fatalf("check %s passed a store that %s", name, tt.name)
				}
				if all := strings.Join(errs, "\n"); !strings.Contains(all, tt.want) {
					t.Errorf("check %s failed a store that %s, but no failure mentions %q:\n%s", name, tt.name, tt.want, all)
				}
			})
		}
	}
}

// TestRecorderSeesFatal proves the recorder itself: a check that calls Fatalf
// stops there and its failure is kept.
func TestRecorderSeesFatal(t *testing.T) {
	r := newRecorder()
	reached := false
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Fatalf("stop %d", 1)
		reached = true
	}()
	<-done
	if reached || len(r.errs) != 1 || r.errs[0] != "stop 1" {
		t.Errorf("after Fatalf: reached = %t, errs = %q", reached, r.errs)
	}
}

// The broken stores. Each wraps the reference store and breaks one rule.

// grantsTwice answers every claim with Claimed, as a read-then-write store would
// under a race.
type grantsTwice struct{ kvstore.Store }

func (s grantsTwice) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, req)
	if err == nil && !res.Claimed {
		res.Claimed = true
		res.Lease = kvstore.Lease{Tenant: req.Tenant, Key: req.Key, Holder: req.Holder, Token: "forged"}
	}
	return res, err
}

// claimTakesOver hands out stale claims to whoever asks.
type claimTakesOver struct{ kvstore.Store }

func (s claimTakesOver) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, req)
	if err == nil && !res.Claimed && res.Record.LeaseExpired {
		if l, terr := s.Store.TakeOver(ctx, res.Record, req); terr == nil {
			return kvstore.ClaimResult{Claimed: true, Lease: l}, nil
		}
	}
	return res, err
}

// unfenced accepts any lease for a key by substituting the latest one it handed
// out: fencing by holder name, or none at all.
type unfenced struct {
	kvstore.Store
	mu     sync.Mutex // protects latest
	latest map[string]kvstore.Lease
}

func (s *unfenced) remember(l kvstore.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latest[l.Tenant+"/"+l.Key] = l
}

func (s *unfenced) current(l kvstore.Lease) kvstore.Lease {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.latest[l.Tenant+"/"+l.Key]; ok {
		return c
	}
	return l
}

func (s *unfenced) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	res, err := s.Store.Claim(ctx, req)
	if err == nil && res.Claimed {
		s.remember(res.Lease)
	}
	return res, err
}

func (s *unfenced) TakeOver(ctx context.Context, seen kvstore.Record, req kvstore.ClaimRequest) (kvstore.Lease, error) {
	l, err := s.Store.TakeOver(ctx, seen, req)
	if err == nil {
		s.remember(l)
	}
	return l, err
}

func (s *unfenced) Record(ctx context.Context, l kvstore.Lease, out string) error {
	return s.Store.Record(ctx, s.current(l), out)
}

func (s *unfenced) Release(ctx context.Context, l kvstore.Lease) error {
	return s.Store.Release(ctx, s.current(l))
}

func (s *unfenced) MarkIndeterminate(ctx context.Context, l kvstore.Lease, reason string, body bool) error {
	return s.Store.MarkIndeterminate(ctx, s.current(l), reason, body)
}

func (s *unfenced) Renew(ctx context.Context, l kvstore.Lease, d time.Duration) (kvstore.Lease, error) {
	return s.Store.Renew(ctx, s.current(l), d)
}

// renewNoop acknowledges renewals without writing anything.
type renewNoop struct{ kvstore.Store }

func (s renewNoop) Renew(ctx context.Context, l kvstore.Lease, _ time.Duration) (kvstore.Lease, error) {
	if _, err := s.Store.Get(ctx, l.Tenant, l.Key); err != nil {
		return kvstore.Lease{}, err
	}
	return l, nil
}

// takeOverLatest takes over whatever the record is now, not what was seen.
type takeOverLatest struct{ kvstore.Store }

func (s takeOverLatest) TakeOver(ctx context.Context, seen kvstore.Record, req kvstore.ClaimRequest) (kvstore.Lease, error) {
	cur, err := s.Store.Get(ctx, seen.Tenant, seen.Key)
	if err == nil && cur.State == kvstore.StateClaimed {
		seen = cur
	}
	if err == nil && cur.State != kvstore.StateClaimed {
		// Overwrite a finished record with a fresh claim, as a blind write would.
		_, _ = s.Store.Resolve(ctx, seen.Tenant, seen.Key, kvstore.Resolution{Release: true})
		return kvstore.Lease{Tenant: seen.Tenant, Key: seen.Key, Holder: req.Holder, Token: "blind"}, nil
	}
	return s.Store.TakeOver(ctx, seen, req)
}

// withdrawsLatest withdraws whatever claim holds the key now, whoever holds it
// and whatever was seen.
type withdrawsLatest struct{ kvstore.Store }

func (s withdrawsLatest) Withdraw(ctx context.Context, seen kvstore.Record, _ string) error {
	cur, err := s.Store.Get(ctx, seen.Tenant, seen.Key)
	if err != nil {
		return err
	}
	if cur.State != kvstore.StateClaimed {
		_, err := s.Store.Resolve(ctx, seen.Tenant, seen.Key, kvstore.Resolution{Release: true})
		return err
	}
	return s.Store.(kvstore.Withdrawer).Withdraw(ctx, cur, cur.Holder)
}

// waitIgnoresExpiry only wakes on writes.
type waitIgnoresExpiry struct{ kvstore.Store }

func (s waitIgnoresExpiry) Wait(ctx context.Context, seen kvstore.Record) (kvstore.Record, error) {
	for {
		r, err := s.Store.Wait(ctx, seen)
		if err != nil || r.Revision != seen.Revision || r.State != seen.State {
			return r, err
		}
		seen = r // only the lease ran out: keep waiting
	}
}

// waitReturnsSeen returns the current record without waiting.
type waitReturnsSeen struct{ kvstore.Store }

func (s waitReturnsSeen) Wait(ctx context.Context, seen kvstore.Record) (kvstore.Record, error) {
	return s.Store.Get(ctx, seen.Tenant, seen.Key)
}

// forgetsAll forgets every tenant it has seen.
type forgetsAll struct {
	kvstore.Store
	mu      sync.Mutex // protects tenants
	tenants map[string]bool
}

func (s *forgetsAll) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	s.mu.Lock()
	s.tenants[req.Tenant] = true
	s.mu.Unlock()
	return s.Store.Claim(ctx, req)
}

func (s *forgetsAll) Forget(ctx context.Context, tenant string) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total int64
	for t := range s.tenants {
		n, err := s.Store.Forget(ctx, t)
		if err != nil {
			return 0, err
		}
		total += n
	}
	return total, nil
}

// resolvesAnything resolves records in any state.
type resolvesAnything struct{ kvstore.Store }

func (s resolvesAnything) Resolve(ctx context.Context, tenant, digest string, res kvstore.Resolution) (kvstore.Record, error) {
	r, err := s.Store.Resolve(ctx, tenant, digest, res)
	if errors.Is(err, kvstore.ErrNotIndeterminate) {
		return s.Store.Get(ctx, tenant, digest)
	}
	return r, err
}

// immortal keeps serving records after the backend dropped them.
type immortal struct {
	kvstore.Store
	mu   sync.Mutex // protects kept
	kept map[string]kvstore.Record
}

func (s *immortal) Get(ctx context.Context, tenant, digest string) (kvstore.Record, error) {
	r, err := s.Store.Get(ctx, tenant, digest)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.kept[tenant+"/"+digest] = r
		return r, nil
	}
	if k, ok := s.kept[tenant+"/"+digest]; ok && errors.Is(err, kvstore.ErrNotFound) {
		return k, nil
	}
	return r, err
}

// sanitizes repairs malformed tenants and digests instead of refusing them.
type sanitizes struct{ kvstore.Store }

func fixTenant(t string) string {
	var b strings.Builder
	for _, c := range t {
		if c < 128 && (c == '-' || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			b.WriteRune(c)
		}
	}
	s := b.String() + "x"
	if len(s) > 128 {
		s = s[:128]
	}
	return s
}

func (s sanitizes) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	req.Tenant = fixTenant(req.Tenant)
	return s.Store.Claim(ctx, req)
}

func (s sanitizes) Forget(ctx context.Context, tenant string) (int64, error) {
	return s.Store.Forget(ctx, fixTenant(tenant))
}

// emptyDump claims to show its stored bytes but shows nothing.
type emptyDump struct{ kvstore.Store }

func (emptyDump) DumpRaw(context.Context, string) ([][]byte, error) { return nil, nil }

// truncates stores outcomes cut to 1 KiB, as a too-small column would.
type truncates struct{ kvstore.Store }

func (s truncates) Record(ctx context.Context, l kvstore.Lease, out string) error {
	if len(out) > 1024 {
		out = out[:1024]
	}
	return s.Store.Record(ctx, l, out)
}

// listsEveryState lists the tenant's records whatever their state.
type listsEveryState struct{ kvstore.Store }

func (s listsEveryState) List(ctx context.Context, tenant string, _ kvstore.State, limit int) ([]kvstore.Record, error) {
	var all []kvstore.Record
	for _, st := range []kvstore.State{kvstore.StateClaimed, kvstore.StateCompleted, kvstore.StateIndeterminate} {
		recs, err := s.Store.(kvstore.Lister).List(ctx, tenant, st, 0)
		if err != nil {
			return nil, err
		}
		all = append(all, recs...)
	}
	slices.SortFunc(all, kvstore.CompareAge)
	if limit > 0 && len(all) > limit {
		all = all[:limit]
	}
	return all, nil
}

// listsUnordered returns every match, newest first, whatever the limit.
type listsUnordered struct{ kvstore.Store }

func (s listsUnordered) List(ctx context.Context, tenant string, state kvstore.State, _ int) ([]kvstore.Record, error) {
	recs, err := s.Store.(kvstore.Lister).List(ctx, tenant, state, 0)
	slices.Reverse(recs)
	return recs, err
}

// listsAnything answers any tenant and state with an empty list.
type listsAnything struct{ kvstore.Store }

func (s listsAnything) List(ctx context.Context, tenant string, state kvstore.State, limit int) ([]kvstore.Record, error) {
	if !state.Valid() {
		return nil, nil
	}
	recs, err := s.Store.(kvstore.Lister).List(ctx, tenant, state, limit)
	if errors.Is(err, kvstore.ErrInvalid) {
		return nil, nil
	}
	return recs, err
}

// outageHarness returns the fake harness with one Outage, whose store away makes
// from the live store (nil: a closed memstore, the honest unreachable store).
// Unless raw, the live store answers a Claim with an ended context as a store
// with a server does: ErrUnavailable wrapping the context's error.
func outageHarness(t *testing.T, raw bool, away func(live kvstore.Store) kvstore.Store) Harness {
	h := fakeHarness(t, Options{}, nil)
	if !raw {
		h.Store = endedCtxUnavailable{h.Store}
	}
	live := h.Store
	h.Outages = []Outage{{Name: "closed memstore", Store: func() kvstore.Store {
		if away != nil {
			return away(live)
		}
		return closedMemstore(t)
	}}}
	return h
}

func closedMemstore(t *testing.T) kvstore.Store {
	s := memstore.New(memstore.Config{})
	s.Close()
	return s
}

// TestOutageCheck: the Outage check passes an unreachable store that answers
// ErrUnavailable to everything, skips a harness without Outages, and fails each
// way of misbehaving while the server is away.
func TestOutageCheck(t *testing.T) {
	t.Run("honest", func(t *testing.T) {
		t.Parallel()
		if errs := runCheck(t, "Outage", outageHarness(t, false, nil)); len(errs) > 0 {
			t.Errorf("the Outage check failed an honest store:\n%s", strings.Join(errs, "\n"))
		}
	})
	t.Run("no outages", func(t *testing.T) {
		t.Parallel()
		if errs := runCheck(t, "Outage", fakeHarness(t, Options{}, nil)); len(errs) > 0 {
			t.Errorf("the Outage check failed a harness without Outages:\n%s", strings.Join(errs, "\n"))
		}
	})
	tests := []struct {
		name string
		raw  bool
		away func(live kvstore.Store) kvstore.Store
		want string // a phrase the failures must contain
	}{
		{
			name: "reads as absent",
			away: func(kvstore.Store) kvstore.Store { return getsNothing{closedMemstore(t)} },
			want: "Get with the server out of reach (closed memstore): error kvstore: record not found",
		},
		{
			name: "grants claims",
			away: func(kvstore.Store) kvstore.Store { return grantsBlind{closedMemstore(t)} },
			want: "answered Claimed = true",
		},
		{
			name: "waits forever",
			away: func(kvstore.Store) kvstore.Store { return waitsForever{closedMemstore(t)} },
			want: "Wait with the server out of reach (closed memstore): no answer within",
		},
		{
			name: "writes behind the error",
			away: func(live kvstore.Store) kvstore.Store { return recordsThenFails{closedMemstore(t), live} },
			want: "changed the record",
		},
		{
			name: "an ended context is no outage",
			raw:  true,
			want: "Claim with a context cancelled",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := runCheck(t, "Outage", outageHarness(t, tt.raw, tt.away))
			if len(errs) == 0 {
				t.Fatalf("the Outage check passed a store that %s", tt.name)
			}
			if all := strings.Join(errs, "\n"); !strings.Contains(all, tt.want) {
				t.Errorf("the Outage check failed a store that %s, but no failure mentions %q:\n%s", tt.name, tt.want, all)
			}
		})
	}
}

// endedCtxUnavailable answers a Claim with an ended context with ErrUnavailable
// wrapping the context's error, as the stores with a server do.
type endedCtxUnavailable struct{ kvstore.Store }

func (s endedCtxUnavailable) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	if err := ctx.Err(); err != nil {
		return kvstore.ClaimResult{}, fmt.Errorf("%w: %w", kvstore.ErrUnavailable, err)
	}
	return s.Store.Claim(ctx, req)
}

// getsNothing, unreachable, reads every key as absent.
type getsNothing struct{ kvstore.Store }

func (getsNothing) Get(context.Context, string, string) (kvstore.Record, error) {
	return kvstore.Record{}, kvstore.ErrNotFound
}

// grantsBlind, unreachable, grants every claim.
type grantsBlind struct{ kvstore.Store }

func (grantsBlind) Claim(_ context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	return kvstore.ClaimResult{Claimed: true, Lease: kvstore.Lease{Tenant: req.Tenant, Key: req.Key, Holder: req.Holder, Token: "blind"}}, nil
}

// waitsForever, unreachable, blocks every Wait until its context ends.
type waitsForever struct{ kvstore.Store }

func (waitsForever) Wait(ctx context.Context, _ kvstore.Record) (kvstore.Record, error) {
	<-ctx.Done()
	return kvstore.Record{}, ctx.Err()
}

// recordsThenFails, unreachable, still records through the live store, then
// answers ErrUnavailable.
type recordsThenFails struct {
	kvstore.Store
	live kvstore.Store
}

func (s recordsThenFails) Record(ctx context.Context, l kvstore.Lease, out string) error {
	if err := s.live.Record(ctx, l, out); err != nil {
		return err
	}
	return fmt.Errorf("lost the answer: %w", kvstore.ErrUnavailable)
}
