package faults_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/dbproc"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
	"github.com/tesserix/toolexec/tests/faults"
)

// outage is one way of taking a store away from some executors, and back.
type outage struct {
	name      string
	executors []string // cut off from the store; nil: all of them
	inject    func(t *testing.T)
	repair    func(t *testing.T)
}

// runStoreAway runs three executors (x0, x1, x2; flags(i) are executor i's
// own flags) under load and applies each outage in turn, for down each, a
// third of the way and two thirds of the way through. The checker holds every
// Effectful effect that arrived from a cut-off executor while its store was
// away (past the settle time) as a violation; the figures count the effects
// that arrived during outages from the others.
func runStoreAway(t *testing.T, s *scenario, flags func(i int) []string, outages []outage) {
	t.Helper()
	ctx := ctxFor(t, pick(3*time.Minute, 10*time.Minute))
	keys, perKey, rate := pick(200, 2000), 4, pick(150, 200)
	down := pick(time.Second, 3*time.Second)
	names := []string{"x0", "x1", "x2"}
	for i, name := range names {
		s.executor(name, append([]string{"--concurrency", "16"}, flags(i)...)...)
	}
	s.step("3 executors ready")

	calls := plan("s", keys, perKey)
	s.pub.Rate = rate
	done := s.publish(ctx, calls)
	for i, o := range outages {
		s.waitPublished(ctx, len(calls)*(i+1)/(len(outages)+1))
		s.step("%s after %d calls", o.name, s.pub.Published())
		f := s.rec.Outage(faults.Fault{Name: o.name, StoreAway: true, Executors: o.executors, Holders: o.executors},
			func() { o.inject(t) }, down, func() { o.repair(t) })
		s.step("repaired; away for sure for %v", f.AwayUntil.Sub(f.AwayFrom).Round(time.Millisecond))
	}
	s.finishPublished(ctx, done, len(calls))

	// What ran while the store was certainly away, and from whom.
	var early, unguarded, others int
	for _, f := range s.rec.Faults() {
		for _, e := range s.witness.Effects() {
			if e.At.Before(f.AwayFrom) || e.At.After(f.AwayUntil) {
				continue
			}
			switch {
			case len(f.Executors) > 0 && !slices.Contains(f.Executors, e.Executor):
				others++
			case e.Tool == toolSeat:
				unguarded++
			default:
				early++ // the checker fails the test for any past the settle time
			}
		}
	}
	s.step("while the store was away: bookings from cut-off executors %d (all within %v of the outage's start: claims granted before it), "+
		"seat changes run (Idempotent: without a claim while the store is away) %d, effects from executors that could still reach it %d", early, faults.DefaultSettle, unguarded, others)

	// How long after each repair store_unavailable answers kept coming.
	var unavailable int
	lag := time.Duration(math.MinInt64)
	for _, a := range s.answers {
		if a.Reason != events.ReasonStoreUnavailable {
			continue
		}
		unavailable++
		last := faults.Fault{End: s.start} // before any fault: lag from the start
		for _, f := range s.rec.Faults() {
			if !f.Start.After(a.Stored) {
				last = f
			}
		}
		lag = max(lag, a.Stored.Sub(last.End))
	}
	if unavailable > 0 {
		s.step("store_unavailable answers: %d, the last stored %v after its outage was repaired", unavailable, lag.Round(time.Millisecond))
	}
}

// TestStoreAwayJetStream partitions two of three executors from NATS — which
// is their store, their calls and their answers at once — through a TCP
// proxy: first a black hole (bytes vanish, nothing is closed), then a cut
// (every connection reset). The third executor, connected directly, carries
// on: it takes the redelivered calls over, and the keys the cut-off executors
// held become holder_lost (bookings) or are run again (seat changes) once
// their leases run out by the server's clock.
func TestStoreAwayJetStream(t *testing.T) {
	parallel(t)
	srv := natstest.Start(t, natstest.SyncAlways())
	proxy := tcpproxy.Start(t, srv.Addr().String())
	s := newScenario(t, "store-away-jetstream", srv.ClientURL(), 1)
	cut := []string{"x0", "x1"}
	runStoreAway(t, s, func(i int) []string {
		if i < len(cut) {
			return []string{"--nats-url", "nats://" + proxy.Addr()}
		}
		return nil
	}, []outage{
		{name: "NATS black-holed for x0 and x1", executors: cut,
			inject: func(*testing.T) { proxy.Blackhole() }, repair: func(*testing.T) { proxy.Restore() }},
		{name: "NATS cut off from x0 and x1", executors: cut,
			inject: func(*testing.T) { proxy.Cut() }, repair: func(*testing.T) { proxy.Restore() }},
	})
}

// TestStoreAwayPostgres runs the executors on PostgreSQL (a server of the
// test's own, reached through a TCP proxy), then black-holes the proxy, and
// later stops the server outright and starts it again.
func TestStoreAwayPostgres(t *testing.T) {
	parallel(t)
	pg := dbproc.StartPostgres(t)
	proxy := tcpproxy.Start(t, pg.Addr())
	srv := natstest.Start(t, natstest.SyncAlways())
	s := newScenario(t, "store-away-postgres", srv.ClientURL(), 1)
	url := pg.URLVia(proxy.Addr())
	schema := dbproc.FreshSchema(t, pg.URL())
	runStoreAway(t, s, func(i int) []string {
		f := []string{"--store", "postgres", "--postgres-url", url, "--postgres-schema", schema}
		if i == 0 {
			f = append(f, "--ensure-schema")
		}
		return f
	}, []outage{
		{name: "PostgreSQL black-holed",
			inject: func(*testing.T) { proxy.Blackhole() }, repair: func(*testing.T) { proxy.Restore() }},
		{name: "PostgreSQL stopped",
			inject: func(t *testing.T) { pg.Stop(t) }, repair: func(t *testing.T) { pg.Start(t) }},
	})
}

// TestStoreAwayRedis runs the executors on Redis (a server of the test's own,
// append-only file synced on every write, reached through a TCP proxy), then
// black-holes the proxy, and later stops the server and starts it again.
func TestStoreAwayRedis(t *testing.T) {
	parallel(t)
	rd := dbproc.StartRedis(t)
	proxy := tcpproxy.Start(t, rd.Addr())
	srv := natstest.Start(t, natstest.SyncAlways())
	s := newScenario(t, "store-away-redis", srv.ClientURL(), 1)
	// Timeouts long enough that only the injected faults trip them on a busy
	// machine (go-redis's defaults: 5s to dial, 3s to read or write).
	url := rd.URLVia(proxy.Addr()) + "?dial_timeout=10s&read_timeout=10s&write_timeout=10s"
	prefix := fmt.Sprintf("faults-%d", time.Now().UnixNano())
	runStoreAway(t, s, func(int) []string {
		return []string{"--store", "redis", "--redis-url", url, "--redis-prefix", prefix}
	}, []outage{
		{name: "Redis black-holed",
			inject: func(*testing.T) { proxy.Blackhole() }, repair: func(*testing.T) { proxy.Restore() }},
		{name: "Redis stopped",
			inject: func(t *testing.T) { rd.Stop(t) }, repair: func(t *testing.T) { rd.Start(t) }},
	})
}
