package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// TestBlackHoleFailsInsteadOfHanging puts a proxy between the store and Redis
// and black-holes it: the proxy accepts and reads but never answers. With a
// caller context that has no deadline, every operation — Wait included, whose
// subscription is never confirmed — must still end with kvstore.ErrUnavailable,
// bounded by the client's timeouts. After the proxy forwards again, the store
// works.
func TestBlackHoleFailsInsteadOfHanging(t *testing.T) {
	t.Parallel()
	c, px := proxiedClient(t, 0)
	s, err := redisstore.New(c, redisstore.Config{Prefix: uniquePrefix(t, newClient(t)), WaitRecheck: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	held := mustClaim(t, s, claimReq("acme", "held", "w1", time.Minute))

	px.Blackhole()
	background := context.Background() // no deadline: only the store's bounds can end the calls
	ops := []struct {
		name string
		do   func() error
	}{
		{"claim", func() error { _, err := s.Claim(background, claimReq("acme", "other", "w2", time.Minute)); return err }},
		{"get", func() error { _, err := s.Get(background, "acme", held.Record.Key); return err }},
		{"record", func() error { return s.Record(background, held.Lease, "out") }},
		{"renew", func() error { _, err := s.Renew(background, held.Lease, time.Minute); return err }},
		{"take over", func() error {
			_, err := s.TakeOver(background, held.Record, claimReq("acme", "held", "w3", time.Minute))
			return err
		}},
		{"wait", func() error { _, err := s.Wait(background, held.Record); return err }},
		{"forget", func() error { _, err := s.Forget(background, "nobody"); return err }},
		{"resolve", func() error {
			_, err := s.Resolve(background, "acme", held.Record.Key, kvstore.Resolution{Release: true})
			return err
		}},
	}
	for _, op := range ops {
		done := make(chan error, 1)
		go func() { done <- op.do() }()
		select {
		case err := <-done:
			if !errors.Is(err, kvstore.ErrUnavailable) {
				t.Errorf("%s through a black hole: %v, want ErrUnavailable", op.name, err)
			}
		case <-time.After(30 * time.Second):
			_ = px.Close() // resets the connections, so that the stuck call returns
			t.Fatalf("%s through a black hole still blocks after 30s (client timeouts 300ms)", op.name)
		}
	}

	px.Restore()
	wait.Eventually(t, waitLimit, "the store to work again", func() bool {
		_, err := s.Get(ctx(t), "acme", held.Record.Key)
		return err == nil
	})
	if err := s.Record(ctx(t), held.Lease, "out"); err != nil {
		t.Fatalf("Record after the black hole: %v", err)
	}
}
