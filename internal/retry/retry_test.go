package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestPermanent(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nats.ErrMaxPayload, true},
		{fmt.Errorf("publishing: %w", nats.ErrConnectionClosed), true},
		{nats.ErrBadSubject, true},
		{nats.ErrHeadersNotSupported, true},
		{nats.ErrTimeout, false},
		{nats.ErrNoResponders, false},
		{jetstream.ErrNoStreamResponse, false},
		{errors.New("anything else"), false},
	} {
		if got := Permanent(tc.err); got != tc.want {
			t.Errorf("Permanent(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}

func TestPause(t *testing.T) {
	if !Pause(context.Background(), time.Millisecond) {
		t.Error("Pause with a live context did not wait the whole time")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if Pause(ctx, time.Hour) {
		t.Error("Pause with an ended context reported a whole wait")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Pause with an ended context took %v", d)
	}
}
