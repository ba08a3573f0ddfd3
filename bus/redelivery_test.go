package bus_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
	"github.com/tesserix/toolexec/tool"
)

// deliveryCounter is a WorkerObserver that counts the deliveries workers
// received and those JetStream had made before (metadata NumDelivered > 1).
type deliveryCounter struct {
	received, redelivered atomic.Int64
}

func (c *deliveryCounter) MessageReceived(redelivered bool) {
	c.received.Add(1)
	if redelivered {
		c.redelivered.Add(1)
	}
}
func (*deliveryCounter) MessageRejected(events.Code) {}
func (*deliveryCounter) CallHandedBack()             {}
func (*deliveryCounter) AnswerPublishRetried()       {}

var _ bus.WorkerObserver = (*deliveryCounter)(nil)

// ackTap hears every acknowledgement the workers send for calls, as JetStream
// does: the reply subject says which delivery of which stream message it
// settles, the body what it says.
type ackTap struct {
	mu   sync.Mutex // protects acks
	acks map[uint64][]tappedAck
}

// tappedAck is one acknowledgement of a delivery.
type tappedAck struct {
	delivery uint64 // the delivery's count (1: the first)
	body     string
}

// tapAcks subscribes, on a connection of its own, to the acknowledgements of
// the shared consumer's deliveries.
func tapAcks(t *testing.T, h *harness) *ackTap {
	t.Helper()
	tap := &ackTap{acks: map[uint64][]tappedAck{}}
	nc := natstest.Connect(t, h.srv)
	subject := "$JS.ACK." + wire.CallStream + "." + bus.DefaultDurable + ".>"
	if _, err := nc.Subscribe(subject, tap.record); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return tap
}

// record files one acknowledgement, whose subject is
// $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>.
func (tap *ackTap) record(m *nats.Msg) {
	tokens := strings.Split(m.Subject, ".")
	if len(tokens) != 9 {
		return
	}
	delivered, err1 := strconv.ParseUint(tokens[4], 10, 64)
	seq, err2 := strconv.ParseUint(tokens[5], 10, 64)
	if err1 != nil || err2 != nil {
		return
	}
	tap.mu.Lock()
	defer tap.mu.Unlock()
	tap.acks[seq] = append(tap.acks[seq], tappedAck{delivery: delivered, body: string(m.Data)})
}

// redeliveries explains every call acknowledged from a delivery after its
// first: whether an earlier delivery had been settled by a worker (a second
// claim attempt, answered from the record) or never reached one (dropped on
// its way, or counted by JetStream without being made).
func (tap *ackTap) redeliveries() []string {
	tap.mu.Lock()
	defer tap.mu.Unlock()
	var out []string
	for seq, acks := range tap.acks {
		latest := slices.MaxFunc(acks, func(a, b tappedAck) int { return cmp.Compare(a.delivery, b.delivery) })
		if latest.delivery == 1 {
			continue
		}
		earlier := "its earlier deliveries never reached a worker"
		if slices.ContainsFunc(acks, func(a tappedAck) bool { return a.delivery < latest.delivery && a.body != "+WPI" }) {
			earlier = "an earlier delivery was settled by a worker"
		}
		out = append(out, fmt.Sprintf("stream seq %d: delivery %d acknowledged; %s", seq, latest.delivery, earlier))
	}
	slices.Sort(out)
	return out
}

// redeliveryReport makes calls through workers already started and checks
// that each was delivered exactly once: answered, received once by one worker,
// never seen redelivered, and the consumer made no delivery beyond one per
// call. Whatever breaks that is reported with where it came from. With every
// zero, callers goroutines make the calls one after another; otherwise a call
// starts every that often, whatever the others are doing.
func redeliveryReport(t *testing.T, h *harness, counter *deliveryCounter, tap *ackTap, calls []events.Call, callers int, every time.Duration) {
	t.Helper()
	one := func(c events.Call) {
		a, err := h.client.Call(ctxT(t), c)
		if err != nil || a.Kind != events.KindCompleted {
			t.Errorf("%s answered %q, %v; want completed", c.CallID, a.Kind, err)
		}
	}
	var wg sync.WaitGroup
	if every > 0 {
		for _, c := range calls {
			wg.Go(func() { one(c) })
			time.Sleep(every)
		}
	} else {
		var next atomic.Int64
		for range callers {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(len(calls)); i = next.Add(1) - 1 {
					one(calls[i])
				}
			})
		}
	}
	wg.Wait()
	info := consumerSettled(t, h.js)
	n := int64(len(calls))
	if got := counter.received.Load(); got != n {
		t.Errorf("workers received %d deliveries of %d calls", got, n)
	}
	if got := counter.redelivered.Load(); got != 0 {
		t.Errorf("workers received %d redelivered calls", got)
	}
	if info.Delivered.Consumer != info.Delivered.Stream || info.Delivered.Stream != uint64(n) {
		t.Errorf("the consumer made %d deliveries of %d calls (stream sequence %d)", info.Delivered.Consumer, n, info.Delivered.Stream)
	}
	for _, r := range tap.redeliveries() {
		t.Error(r)
	}
}

// quickBooking serves an Idempotent book that answers at once.
func quickBooking(t *testing.T) *tool.Registry {
	return registry(t, bookTool(t, "book", tool.Idempotent, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "booked", nil
	}))
}

// manyCalls returns n calls of book, each with a key of its own.
func manyCalls(prefix string, n int) []events.Call {
	calls := make([]events.Call, n)
	for i := range calls {
		id := fmt.Sprintf("%s%d", prefix, i)
		calls[i] = call("book", "r1", id, fmt.Sprintf(`{"flight":%q}`, id))
	}
	return calls
}

// TestThreeWorkersRedeliverNothing: three workers of the default concurrency
// on a fresh server take 2,000 calls from 64 callers, each delivered exactly
// once: no call is redelivered, and the consumer delivers no call twice.
func TestThreeWorkersRedeliverNothing(t *testing.T) {
	h := newHarness(t)
	tap := tapAcks(t, h)
	counter := &deliveryCounter{}
	reg := quickBooking(t)
	for range 3 {
		h.startWorker(t, reg, bus.WorkerConfig{Observer: counter}, 0)
	}
	redeliveryReport(t, h, counter, tap, manyCalls("load-", 2000), 64, 0)
}

// TestLaggingAnswersLoseNoCall: when what the server sends the workers reaches
// them late — a far network, or a server busy storing a burst — a call handed
// to a pull just before the pull expires arrives after the expiry. The worker
// still takes it: it listens to a pull until JetStream ends it. (A worker that
// gave its pulls up on its own clock, a tenth of PullWait after the server's
// expiry, dropped such calls: each waited out its ack wait and came back
// redelivered.)
// Calls trickle in across several pulls' lifetimes, behind a second of lag;
// the ack wait is short enough for a dropped call to come back within the test.
func TestLaggingAnswersLoseNoCall(t *testing.T) {
	h := newHarness(t)
	proxy := tcpproxy.Start(t, h.srv.Addr().String())
	h.workerURL = "nats://" + proxy.Addr()
	tap := tapAcks(t, h)
	counter := &deliveryCounter{}
	reg := quickBooking(t)
	cfg := bus.WorkerConfig{Observer: counter, PullWait: 3 * time.Second, AckWait: 8 * time.Second}
	for range 3 {
		h.startWorker(t, reg, cfg, 0)
	}
	proxy.Delay(time.Second)
	redeliveryReport(t, h, counter, tap, manyCalls("lag-", 60), 0, 100*time.Millisecond)
}
