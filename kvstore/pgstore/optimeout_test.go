package pgstore

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/toolexec/internal/testkit/tcpproxy"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
)

func TestOpTimeoutDefault(t *testing.T) {
	for _, tt := range []struct {
		give, want time.Duration
	}{
		{0, DefaultOpTimeout},
		{time.Second, time.Second},
		{-1, -1},
	} {
		c, err := Config{OpTimeout: tt.give}.withDefaults()
		if err != nil || c.OpTimeout != tt.want {
			t.Errorf("OpTimeout %v: got %v, %v; want %v", tt.give, c.OpTimeout, err, tt.want)
		}
	}
}

// TestBlackHoleFailsInsteadOfHanging puts a proxy between the store and the
// database and black-holes it: the proxy accepts and reads but never answers.
// With a caller context that has no deadline, every operation must still end,
// with kvstore.ErrUnavailable, once Config.OpTimeout has passed — and a Wait
// must end too. After the proxy forwards again, the store works.
func TestBlackHoleFailsInsteadOfHanging(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	px := tcpproxy.Start(t, u.Host)
	u.Host = px.Addr()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(ctx(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	s := openStore(t, pool, Config{OpTimeout: 300 * time.Millisecond, RecheckInterval: 100 * time.Millisecond})
	held := mustClaim(t, s, req("acme", newDigest(t), "w1", time.Minute))

	px.Blackhole()
	background := context.Background() // no deadline: only the store's bound can end the calls
	ops := []struct {
		name string
		do   func() error
	}{
		{"claim", func() error { _, err := s.Claim(background, req("acme", newDigest(t), "w2", time.Minute)); return err }},
		{"get", func() error { _, err := s.Get(background, "acme", held.Record.Key); return err }},
		{"record", func() error { return s.Record(background, held.Lease, "out") }},
		{"renew", func() error { _, err := s.Renew(background, held.Lease, time.Minute); return err }},
		{"take over", func() error {
			_, err := s.TakeOver(background, held.Record, req("acme", held.Record.Key, "w3", time.Minute))
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
			px.Close() // resets the connections, so that the stuck call returns and cleanup can close the pool
			t.Fatalf("%s through a black hole still blocks after 30s (OpTimeout 300ms)", op.name)
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
	if rec, err := s.Get(ctx(t), "acme", held.Record.Key); err != nil || rec.State != kvstore.StateCompleted {
		t.Fatalf("after Record: %+v, %v", rec, err)
	}
}
