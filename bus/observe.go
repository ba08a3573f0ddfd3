package bus

import "github.com/tesserix/toolexec/events"

// WorkerObserver is told what a [Worker] does with the messages it receives,
// for metrics. Its methods are called on the message's goroutine and must
// return quickly; they must be safe for concurrent use. Package metrics
// implements it with Prometheus. No method is given a subject, a tenant, ids
// or arguments.
type WorkerObserver interface {
	// MessageReceived is called for each delivered message; redelivered is
	// true when JetStream delivered it before (another worker, or this one,
	// did not acknowledge it in time, died, or handed it back).
	MessageReceived(redelivered bool)
	// MessageRejected is called when the worker itself rejects a message before
	// dispatching it (malformed, oversize, not a call), with the rejection
	// code; "" when the message was terminated unanswered (unaddressable).
	MessageRejected(code events.Code)
	// CallHandedBack is called when a message is negatively acknowledged for
	// redelivery.
	CallHandedBack()
	// AnswerPublishRetried is called each time publishing an answer is tried
	// again after a failure.
	AnswerPublishRetried()
}

// nopWorkerObserver is the WorkerObserver of a worker configured without one.
type nopWorkerObserver struct{}

func (nopWorkerObserver) MessageReceived(bool)        {}
func (nopWorkerObserver) MessageRejected(events.Code) {}
func (nopWorkerObserver) CallHandedBack()             {}
func (nopWorkerObserver) AnswerPublishRetried()       {}

var _ WorkerObserver = nopWorkerObserver{}
