package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tesserix/toolexec/internal/buildinfo"
)

// BuildInfo registers toolexec_build_info{version,revision,goversion}, always
// 1, naming the build that runs.
func BuildInfo(reg prometheus.Registerer, info buildinfo.Info) error {
	rev := info.Revision
	if info.Modified && rev != "" {
		rev += "-modified"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help:        "The build that runs: module version, VCS revision and Go release, as labels; always 1.",
		ConstLabels: prometheus.Labels{"version": info.Version, "revision": rev, "goversion": info.GoVersion},
	})
	g.Set(1)
	return reg.Register(g)
}

// Ready registers toolexec_ready: 1 while ready says the executor is ready
// (what /readyz answers 200 for), 0 otherwise. ready is asked at each scrape,
// with the scrape's patience bounded by timeout.
func Ready(reg prometheus.Registerer, timeout time.Duration, ready func(context.Context) bool) error {
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "ready",
		Help: "1 while the executor is ready (NATS connected, the store answering, calls being taken), as /readyz says; 0 otherwise.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if ready(ctx) {
			return 1
		}
		return 0
	}))
}

// ConsumerStats is what the shared JetStream consumer says of its backlog.
type ConsumerStats struct {
	// Pending is the calls in the stream not yet delivered to any executor.
	Pending uint64
	// AckPending is the calls delivered and not yet acknowledged.
	AckPending uint64
	// Redelivered is the calls delivered more than once and not yet
	// acknowledged.
	Redelivered uint64
}

// consumerCollector asks for the consumer's state at each scrape.
type consumerCollector struct {
	stats                            func(context.Context) (ConsumerStats, error)
	timeout                          time.Duration
	pending, ackPending, redelivered *prometheus.Desc
	errors                           prometheus.Counter
}

// Consumer registers the shared consumer's backlog, read through stats at
// each scrape (one JetStream API request, bounded by timeout):
//
//	toolexec_consumer_pending_messages        calls waiting to be delivered: the lag
//	toolexec_consumer_ack_pending_messages    calls delivered, not yet acknowledged
//	toolexec_consumer_redelivered_messages    of those, calls delivered more than once
//	toolexec_consumer_info_errors_total       scrapes that could not read them
//
// Every executor shares the consumer and reports the same numbers: take max
// over executors, not sum. A scrape that cannot read them omits the three
// gauges and counts an error.
func Consumer(reg prometheus.Registerer, timeout time.Duration, stats func(context.Context) (ConsumerStats, error)) error {
	name := func(s string) string { return prometheus.BuildFQName(Namespace, "consumer", s) }
	c := &consumerCollector{
		stats: stats, timeout: timeout,
		pending: prometheus.NewDesc(name("pending_messages"),
			"Calls in the calls stream not yet delivered to any executor (the shared consumer's lag; the same on every executor: take max).", nil,
			nil),
		ackPending: prometheus.NewDesc(name("ack_pending_messages"),
			"Calls delivered to executors and not yet acknowledged.", nil, nil),
		redelivered: prometheus.NewDesc(name("redelivered_messages"),
			"Calls delivered more than once and not yet acknowledged.", nil, nil),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "consumer_info_errors_total",
			Help: "Scrapes that could not read the shared consumer's state."}),
	}
	return reg.Register(c)
}

func (c *consumerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.pending
	ch <- c.ackPending
	ch <- c.redelivered
	c.errors.Describe(ch)
}

func (c *consumerCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	st, err := c.stats(ctx)
	if err != nil {
		c.errors.Inc()
	} else {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(st.Pending))
		ch <- prometheus.MustNewConstMetric(c.ackPending, prometheus.GaugeValue, float64(st.AckPending))
		ch <- prometheus.MustNewConstMetric(c.redelivered, prometheus.GaugeValue, float64(st.Redelivered))
	}
	c.errors.Collect(ch)
}
