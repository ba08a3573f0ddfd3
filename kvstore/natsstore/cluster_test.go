package natsstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore"
)

// TestR3CreateRace: 64 claimers spread over the three servers of a cluster race
// for one key of an R3 bucket, on a fresh key and then again after each release
// (where Claim writes again over the delete marker and replicated streams
// answer with their own error code). Each round has exactly one winner, no
// claimer gets an error, and every loser is answered with the winner's record.
func TestR3CreateRace(t *testing.T) {
	const (
		claimers = 64
		rounds   = 4
	)
	servers := testCluster(t)
	bucket := uniqueBucket()
	stores := make([]*Store, len(servers))
	faults := make([]*faultKV, len(servers))
	for i, srv := range servers {
		stores[i], _ = newTestStore(t, []*server.Server{srv}, Config{Bucket: bucket, Replicas: 3})
		faults[i] = withFaults(stores[i]) // records the claims' refused writes; injects nothing
	}
	tenant, d := newTenant(), digestOf("race")

	var winner kvstore.Lease
	var winnerStore *Store
	for round := 0; round < rounds; round++ {
		if round > 0 {
			if err := winnerStore.Release(testCtx(t), winner); err != nil {
				t.Fatalf("round %d: Release: %v", round, err)
			}
		}
		results := make([]kvstore.ClaimResult, claimers)
		errs := make([]error, claimers)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range claimers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				results[i], errs[i] = stores[i%len(stores)].Claim(testCtx(t), claimReq(tenant, d, fmt.Sprintf("h%02d", i), time.Minute))
			}()
		}
		close(start)
		wg.Wait()

		won := -1
		for i := range claimers {
			if errs[i] != nil {
				t.Errorf("round %d: claimer %d: %v", round, i, errs[i])
				continue
			}
			if results[i].Claimed {
				if won >= 0 {
					t.Fatalf("round %d: claimers %d and %d both won", round, won, i)
				}
				won = i
			}
		}
		if won < 0 {
			t.Fatalf("round %d: nobody won", round)
		}
		want := fmt.Sprintf("h%02d", won)
		for i := range claimers {
			if errs[i] == nil && !results[i].Claimed {
				if r := results[i].Record; r.State != kvstore.StateClaimed || r.Holder != want {
					t.Errorf("round %d: loser %d answered with %+v, want claimed by %s", round, i, r, want)
				}
			}
		}
		winner, winnerStore = results[won].Lease, stores[won%len(stores)]
	}

	var refused int
	codes := map[int]int{}
	for _, f := range faults {
		f.mu.Lock()
		for _, err := range f.updateErrs {
			if !isConflict(err) {
				t.Errorf("refused claim write not classified as a conflict: %v", err)
				continue
			}
			refused++
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) {
				codes[int(apiErr.ErrorCode)]++
			}
		}
		f.mu.Unlock()
	}
	// After a release, a claimer's first write expects no value and finds the
	// delete marker; it writes again over the marker unless another claim came
	// first: more refused writes than losers is expected.
	t.Logf("%d refused claim writes for %d losers; by error code: %v", refused, rounds*(claimers-1), codes)
	if refused < rounds*(claimers-1) {
		t.Errorf("%d refused claim writes recorded, want at least %d", refused, rounds*(claimers-1))
	}
}

// TestLeaderFailover: the stream's leader is killed while two stores on
// different servers race for keys and a holder records its outcome. No key is
// granted twice, and the holder's lease survives the change of leader.
func TestLeaderFailover(t *testing.T) {
	servers := natstest.StartCluster(t, 3)
	bucket := uniqueBucket()
	// Each store connects to its own server first and fails over to the others.
	rotated := func(i int) []*server.Server {
		return append(append([]*server.Server{}, servers[i:]...), servers[:i]...)
	}
	a, _ := newTestStore(t, rotated(0), Config{Bucket: bucket, Replicas: 3})
	b, _ := newTestStore(t, rotated(1), Config{Bucket: bucket, Replicas: 3})
	tenant := newTenant()

	held := digestOf("held")
	lease := mustClaim(t, a, claimReq(tenant, held, "a", time.Minute))

	const keys = 20
	type outcome struct{ a, b bool }
	got := make([]outcome, keys)
	var wg sync.WaitGroup
	claim := func(s *Store, holder string, i int) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := s.Claim(ctx, claimReq(tenant, digestOf(fmt.Sprint("k", i)), holder, time.Minute))
		if err != nil && !errors.Is(err, kvstore.ErrUnavailable) {
			t.Errorf("Claim of key %d by %s: %v, want a result or ErrUnavailable", i, holder, err)
		}
		return err == nil && res.Claimed
	}
	killed := make(chan struct{})
	for i := range keys {
		if i == keys/4 {
			natstest.KillStreamLeader(t, servers, natstest.GlobalAccount, "KV_"+bucket)
			close(killed)
		}
		wg.Add(2)
		go func() { defer wg.Done(); got[i].a = claim(a, "a", i) }()
		go func() { defer wg.Done(); got[i].b = claim(b, "b", i) }()
		time.Sleep(20 * time.Millisecond)
	}
	<-killed

	// The holder records through the failover; ErrUnavailable while no leader
	// answers, then success. Never ErrNotHolder.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := a.Record(ctx, lease, "recorded through a failover")
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, kvstore.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Record during failover: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()

	for i, o := range got {
		if o.a && o.b {
			t.Errorf("key %d granted to both stores", i)
		}
		if !o.a && !o.b {
			continue // both unavailable: allowed, the key may hold either's claim
		}
		want := "a"
		if o.b {
			want = "b"
		}
		rec, err := b.Get(testCtx(t), tenant, digestOf(fmt.Sprint("k", i)))
		if err != nil || rec.Holder != want {
			t.Errorf("key %d: granted to %s, record %+v, %v", i, want, rec, err)
		}
	}
	rec, err := b.Get(testCtx(t), tenant, held)
	if err != nil || rec.State != kvstore.StateCompleted {
		t.Errorf("held key after failover: %+v, %v; want completed", rec, err)
	}
}

// TestReadYourWritesAcrossServers: a claim made through one server is seen at
// once by a store connected to another: reads go to the leader, not to a
// follower that may not have applied the write yet.
func TestReadYourWritesAcrossServers(t *testing.T) {
	servers := testCluster(t)
	bucket := uniqueBucket()
	writer, _ := newTestStore(t, []*server.Server{servers[0]}, Config{Bucket: bucket, Replicas: 3})
	readers := []*Store{}
	for _, srv := range servers[1:] {
		r, _ := newTestStore(t, []*server.Server{srv}, Config{Bucket: bucket, Replicas: 3})
		readers = append(readers, r)
	}
	tenant := newTenant()
	for i := range 100 {
		d := digestOf(fmt.Sprint("ryw", i))
		l := mustClaim(t, writer, claimReq(tenant, d, "w", time.Minute))
		r := readers[i%len(readers)]
		if rec, err := r.Get(testCtx(t), tenant, d); err != nil || rec.Holder != "w" {
			t.Fatalf("key %d: Get right after the claim through another server = %+v, %v", i, rec, err)
		}
		if err := writer.Release(testCtx(t), l); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Get(testCtx(t), tenant, d); !errors.Is(err, kvstore.ErrNotFound) {
			t.Fatalf("key %d: Get right after the release through another server = %v, want ErrNotFound", i, err)
		}
	}
}
