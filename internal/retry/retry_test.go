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

func TestSetup(t *testing.T) {
	notReady := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	refused := &jetstream.APIError{Code: 400, ErrorCode: 10058, Description: "stream name already in use"}
	lost := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	ok := func(context.Context) error { return nil }
	for _, tc := range []struct {
		name  string
		tries []func(context.Context) error // the last one repeats
		want  error                         // nil, or what the error must match
		calls int                           // tries made; 0: more than one
	}{
		{"first try", []func(context.Context) error{ok}, nil, 1},
		{"lost reply, then the answer", []func(context.Context) error{lost, ok}, nil, 2},
		{"not ready twice, then the answer", []func(context.Context) error{
			func(context.Context) error { return notReady },
			func(context.Context) error { return fmt.Errorf("create: %w", notReady) }, ok}, nil, 3},
		{"refused: no second try", []func(context.Context) error{
			func(context.Context) error { return refused }, ok}, refused, 1},
		{"not enabled: no second try", []func(context.Context) error{
			func(context.Context) error { return jetstream.ErrJetStreamNotEnabled }, ok}, jetstream.ErrJetStreamNotEnabled, 1},
		{"always lost: the caller's deadline", []func(context.Context) error{lost}, context.DeadlineExceeded, 0},
		{"never ready: the last answer at the deadline", []func(context.Context) error{
			func(context.Context) error { return notReady }}, notReady, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			calls := 0
			err := Setup(ctx, 200*time.Millisecond, func(ctx context.Context) error {
				f := tc.tries[min(calls, len(tc.tries)-1)]
				calls++
				return f(ctx)
			})
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("Setup = %v, want %v", err, tc.want)
			}
			if tc.calls > 0 && calls != tc.calls || tc.calls == 0 && calls < 2 {
				t.Errorf("%d tries, want %d (0: more than one)", calls, tc.calls)
			}
		})
	}
}
