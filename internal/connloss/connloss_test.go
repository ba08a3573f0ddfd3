package connloss

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
)

// ended waits up to a few seconds for ctx to end and reports whether it did,
// with cause ErrLost.
func ended(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return errors.Is(context.Cause(ctx), ErrLost)
	case <-time.After(5 * time.Second):
		return false
	}
}

// TestContextEndsOnLoss: the context of a connection's life ends when the
// connection drops; the next one, taken after the reconnection, lives on;
// closing the connection ends the last one, and a closed connection's
// context has ended already.
func TestContextEndsOnLoss(t *testing.T) {
	srv := natstest.Start(t)
	proxy := tcpproxy.Start(t, srv.Addr().String())
	reconnected := make(chan struct{}, 1)
	nc, err := nats.Connect("nats://"+proxy.Addr(), nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1),
		nats.ReconnectHandler(func(*nats.Conn) { reconnected <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	first := Context(nc)
	if again := Context(nc); again != first {
		t.Error("two contexts for one life of the connection")
	}
	select {
	case <-first.Done():
		t.Fatal("the context of a live connection ended")
	case <-time.After(100 * time.Millisecond):
	}
	proxy.Cut()
	if !ended(first) {
		t.Fatal("the context did not end when the connection dropped")
	}
	proxy.Restore()
	select {
	case <-reconnected:
	case <-time.After(10 * time.Second):
		t.Fatal("no reconnection")
	}
	second := Context(nc)
	if second == first || second.Err() != nil {
		t.Fatalf("after the reconnection: a new context %t, ended %v", second != first, second.Err())
	}
	nc.Close()
	if !ended(second) {
		t.Error("closing the connection did not end its context")
	}
	if !ended(Context(nc)) {
		t.Error("a closed connection's context has not ended")
	}
}

// TestAttempt: an attempt's context ends at its own deadline, with its
// parent, or with the connection's loss, whichever comes first.
func TestAttempt(t *testing.T) {
	srv := natstest.Start(t)
	proxy := tcpproxy.Start(t, srv.Addr().String())
	nc, err := nats.Connect("nats://"+proxy.Addr(), nats.ReconnectWait(20*time.Millisecond), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()

	actx, cancel := Attempt(context.Background(), nc, 50*time.Millisecond)
	<-actx.Done()
	cancel()
	if !errors.Is(actx.Err(), context.DeadlineExceeded) {
		t.Errorf("an attempt past its time: %v", actx.Err())
	}

	parent, cancelParent := context.WithCancel(context.Background())
	actx, cancel = Attempt(parent, nc, time.Minute)
	cancelParent()
	<-actx.Done()
	cancel()
	if !errors.Is(actx.Err(), context.Canceled) {
		t.Errorf("an attempt whose parent ended: %v", actx.Err())
	}

	actx, cancel = Attempt(context.Background(), nc, time.Minute)
	defer cancel()
	proxy.Cut()
	select {
	case <-actx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("an attempt outlived its connection's loss")
	}
}
