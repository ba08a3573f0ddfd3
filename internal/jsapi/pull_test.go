package jsapi

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

func TestPullStatus(t *testing.T) {
	withStatus := func(code, descr string) *nats.Msg {
		m := nats.NewMsg("_INBOX.x")
		m.Header.Set(statusHeader, code)
		m.Header.Set(descriptionHeader, descr)
		return m
	}
	callWithHeaders := nats.NewMsg("call.c1")
	callWithHeaders.Header.Set("Nats-Msg-Id", "c1")
	tests := []struct {
		name      string
		give      *nats.Msg
		wantCode  string
		wantDescr string
		wantOK    bool
	}{
		{"a call", &nats.Msg{Subject: "call.c1", Data: []byte("{}")}, "", "", false},
		{"an empty call without headers", &nats.Msg{Subject: "call.c1"}, "", "", false},
		{"an empty call with headers but no status", callWithHeaders, "", "", false},
		{"a call with a status header and data", &nats.Msg{Data: []byte("x"), Header: withStatus("408", "").Header}, "", "", false},
		{"expiry", withStatus("408", "Request Timeout"), "408", "Request Timeout", true},
		{"a heartbeat", withStatus("100", "Idle Heartbeat"), "100", "Idle Heartbeat", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, descr, ok := pullStatus(tt.give)
			if code != tt.wantCode || descr != tt.wantDescr || ok != tt.wantOK {
				t.Errorf("pullStatus = %q, %q, %t; want %q, %q, %t", code, descr, ok, tt.wantCode, tt.wantDescr, tt.wantOK)
			}
		})
	}
}

func TestStatusError(t *testing.T) {
	tests := []struct {
		code, descr string
		want        error // nil: the pull ended normally
		gone        bool  // the error matches jetstream.ErrConsumerDeleted
	}{
		{"408", "Request Timeout", nil, false},
		{"404", "No Messages", nil, false},
		{"503", "", nats.ErrNoResponders, false},
		{"409", "Consumer Deleted", jetstream.ErrConsumerDeleted, true},
		{"409", "Leadership Change", jetstream.ErrConsumerLeadershipChanged, false},
		{"409", "Exceeded MaxWaiting", errAny, false},
		{"400", "Bad Request - invalid json", errAny, false},
	}
	for _, tt := range tests {
		t.Run(tt.code+" "+tt.descr, func(t *testing.T) {
			err := statusError(tt.code, tt.descr)
			switch {
			case tt.want == nil && err != nil:
				t.Fatalf("statusError = %v, want nil", err)
			case tt.want == errAny && err == nil:
				t.Fatal("statusError = nil, want an error")
			case tt.want != nil && tt.want != errAny && !errors.Is(err, tt.want):
				t.Fatalf("statusError = %v, want %v", err, tt.want)
			}
			if errors.Is(err, jetstream.ErrConsumerDeleted) != tt.gone {
				t.Errorf("errors.Is(%v, jetstream.ErrConsumerDeleted) = %t, want %t", err, !tt.gone, tt.gone)
			}
		})
	}
}

// errAny stands for any non-nil error in TestStatusError.
var errAny = errors.New("any error")

// The stream and the durable consumer of the tests.
const (
	testStream   = "CALLS"
	testConsumer = "C"
)

// pullBench is a server with a stream of calls and a durable consumer of
// them, a puller for it, and a way to publish calls.
type pullBench struct {
	js jetstream.JetStream
	p  *Puller
	n  int // calls published, each on a subject of its own
}

func newPullBench(t *testing.T, expires time.Duration) *pullBench {
	t.Helper()
	js := natstest.JetStream(t, natstest.Connect(t, natstest.Start(t)))
	if _, err := js.CreateStream(ctxTest(t), jetstream.StreamConfig{Name: testStream, Subjects: []string{"call.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateConsumer(ctxTest(t), testStream, jetstream.ConsumerConfig{Durable: testConsumer, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	subject := jetstream.DefaultAPIPrefix + "CONSUMER.MSG.NEXT." + testStream + "." + testConsumer
	return &pullBench{js: js, p: New(js.Conn(), subject, expires)}
}

// publish stores n calls in the stream.
func (b *pullBench) publish(t *testing.T, n int) {
	t.Helper()
	for range n {
		b.n++
		if _, err := b.js.Publish(ctxTest(t), "call.c"+strconv.Itoa(b.n), []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
}

// ctxTest ends with the test or after a minute.
func ctxTest(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// drain reads pl to its end and returns the calls and the reason.
func drain(ctx context.Context, pl *Pull) ([]jetstream.Msg, error) {
	var got []jetstream.Msg
	for {
		m, err := pl.Next(ctx)
		if m == nil {
			return got, err
		}
		got = append(got, m)
	}
}

// TestPullEnds: a pull ends when JetStream has delivered every call asked for
// or says the pull expired, and stops listening to its inbox either way.
func TestPullEnds(t *testing.T) {
	b := newPullBench(t, 500*time.Millisecond)
	b.publish(t, 3)
	ctx := ctxTest(t)

	filled, err := b.p.Start(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := drain(ctx, filled)
	if len(got) != 2 || err != nil || ctx.Err() != nil {
		t.Fatalf("a pull for two of three calls: %d calls, %v (context: %v)", len(got), err, ctx.Err())
	}
	expired, err := b.p.Start(2, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err = drain(ctx, expired)
	if len(got) != 1 || err != nil || ctx.Err() != nil {
		t.Fatalf("a pull for two of the one call left: %d calls, %v (context: %v)", len(got), err, ctx.Err())
	}
	for _, pl := range []*Pull{filled, expired} {
		if pl.sub.IsValid() {
			t.Error("a pull that ended still listens to its inbox")
		}
	}
}

// TestPullGivenUp: a pull whose request went to something that swallows it
// hears no heartbeat and is given up at its expiry; one whose heartbeats stop
// is given up three heartbeats (a fifth of its expiry each) after the last;
// one that hears heartbeats but is never ended is given up a PullWait after
// its expiry.
func TestPullGivenUp(t *testing.T) {
	nc := natstest.Connect(t, natstest.Start(t))
	if _, err := nc.Subscribe("swallow", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	const expires = time.Second
	p := &Puller{nc: nc, subject: "swallow", expires: expires}
	pl, err := p.Start(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if got, err := drain(ctxTest(t), pl); len(got) != 0 || !errors.Is(err, ErrSilent) {
		t.Fatalf("a pull nobody answers: %d calls, %v; want ErrSilent", len(got), err)
	}
	if d := time.Since(start); d < expires || d > 2*expires {
		t.Errorf("a pull that never heard a word was given up after %v, want about its expiry %v", d, expires)
	}

	// A responder that sends the heartbeats a request asks for: one on
	// "fade", past the give-up on "beat".
	beater := func(m *nats.Msg) {
		var req pullRequest
		if err := json.Unmarshal(m.Data, &req); err != nil || req.Heartbeat <= 0 || req.Heartbeat*2 > req.Expires {
			t.Errorf("pull request %s: heartbeat %v for expiry %v (%v)", m.Data, req.Heartbeat, req.Expires, err)
			return
		}
		beats := 4 * HeartbeatsPerPull // past the give-up
		if m.Subject == "fade" {
			beats = 1
		}
		go func() {
			for range beats {
				beat := nats.NewMsg(m.Reply)
				beat.Header.Set(statusHeader, statusHeartbeat)
				beat.Header.Set(descriptionHeader, "Idle Heartbeat")
				if nc.PublishMsg(beat) != nil {
					return
				}
				time.Sleep(req.Heartbeat)
			}
		}()
	}
	sub, err := nc.Subscribe("beat", beater)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	fade, err := nc.Subscribe("fade", beater)
	if err != nil {
		t.Fatal(err)
	}
	defer fade.Unsubscribe()
	p = &Puller{nc: nc, subject: "fade", expires: expires}
	if pl, err = p.Start(1, nil); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	if got, err := drain(ctxTest(t), pl); len(got) != 0 || !errors.Is(err, ErrSilent) {
		t.Fatalf("a pull whose heartbeats stopped: %d calls, %v; want ErrSilent", len(got), err)
	}
	silent := silentBeats * expires / HeartbeatsPerPull
	if d := time.Since(start); d < silent || d >= expires {
		t.Errorf("a pull whose heartbeats stopped after the first was given up after %v, want about %v", d, silent)
	}

	p = &Puller{nc: nc, subject: "beat", expires: expires}
	if pl, err = p.Start(1, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := drain(ctxTest(t), pl); len(got) != 0 || !errors.Is(err, ErrGivenUp) {
		t.Fatalf("a pull that hears heartbeats and is never ended: %d calls, %v; want ErrGivenUp", len(got), err)
	}
}

// TestPullHeartbeatsFromJetStream: a real consumer accepts the heartbeat a
// pull asks for and sends it while the pull is idle, until the pull expires;
// the pull lives on them to its expiry.
func TestPullHeartbeatsFromJetStream(t *testing.T) {
	const expires = 2 * time.Second
	b := newPullBench(t, expires)
	pl, err := b.p.Start(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Read the inbox itself: the statuses JetStream sends, up to the expiry's.
	beats, deadline := 0, time.After(2*expires)
	for ended := false; !ended; {
		select {
		case m := <-pl.msgs:
			code, descr, ok := pullStatus(m)
			switch {
			case !ok:
				t.Fatal("an idle pull received a call")
			case code == statusHeartbeat:
				beats++
			case code == statusTimeout:
				ended = true
			default:
				t.Fatalf("an idle pull: status %s %s", code, descr)
			}
		case <-deadline:
			t.Fatal("the pull never expired")
		}
	}
	pl.end(nil)
	if want := HeartbeatsPerPull - 2; beats < want {
		t.Errorf("%d heartbeats before the expiry, want at least %d (one each fifth of it)", beats, want)
	}
}

// TestPullLostKeepsWhatCame: a pull whose connection is lost ends as lost,
// and the calls that had reached it are still returned.
func TestPullLostKeepsWhatCame(t *testing.T) {
	b := newPullBench(t, time.Minute)
	lost := make(chan struct{})
	pl, err := b.p.Start(5, lost)
	if err != nil {
		t.Fatal(err)
	}
	b.publish(t, 2)
	deadline := time.Now().Add(10 * time.Second)
	for len(pl.msgs) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 2 calls reached the pull", len(pl.msgs))
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(lost)
	got := 0
	for {
		m, err := pl.Next(ctxTest(t))
		if m != nil {
			got++
			continue
		}
		if got != 2 || !errors.Is(err, ErrLost) {
			t.Fatalf("lost pull: %d calls, %v; want the 2 that came, ErrLost", got, err)
		}
		return
	}
}

// TestPulledMsgAcknowledgements: each acknowledgement reaches JetStream with
// the body it reads, and after the first of ack, nak and term no other is sent.
func TestPulledMsgAcknowledgements(t *testing.T) {
	tests := []struct {
		name    string
		settle  func(m jetstream.Msg) error
		want    string
		settles bool // a second acknowledgement is refused
	}{
		{"ack", func(m jetstream.Msg) error { return m.Ack() }, "+ACK", true},
		{"double ack", func(m jetstream.Msg) error { return m.DoubleAck(ctxTest(t)) }, "+ACK", true},
		{"nak", func(m jetstream.Msg) error { return m.Nak() }, "-NAK", true},
		{"nak with delay", func(m jetstream.Msg) error { return m.NakWithDelay(2 * time.Second) }, `-NAK {"delay": 2000000000}`, true},
		{"nak without delay", func(m jetstream.Msg) error { return m.NakWithDelay(0) }, "-NAK", true},
		{"term", func(m jetstream.Msg) error { return m.Term() }, "+TERM", true},
		{"term with reason", func(m jetstream.Msg) error { return m.TermWithReason("rejected: bad") }, "+TERM rejected: bad", true},
		{"in progress", func(m jetstream.Msg) error { return m.InProgress() }, "+WPI", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newPullBench(t, time.Minute)
			acks := make(chan *nats.Msg, 4)
			sub, err := b.js.Conn().ChanSubscribe("$JS.ACK.>", acks)
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			b.publish(t, 1)
			pl, err := b.p.Start(1, nil)
			if err != nil {
				t.Fatal(err)
			}
			m, err := pl.Next(ctxTest(t))
			if m == nil {
				t.Fatalf("no call: %v", err)
			}
			if err := tt.settle(m); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			select {
			case a := <-acks:
				if string(a.Data) != tt.want || a.Subject != m.Reply() {
					t.Errorf("sent %q to %s, want %q to %s", a.Data, a.Subject, tt.want, m.Reply())
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s sent nothing", tt.name)
			}
			err = m.Ack()
			if tt.settles && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
				t.Errorf("Ack after %s = %v, want ErrMsgAlreadyAckd", tt.name, err)
			}
			if !tt.settles && err != nil {
				t.Errorf("Ack after %s = %v, want it sent", tt.name, err)
			}
			if err := m.InProgress(); !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
				t.Errorf("InProgress after %s and Ack = %v, want ErrMsgAlreadyAckd", tt.name, err)
			}
		})
	}
}

// TestPulledMsgReadsTheDelivery: a pulled call carries its subject, data,
// headers and the delivery's metadata.
func TestPulledMsgReadsTheDelivery(t *testing.T) {
	b := newPullBench(t, time.Minute)
	msg := nats.NewMsg("call.call-1")
	msg.Data = []byte(`{"x":1}`)
	msg.Header.Set("Nats-Msg-Id", "call-1")
	if _, err := b.js.PublishMsg(ctxTest(t), msg); err != nil {
		t.Fatal(err)
	}
	pl, err := b.p.Start(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	m, err := pl.Next(ctxTest(t))
	if m == nil {
		t.Fatalf("no call: %v", err)
	}
	if m.Subject() != msg.Subject || string(m.Data()) != `{"x":1}` || m.Headers().Get("Nats-Msg-Id") != "call-1" {
		t.Errorf("call %s %q %v", m.Subject(), m.Data(), m.Headers())
	}
	md, err := m.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	if md.Stream != testStream || md.Consumer != testConsumer || md.NumDelivered != 1 ||
		md.Sequence.Stream != 1 || md.Sequence.Consumer != 1 || md.Timestamp.IsZero() {
		t.Errorf("metadata %+v", md)
	}
	_ = m.Ack()
}
