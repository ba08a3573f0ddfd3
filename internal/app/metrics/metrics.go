package metrics

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool/workerset"
)

// Namespace prefixes every metric name.
const Namespace = "toolexec"

// Label values for what has no name of its own.
const (
	UnknownTool = "(unknown)"     // a call naming no registered tool
	NoAnswer    = "no_answer"     // kind of a call handed back without an answer
	Unanswered  = "unaddressable" // code of a message terminated unanswered
	Other       = "other"         // a reason or code outside the known sets
)

// durationBuckets suit calls and store operations: from half a millisecond to
// a minute (a wait for a holder lasts up to a lease).
var durationBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Metrics holds toolexec's collectors. Create it with [New]; it is safe for
// concurrent use.
type Metrics struct {
	calls        *prometheus.CounterVec
	callDuration *prometheus.HistogramVec
	inFlight     *prometheus.GaugeVec
	bodies       *prometheus.CounterVec
	deduplicated *prometheus.CounterVec
	indetermin   *prometheus.CounterVec
	unguarded    *prometheus.CounterVec
	holderWait   *prometheus.HistogramVec

	storeDuration *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec

	received    prometheus.Counter
	redelivered prometheus.Counter
	rejected    *prometheus.CounterVec
	handedBack  prometheus.Counter
	pubRetries  prometheus.Counter

	workers          prometheus.Gauge
	workerTools      prometheus.Gauge
	workerConflicts  prometheus.Gauge
	workerRefused    prometheus.Gauge
	conflictsBegun   prometheus.Counter
	extraReplies     *prometheus.CounterVec
	discoveryFailure prometheus.Counter
}

var (
	_ dispatch.Observer  = (*Metrics)(nil)
	_ bus.WorkerObserver = (*Metrics)(nil)
	_ workerset.Observer = (*Metrics)(nil)
)

// Config configures [New]. The zero value is usable.
type Config struct {
	// Tools are the registered tools' names. Their series start at zero (every
	// answer kind, every indeterminate reason), so that rates and alerts work
	// before the first call.
	Tools []string
}

// New creates the collectors and registers them with reg. It returns the
// registry's error if one of them is already registered.
func New(reg prometheus.Registerer, cfg Config) (*Metrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: durationBuckets},
			labels)
	}
	single := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help})
	}
	m := &Metrics{
		calls: counter("calls_total", "Calls dispatched, by tool and answer kind (no_answer: handed back for redelivery).", "tool",
			"kind"),
		callDuration: histogram("call_duration_seconds", "Time from taking a call to its answer, by tool and answer kind.", "tool", "kind"),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "calls_in_flight",
			Help: "Calls being dispatched now, by tool."}, []string{"tool"}),
		bodies:       counter("bodies_entered_total", "Tool bodies entered, retries included, by tool.", "tool"),
		deduplicated: counter("deduplicated_total", "Calls answered from another call's recorded outcome, by tool.", "tool"),
		indetermin:   counter("indeterminate_total", "Indeterminate answers, by tool and reason.", "tool", "reason"),
		unguarded: counter("unguarded_runs_total",
			"Idempotent calls run without a claim, by tool and reason (key_underivable, store_unavailable).", "tool", "reason"),
		holderWait: histogram("holder_wait_seconds", "Time calls spent waiting for another caller holding their key, by tool.", "tool"),

		storeDuration: histogram("store_operation_duration_seconds", "Idempotency store operations, by store and operation.", "store",
			"operation"),
		storeErrors: counter("store_errors_total",
			"Idempotency store operations that failed, by store, operation and error (unavailable, invalid, too_large, other); answers such as "+
				"not found or not holder are not errors.", "store", "operation", "error"),

		received:    single("messages_received_total", "Calls delivered to this executor by JetStream."),
		redelivered: single("redeliveries_total", "Deliveries of calls that JetStream had delivered before."),
		rejected:    counter("messages_rejected_total", "Calls the worker rejected before dispatching them, by rejection code.", "code"),
		handedBack:  single("calls_handed_back_total", "Calls negatively acknowledged for redelivery."),
		pubRetries:  single("answer_publish_retries_total", "Answer publications tried again after a failure."),

		workers: gauge("workers",
			"Workers serving tool bodies over NATS that this executor knows of (heard from within the last rounds of discovery)."),
		workerTools:     gauge("worker_tools", "Tools workers serve without conflict."),
		workerConflicts: gauge("worker_tool_conflicts", "Tools whose declarations conflict now: not run, their calls rejected tool_conflict."),
		workerRefused:   gauge("worker_declarations_refused", "Workers' endpoints whose declarations are refused."),
		conflictsBegun:  single("worker_conflicts_total", "Conflicts between the declarations of a tool that began."),
		extraReplies: counter("worker_extra_replies_total",
			"Requests for a tool's body answered more than once, by subject: more than one group of workers serves it, so the body ran more than "+
				"once.", "subject"),
		discoveryFailure: single("worker_discovery_failures_total",
			"Rounds of discovery of workers whose request could not be sent."),
	}
	for _, c := range []prometheus.Collector{
		m.calls, m.callDuration, m.inFlight, m.bodies, m.deduplicated, m.indetermin, m.unguarded, m.holderWait,
		m.storeDuration, m.storeErrors, m.received, m.redelivered, m.rejected, m.handedBack, m.pubRetries,
		m.workers, m.workerTools, m.workerConflicts, m.workerRefused, m.conflictsBegun, m.extraReplies, m.discoveryFailure,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, t := range cfg.Tools {
		for _, k := range events.AnswerKinds() {
			m.calls.WithLabelValues(t, string(k))
		}
		for _, r := range events.Reasons() {
			m.indetermin.WithLabelValues(t, string(r))
		}
		m.bodies.WithLabelValues(t)
		m.deduplicated.WithLabelValues(t)
		m.inFlight.WithLabelValues(t)
	}
	return m, nil
}

// Handler serves the metrics g gathers in the Prometheus exposition formats.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

func toolLabel(tool string) string {
	if tool == "" {
		return UnknownTool
	}
	return tool
}

func reasonLabel(r events.Reason) string {
	if r.Valid() {
		return string(r)
	}
	return Other
}

// CallStarted implements dispatch.Observer.
func (m *Metrics) CallStarted(tool string) { m.inFlight.WithLabelValues(toolLabel(tool)).Inc() }

// CallEnded implements dispatch.Observer.
func (m *Metrics) CallEnded(tool string, kind events.Kind, reason events.Reason, d time.Duration) {
	t := toolLabel(tool)
	m.inFlight.WithLabelValues(t).Dec()
	k := string(kind)
	switch {
	case kind == "":
		k = NoAnswer
	case !kind.IsAnswer():
		k = Other
	}
	m.calls.WithLabelValues(t, k).Inc()
	m.callDuration.WithLabelValues(t, k).Observe(d.Seconds())
	switch kind {
	case events.KindDeduplicated:
		m.deduplicated.WithLabelValues(t).Inc()
	case events.KindIndeterminate:
		m.indetermin.WithLabelValues(t, reasonLabel(reason)).Inc()
	}
}

// BodyEntered implements dispatch.Observer.
func (m *Metrics) BodyEntered(tool string) { m.bodies.WithLabelValues(toolLabel(tool)).Inc() }

// RanUnguarded implements dispatch.Observer.
func (m *Metrics) RanUnguarded(tool string, reason events.Reason) {
	m.unguarded.WithLabelValues(toolLabel(tool), reasonLabel(reason)).Inc()
}

// WaitedForHolder implements dispatch.Observer.
func (m *Metrics) WaitedForHolder(tool string, d time.Duration) {
	m.holderWait.WithLabelValues(toolLabel(tool)).Observe(d.Seconds())
}

// MessageReceived implements bus.WorkerObserver.
func (m *Metrics) MessageReceived(redelivered bool) {
	m.received.Inc()
	if redelivered {
		m.redelivered.Inc()
	}
}

// MessageRejected implements bus.WorkerObserver.
func (m *Metrics) MessageRejected(code events.Code) {
	c := string(code)
	switch {
	case code == "":
		c = Unanswered
	case !code.IsRejection():
		c = Other
	}
	m.rejected.WithLabelValues(c).Inc()
}

// CallHandedBack implements bus.WorkerObserver.
func (m *Metrics) CallHandedBack() { m.handedBack.Inc() }

// AnswerPublishRetried implements bus.WorkerObserver.
func (m *Metrics) AnswerPublishRetried() { m.pubRetries.Inc() }

// Refreshed implements workerset.Observer: the gauges take what the round
// found; a round that failed leaves them and is counted.
func (m *Metrics) Refreshed(r workerset.Round) {
	if r.Failed {
		m.discoveryFailure.Inc()
		return
	}
	m.workers.Set(float64(r.Workers))
	m.workerTools.Set(float64(r.Tools))
	m.workerConflicts.Set(float64(r.Conflicts))
	m.workerRefused.Set(float64(r.Refused))
}

// ConflictBegan implements workerset.Observer.
func (m *Metrics) ConflictBegan(string) { m.conflictsBegun.Inc() }

// ExtraReply counts a request for a body on subject that more than one worker
// answered (natstool.Endpoint.OnExtraReply).
func (m *Metrics) ExtraReply(subject string) { m.extraReplies.WithLabelValues(subject).Inc() }
