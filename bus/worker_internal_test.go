package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/internal/jsapi"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

func TestCapError(t *testing.T) {
	short := "short"
	if got := capError(short); got != short {
		t.Errorf("capError(short) = %q", got)
	}
	long := strings.Repeat("é", MaxErrorBytes) // two bytes each
	got := capError(long)
	if len(got) > MaxErrorBytes || !strings.HasSuffix(got, cutMark) || !utf8.ValidString(got) {
		t.Errorf("capError(long): %d bytes, valid %t, suffix %t", len(got), utf8.ValidString(got), strings.HasSuffix(got, cutMark))
	}
}

func TestRetryBackoff(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{1, "50ms"}, {2, "100ms"}, {3, "200ms"}, {5, "800ms"}, {6, "1s"}, {100, "1s"},
	}
	for _, tt := range tests {
		if got := retryBackoff.Delay(tt.n).String(); got != tt.want {
			t.Errorf("retryBackoff.Delay(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}

func TestSplitCallSubject(t *testing.T) {
	tests := []struct {
		give         string
		tenant, tool string
		callID       string
		ok           bool
	}{
		{"toolexec.call.acme.book.c1", "acme", "book", "c1", true},
		{"toolexec.call.acme.book", "acme", "book", "", true},
		{"toolexec.call.acme", "acme", "", "", true},
		{"toolexec.call.acme.book.c1.x", "acme", "book", "c1.x", true},
		{"toolexec.event.acme.book.c1", "", "", "", false},
	}
	for _, tt := range tests {
		tenant, tool, callID, ok := splitCallSubject(tt.give)
		if tenant != tt.tenant || tool != tt.tool || callID != tt.callID || ok != tt.ok {
			t.Errorf("splitCallSubject(%q) = %q, %q, %q, %t", tt.give, tenant, tool, callID, ok)
		}
	}
}

// TestPullFailedCreatesConsumerAgain: a pull on a consumer that was deleted is
// answered "no responders" (no consumer is there to answer it), and pullFailed
// creates the consumer again, which delivers to the next pull.
func TestPullFailedCreatesConsumerAgain(t *testing.T) {
	js := natstest.JetStream(t, natstest.Connect(t, natstest.Start(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := EnsureStreams(ctx, js, StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	cc := ConsumerConfig{}
	if _, err := EnsureConsumer(ctx, js, cc); err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteConsumer(ctx, wire.CallStream, DefaultDurable); err != nil {
		t.Fatal(err)
	}
	p := newPuller(js, wire.CallStream, DefaultDurable, 2*time.Second)
	m, err := pullOne(t, ctx, p)
	if m != nil {
		t.Fatal("a deleted consumer delivered a message")
	}
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatalf("pull on a deleted consumer: %v, want nats.ErrNoResponders (the case pullFailed handles)", err)
	}

	w := &Worker{js: js, log: slog.New(slog.DiscardHandler)}
	w.pullFailed(ctx, err, 1, cc)
	if _, err := js.Consumer(ctx, wire.CallStream, DefaultDurable); err != nil {
		t.Fatalf("the consumer was not created again: %v", err)
	}
	if _, err := js.Publish(ctx, wire.CallSubject("acme", "book", "c1"), []byte("{}")); err != nil {
		t.Fatal(err)
	}
	m, err = pullOne(t, ctx, p)
	if m == nil {
		t.Fatalf("the consumer created again does not deliver: %v", err)
	}
	_ = m.Ack()
}

// TestPullFailedFindsTheConsumerSoon: when the request that creates the
// consumer again goes unanswered (its leader is being elected), pullFailed
// asks again a second later instead of waiting out a whole setup try (5 s).
func TestPullFailedFindsTheConsumerSoon(t *testing.T) {
	nc := natstest.Connect(t, natstest.Start(t))
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := EnsureStreams(ctx, js, StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	lossy := natstest.NewLossyAPI(t, nc) // drops the first reply to the consumer's creation
	w := &Worker{js: lossy, log: slog.New(slog.DiscardHandler)}
	start := time.Now()
	w.pullFailed(ctx, fmt.Errorf("bus: pull: %w", nats.ErrNoResponders), 1, ConsumerConfig{})
	if d := time.Since(start); d > 3*recreateAttempt || d >= setupAttempt {
		t.Errorf("pullFailed took %v with one lost reply, want about %v", d, recreateAttempt)
	}
	if _, err := js.Consumer(ctx, wire.CallStream, DefaultDurable); err != nil {
		t.Fatalf("the consumer was not created: %v", err)
	}
	if got := lossy.Dropped(); len(got) == 0 {
		t.Error("no reply was dropped")
	}
}

// pullOne asks p for one call and returns it, or nil and why the pull ended
// without it.
func pullOne(t *testing.T, ctx context.Context, p *jsapi.Puller) (jetstream.Msg, error) {
	t.Helper()
	pl, err := p.Start(1, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pl.Next(ctx)
}
