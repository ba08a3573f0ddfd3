package metrics

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tesserix/toolexec/kvstore"
)

// OpCount is the operation label of the census behind the awaiting gauge.
const OpCount = "count"

// OtherTenants is the tenant label that sums the tenants past
// AwaitingConfig.MaxTenants.
const OtherTenants = "(other)"

// Defaults of [AwaitingConfig].
const (
	DefaultAwaitingInterval   = time.Minute
	DefaultAwaitingMaxTenants = 100
	// DefaultAwaitingTimeout is how long one count may take before it is
	// cut off; Refresh then returns the count's error, and the gauges keep
	// their last numbers.
	DefaultAwaitingTimeout = 10 * time.Minute
)

// awaitingDuty bounds the share of time Run spends counting: after a count
// that took d, the next starts no sooner than d/awaitingDuty after it began.
// A store whose count takes 30 s is thus counted every 10 minutes (give or
// take awaitingJitter) rather than every minute, by each executor.
const awaitingDuty = 0.05

// awaitingJitter spreads the executors' counts over ±10 % of the wait, so
// that executors started together do not read the store all at once.
const awaitingJitter = 0.1

// AwaitingConfig configures [Metrics.Awaiting].
type AwaitingConfig struct {
	// Census counts the store's indeterminate records (required).
	Census kvstore.Census
	// Store names the store in the store_* series (jetstream, postgres, ...).
	Store string
	// Interval is the time between the starts of two refreshes in Run;
	// default DefaultAwaitingInterval. Run stretches it where a refresh is
	// slow, so that counting takes at most a twentieth of the time, and
	// spreads it by ±10 %.
	Interval time.Duration
	// Timeout cuts off a refresh that takes longer; default
	// DefaultAwaitingTimeout.
	Timeout time.Duration
	// MaxTenants bounds the tenant series: the tenants with the most keys
	// waiting keep their own, the others are summed under OtherTenants.
	// Default DefaultAwaitingMaxTenants.
	MaxTenants int
	// Logger reports failed refreshes (the first, then one when it recovers);
	// nil discards.
	Logger *slog.Logger
}

// Awaiting exports the keys that wait for an operator's decision —
// indeterminate records not yet resolved — as the store counts them, per
// tenant:
//
//	toolexec_keys_awaiting_decision{tenant}                   keys waiting
//	toolexec_keys_awaiting_decision_oldest_timestamp_seconds{tenant}  when the longest-waiting one became indeterminate
//	toolexec_keys_awaiting_decision_refreshed_timestamp_seconds       the last refresh that succeeded (0: none yet)
//
// A tenant with no key waiting has no series. The numbers are the store's,
// not this executor's: every executor on one store reports the same (each as
// of its last refresh), so dashboards and alerts take max over executors,
// never sum. A failed refresh keeps the last numbers and is counted in
// toolexec_store_errors_total{operation="count"}; the refreshed timestamp
// then stops moving.
type Awaiting struct {
	cfg AwaitingConfig
	m   *Metrics

	count, oldest, refreshed *prometheus.Desc

	mu     sync.Mutex // protects the fields below
	counts map[string]kvstore.TenantCount
	at     time.Time // the last successful refresh
	failed bool      // the last refresh failed
}

// Awaiting creates the awaiting gauges and registers them with reg. Call
// [Awaiting.Run] (or Refresh) to fill them.
func (m *Metrics) Awaiting(reg prometheus.Registerer, cfg AwaitingConfig) (*Awaiting, error) {
	if cfg.Census == nil {
		return nil, errors.New("metrics: Awaiting needs a store that implements kvstore.Census")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultAwaitingInterval
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultAwaitingTimeout
	}
	if cfg.MaxTenants <= 0 {
		cfg.MaxTenants = DefaultAwaitingMaxTenants
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	name := func(s string) string { return prometheus.BuildFQName(Namespace, "", s) }
	a := &Awaiting{
		cfg: cfg, m: m,
		count: prometheus.NewDesc(name("keys_awaiting_decision"),
			"Keys whose outcome is indeterminate and that wait for an operator's decision, by tenant, as the store counts them (every executor "+
				"reports the store's number: take max over executors, not sum).",
			[]string{"tenant"}, nil),
		oldest: prometheus.NewDesc(name("keys_awaiting_decision_oldest_timestamp_seconds"),
			"When the longest-waiting key of the tenant became indeterminate (its record's last write), as a Unix time.",
			[]string{"tenant"}, nil),
		refreshed: prometheus.NewDesc(name("keys_awaiting_decision_refreshed_timestamp_seconds"),
			"When the keys awaiting decision were last counted successfully, as a Unix time; 0 before the first count.",
			nil, nil),
	}
	if err := reg.Register(a); err != nil {
		return nil, err
	}
	return a, nil
}

// Describe implements prometheus.Collector.
func (a *Awaiting) Describe(ch chan<- *prometheus.Desc) {
	ch <- a.count
	ch <- a.oldest
	ch <- a.refreshed
}

// Collect implements prometheus.Collector: the numbers of the last refresh.
func (a *Awaiting) Collect(ch chan<- prometheus.Metric) {
	a.mu.Lock()
	counts, at := a.counts, a.at
	a.mu.Unlock()
	for tenant, c := range counts {
		ch <- prometheus.MustNewConstMetric(a.count, prometheus.GaugeValue, float64(c.Records), tenant)
		ch <- prometheus.MustNewConstMetric(a.oldest, prometheus.GaugeValue, unixSeconds(c.Oldest), tenant)
	}
	var refreshed float64
	if !at.IsZero() {
		refreshed = unixSeconds(at)
	}
	ch <- prometheus.MustNewConstMetric(a.refreshed, prometheus.GaugeValue, refreshed)
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// Refresh counts the store's indeterminate records now, within the timeout,
// and keeps the numbers for the next scrapes. On failure it keeps the last
// numbers and returns the error.
func (a *Awaiting) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.cfg.Timeout)
	defer cancel()
	start := time.Now()
	counts, err := a.cfg.Census.Count(ctx, kvstore.StateIndeterminate)
	a.m.storeDuration.WithLabelValues(a.cfg.Store, OpCount).Observe(time.Since(start).Seconds())
	if class := errorClass(err); class != "" {
		a.m.storeErrors.WithLabelValues(a.cfg.Store, OpCount, class).Inc()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		if !a.failed {
			a.cfg.Logger.Warn("counting the keys awaiting decision failed; the gauge keeps its last value", "error", err)
		}
		a.failed = true
		return err
	}
	if a.failed {
		a.cfg.Logger.Info("counting the keys awaiting decision works again")
	}
	a.failed = false
	a.counts = bound(counts, a.cfg.MaxTenants)
	a.at = time.Now()
	return nil
}

// bound keeps the max tenants with the most records (ties: by name) and sums
// the others under OtherTenants.
func bound(counts map[string]kvstore.TenantCount, maxTenants int) map[string]kvstore.TenantCount {
	if len(counts) <= maxTenants {
		return counts
	}
	tenants := make([]string, 0, len(counts))
	for t := range counts {
		tenants = append(tenants, t)
	}
	slices.SortFunc(tenants, func(x, y string) int {
		if c := cmp.Compare(counts[y].Records, counts[x].Records); c != 0 {
			return c
		}
		return cmp.Compare(x, y)
	})
	out := make(map[string]kvstore.TenantCount, maxTenants+1)
	var other kvstore.TenantCount
	for i, t := range tenants {
		c := counts[t]
		if i < maxTenants {
			out[t] = c
			continue
		}
		other.Records += c.Records
		if other.Oldest.IsZero() || c.Oldest.Before(other.Oldest) {
			other.Oldest = c.Oldest
		}
	}
	out[OtherTenants] = other
	return out
}

// Run refreshes at once and then about every interval until ctx ends: a
// slow refresh stretches the wait (see [AwaitingConfig.Interval]).
func (a *Awaiting) Run(ctx context.Context) {
	for {
		start := time.Now()
		_ = a.Refresh(ctx) // logged and counted by Refresh
		wait := nextCount(a.cfg.Interval, time.Since(start), rand.Float64()) - time.Since(start)
		select {
		case <-ctx.Done():
			return
		case <-time.After(max(wait, 0)):
		}
	}
}

// nextCount is how long after a refresh began, one that took took, the next
// begins: interval, or took/awaitingDuty when that is longer, scaled by a
// jitter factor of 1±awaitingJitter that r (in [0, 1)) picks.
func nextCount(interval, took time.Duration, r float64) time.Duration {
	base := max(interval, time.Duration(float64(took)/awaitingDuty))
	return time.Duration(float64(base) * (1 - awaitingJitter + 2*awaitingJitter*r))
}
