package bus

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// StandInPrefix starts the call id a rejection is addressed to when the
// rejected message carries no usable one (absent, unreadable, or not a valid
// token): "_seq-" followed by the message's sequence in its calls stream. The
// sequence does not change when the message is redelivered, so the stand-in
// (and with it the answer's Nats-Msg-Id) is the same on every delivery, and the
// rejection is stored once.
const StandInPrefix = "_seq-"

// StandInCallID returns the stand-in call id for the call message stored at
// sequence seq of its calls stream.
func StandInCallID(seq uint64) string { return StandInPrefix + strconv.FormatUint(seq, 10) }

// inbound is what decoding made of one message: a call to dispatch, a
// rejection to publish, or the reason it can be neither.
type inbound struct {
	subject       string
	call          events.Call
	rejected      *events.Answer
	unaddressable string
}

// decode reads m as a call. A message that is too large, not a CloudEvent, or
// not a well-formed call is answered rejected, addressed to the tenant of its
// subject, its tool (when the subject names a valid one), its run id when it
// carries a valid one, and the call id of its subject (when valid), else the
// call id it carries (when valid), else the stand-in of StandInCallID. Only a
// message whose subject names no valid tenant cannot be answered at all. size
// is the message's size, headers included.
func (w *Worker) decode(m jetstream.Msg, size int) inbound {
	subject := m.Subject()
	in := inbound{subject: subject}
	tenant, tool, subjectCallID, ok := splitCallSubject(subject)
	if !ok || !events.ValidToken(tenant) {
		in.unaddressable = "subject names no valid tenant"
		return in
	}
	h, data := m.Headers(), m.Data()
	reject := func(err error, id, runID string, e *event.Event) inbound {
		if events.ValidToken(subjectCallID) {
			id = subjectCallID
		}
		in.rejected = w.rejection(m, tenant, tool, id, runID, e, err)
		return in
	}
	if size > w.cfg.MaxMessageBytes {
		addr := wire.Peek(h, data)
		return reject(events.Reject(events.CodeTooLarge, "", "the message is %d bytes; this executor accepts at most %d",
			size, w.cfg.MaxMessageBytes), addr.ID, addr.RunID, nil)
	}
	e, err := wire.Decode(h, data)
	if err != nil {
		addr := wire.Peek(h, data)
		return reject(err, addr.ID, addr.RunID, nil)
	}
	c, err := wire.CallFromEvent(e, tenant, tool)
	if err == nil {
		err = wire.CheckSubjectCallID(c, subjectCallID)
	}
	if err != nil {
		runID, _ := wire.Extensions(e)[wire.ExtRunID].(string)
		return reject(err, e.ID(), runID, &e)
	}
	c.Repeat = wire.IsRepeat(h)
	c.Interactions = wire.Interactions(h)
	in.call = c
	return in
}

// rejection builds the rejected answer for m.
func (w *Worker) rejection(m jetstream.Msg, tenant, tool, id, runID string, e *event.Event, err error) *events.Answer {
	a := events.Answer{
		Kind:   events.KindRejected,
		Tenant: tenant,
		Tool:   validOrEmpty(tool),
		RunID:  validOrEmpty(runID),
		CallID: id,
		Time:   time.Now(),
	}
	if !events.ValidToken(a.CallID) {
		var seq uint64
		if md, err := m.Metadata(); err == nil {
			seq = md.Sequence.Stream
		}
		a.CallID = StandInCallID(seq)
	}
	if e != nil {
		exts := wire.Extensions(*e)
		if tp, ok := exts["traceparent"].(string); ok {
			a.TraceParent = tp
			a.TraceState, _ = exts["tracestate"].(string)
		}
	}
	if re, ok := asReject(err); ok {
		a.Code, a.Field, a.Error = re.Code, re.Field, re.Message
	} else {
		a.Code, a.Error = events.CodeNotCloudEvent, err.Error()
	}
	if a.Error == "" {
		a.Error = string(a.Code)
	}
	return &a
}

func asReject(err error) (*events.RejectedError, bool) {
	var re *events.RejectedError
	ok := errors.As(err, &re)
	return re, ok
}

func validOrEmpty(s string) string {
	if events.ValidToken(s) {
		return s
	}
	return ""
}

// splitCallSubject splits "toolexec.call.<tenant>.<tool>.<call_id>" into its
// three tokens, or "toolexec.call.<tenant>.<tool>" (wire version 1) into two
// and an empty call id; the tool is whatever stands in its place, and a
// subject of more tokens has them all in its call id. It reports false for a
// subject outside toolexec.call.>.
func splitCallSubject(subject string) (tenant, tool, callID string, ok bool) {
	rest, ok := strings.CutPrefix(subject, wire.CallPrefix)
	if !ok {
		return "", "", "", false
	}
	tenant, rest, _ = strings.Cut(rest, ".")
	tool, callID, _ = strings.Cut(rest, ".")
	return tenant, tool, callID, true
}

// headerSize approximates the bytes h takes on the wire.
func headerSize(h nats.Header) int {
	n := 0
	for k, vs := range h {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
