// Package metrics is toolexec's Prometheus instrumentation: a [Metrics] value
// that hears what the dispatcher and the bus worker do (it implements
// dispatch.Observer and bus.WorkerObserver) and times every operation of an
// idempotency store ([Metrics.Store] wraps any kvstore.Store, so one wrapper
// covers every backend).
//
// Labels are bounded and never identify a call: tool (a registered tool's
// name, "(unknown)" otherwise), kind, reason, code, operation, store and
// error. No metric carries arguments, keys, tenants, run ids or call ids.
//
// The series, all prefixed toolexec_:
//
//	calls_total{tool,kind}                  calls answered, by answer kind ("no_answer": handed back)
//	call_duration_seconds{tool,kind}        time from taking a call to its answer
//	calls_in_flight{tool}                   calls being dispatched now
//	bodies_entered_total{tool}              tool bodies entered, retries included
//	deduplicated_total{tool}                calls answered from a recorded outcome
//	indeterminate_total{tool,reason}        indeterminate answers, by reason
//	unguarded_runs_total{tool,reason}       Idempotent calls run without a claim
//	holder_wait_seconds{tool}               time spent waiting for another caller's claim
//	store_operation_duration_seconds{store,operation}
//	store_errors_total{store,operation,error} failures (unavailable, invalid, too_large, other)
//	store_group_commits_total{store}        group commits of two writes or more (PostgreSQL; GroupCommits)
//	store_group_commit_writes_total{store}  the writes they carried
//	store_group_commits_refused_total{store} group commits refused, their writes then made one by one
//	messages_received_total                 calls delivered by JetStream
//	redeliveries_total                      deliveries of a call delivered before
//	messages_rejected_total{code}           calls the worker rejected before dispatching
//	calls_handed_back_total                 calls negatively acknowledged for redelivery
//	answer_publish_retries_total            answer publications tried again
package metrics
