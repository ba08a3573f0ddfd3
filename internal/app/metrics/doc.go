// Package metrics is toolexec's Prometheus instrumentation: a [Metrics] value
// that hears what the dispatcher and the bus worker do (it implements
// dispatch.Observer and bus.WorkerObserver) and what an executor finds of the
// workers serving tool bodies (workerset.Observer), and times every operation
// of an idempotency store ([Metrics.Store] wraps any kvstore.Store, so one
// wrapper covers every backend).
//
// Labels are bounded and never identify a call: tool (a registered tool's
// name, "(unknown)" otherwise), kind, reason, code, operation, store and
// error. No metric carries arguments, keys, run ids or call ids, and only the
// gauges of keys awaiting decision carry a tenant (bounded by
// AwaitingConfig.MaxTenants: past it, tenants are summed as "(other)").
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
//	workers                                 workers serving tool bodies that this executor knows of
//	worker_tools                            tools workers serve without conflict
//	worker_tool_conflicts                   tools in conflict now: not run, calls rejected tool_conflict
//	worker_conflicts_total                  conflicts that began
//	worker_extra_replies_total{subject}     body requests answered by more than one worker: the body ran twice
//	worker_declarations_refused             workers' endpoints whose declarations are refused
//	worker_discovery_failures_total         rounds of discovery whose request could not be sent
//
// The workers' series ([Metrics] implements workerset.Observer) stay at zero
// on an executor that does not learn tools from workers.
//
// Beside them, registered on their own ([BuildInfo], [Ready], [Consumer],
// [Metrics.Awaiting], [MCPServers]):
//
//	build_info{version,revision,goversion}  the build that runs; always 1
//	ready                                   1 while /readyz says ready
//	consumer_pending_messages               calls not yet delivered (the shared consumer's lag)
//	consumer_ack_pending_messages           calls delivered, not yet acknowledged
//	consumer_redelivered_messages           of those, calls delivered more than once
//	consumer_info_errors_total              scrapes that could not read the consumer
//	keys_awaiting_decision{tenant}          indeterminate keys waiting for an operator
//	keys_awaiting_decision_oldest_timestamp_seconds{tenant}
//	keys_awaiting_decision_refreshed_timestamp_seconds
//	mcp_server_state{server,state}          1 for the state each MCP server is in (connecting, connected, down, closed), 0 for the others
//
// The consumer's and the awaiting series describe shared state: every
// executor reports the same numbers, so aggregate them with max, not sum.
package metrics
