package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// tripHook counts the round trips that carry scripts: script commands sent
// alone, and pipelines of them (not the connections' own set-up pipelines).
// Each waits until gate is closed, and before a pipeline of scripts goes out
// beforePipeline (if set) sees its commands.
type tripHook struct {
	gate           chan struct{}
	alone, piped   atomic.Int64
	beforePipeline func(cmds []redis.Cmder)
}

func newTripHook() *tripHook { return &tripHook{gate: make(chan struct{})} }

func (h *tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" {
			<-h.gate
			h.alone.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if cmds[0].Name() != "evalsha" {
			return next(ctx, cmds)
		}
		<-h.gate
		h.piped.Add(1)
		if h.beforePipeline != nil {
			h.beforePipeline(cmds)
		}
		return next(ctx, cmds)
	}
}

// hookedStore returns a store with cfg over a client of its own that runs h.
func hookedStore(t *testing.T, h *tripHook, cfg redisstore.Config) (*redisstore.Store, *redis.Client) {
	t.Helper()
	c := newClient(t)
	c.AddHook(h)
	return storeOn(t, c, cfg)
}

// burst runs do(i) for i in [0, n) at once, with the hook's gate shut until
// they have all had time to queue, and waits for them all.
func burst(h *tripHook, n int, do func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { do(i) })
	}
	time.Sleep(200 * time.Millisecond) // let the callers queue behind the shut gate
	close(h.gate)
	wg.Wait()
}

// TestPipelineBurst: a burst of concurrent claims goes out in far fewer round
// trips than claims, and every claim is granted and stored.
func TestPipelineBurst(t *testing.T) {
	t.Parallel()
	const n = 64
	h := newTripHook()
	s, _ := hookedStore(t, h, redisstore.Config{})
	results := make([]kvstore.ClaimResult, n)
	errs := make([]error, n)
	burst(h, n, func(i int) {
		results[i], errs[i] = s.Claim(ctx(t), claimReq("acme", fmt.Sprintf("burst-%d", i), "w1", time.Minute))
	})
	alone, piped := h.alone.Load(), h.piped.Load()
	for i := range n {
		if errs[i] != nil || !results[i].Claimed {
			t.Fatalf("claim %d: claimed %t, error %v", i, results[i].Claimed, errs[i])
		}
		rec, err := s.Get(ctx(t), "acme", results[i].Record.Key)
		if err != nil || rec.State != kvstore.StateClaimed || rec.Revision != results[i].Record.Revision {
			t.Fatalf("claim %d read back: %+v, %v; want the claim at revision %d", i, rec, err, results[i].Record.Revision)
		}
	}
	st := s.PipelineStats()
	t.Logf("%d claims: %d scripts sent alone, %d pipelines; stats %+v", n, alone, piped, st)
	if trips := alone + piped; trips >= n/2 {
		t.Errorf("%d claims took %d round trips (%d alone, %d pipelines), want far fewer", n, trips, alone, piped)
	}
	if st.Pipelines < 1 || st.Runs < n/2 || st.Alone != 0 || st.Reloaded != 0 {
		t.Errorf("pipeline stats %+v: want at least one pipeline carrying most claims, none alone or reloaded", st)
	}
}

// TestPipelineMaxBatch: however many runs wait, no pipeline carries more than
// MaxBatch of them, and every claim is still granted.
func TestPipelineMaxBatch(t *testing.T) {
	t.Parallel()
	const n, maxBatch = 48, 4
	h := newTripHook()
	var largest atomic.Int64
	h.beforePipeline = func(cmds []redis.Cmder) {
		for {
			cur := largest.Load()
			if int64(len(cmds)) <= cur || largest.CompareAndSwap(cur, int64(len(cmds))) {
				return
			}
		}
	}
	s, _ := hookedStore(t, h, redisstore.Config{MaxBatch: maxBatch})
	errs := make([]error, n)
	burst(h, n, func(i int) {
		res, err := s.Claim(ctx(t), claimReq("acme", fmt.Sprintf("maxbatch-%d", i), "w1", time.Minute))
		if err == nil && !res.Claimed {
			err = errors.New("not claimed")
		}
		errs[i] = err
	})
	for i, err := range errs {
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	st := s.PipelineStats()
	if got := largest.Load(); got > maxBatch || got < 2 {
		t.Errorf("largest pipeline carried %d runs (stats %+v), want 2 to %d", got, st, maxBatch)
	}
}

// TestPipelineNoScript flushes Redis's script cache just before a pipeline of
// Records goes out: every run is refused with NOSCRIPT, and must be loaded and
// run again, once — a second run of a Record answers ErrNotHolder, since the
// claim is then completed. Not parallel: the flush would cost the other tests
// their cached scripts (which they survive, but their counts would not).
func TestPipelineNoScript(t *testing.T) {
	const n = 32
	h := newTripHook()
	close(h.gate)
	s, _ := hookedStore(t, h, redisstore.Config{Pipelines: 1})
	leases := make([]kvstore.Lease, n)
	for i := range n {
		leases[i] = mustClaim(t, s, claimReq("acme", fmt.Sprintf("noscript-%d", i), "w1", time.Minute)).Lease
	}
	admin := newClient(t)
	var flushed atomic.Bool
	h.gate = make(chan struct{})
	h.beforePipeline = func([]redis.Cmder) {
		if !flushed.Swap(true) {
			if err := admin.ScriptFlush(context.Background()).Err(); err != nil {
				t.Errorf("SCRIPT FLUSH: %v", err)
			}
		}
	}
	errs := make([]error, n)
	burst(h, n, func(i int) { errs[i] = s.Record(ctx(t), leases[i], fmt.Sprintf("out-%d", i)) })
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("record %d after SCRIPT FLUSH: %v", i, errs[i])
		}
		rec, err := s.Get(ctx(t), "acme", leases[i].Key)
		if err != nil || rec.State != kvstore.StateCompleted || rec.Outcome != fmt.Sprintf("out-%d", i) {
			t.Fatalf("record %d read back: %+v, %v", i, rec, err)
		}
	}
	st := s.PipelineStats()
	t.Logf("stats %+v", st)
	if !flushed.Load() || st.Reloaded == 0 {
		t.Fatalf("no pipeline met the flushed cache (flushed %t, stats %+v): the test did not test", flushed.Load(), st)
	}
}

// TestPipelineCancelledCaller cancels the contexts of every other caller
// whose claim is in a pipeline as it goes out, and holds the pipeline: they
// return at once, while it is held, with an error matching
// kvstore.ErrUnavailable and context.Canceled, and the others in the same
// pipeline get their claims.
func TestPipelineCancelledCaller(t *testing.T) {
	t.Parallel()
	const n = 32
	h := newTripHook()
	s, _ := hookedStore(t, h, redisstore.Config{Pipelines: 1})
	var (
		mu      sync.Mutex
		cancels = map[string]context.CancelFunc{} // by digest
		doomed  = map[string]bool{}               // digests whose callers were cancelled
		first   atomic.Bool
		gone    atomic.Int64 // cancelled callers that have returned
	)
	release := make(chan struct{})
	h.beforePipeline = func(cmds []redis.Cmder) {
		if first.Swap(true) {
			return
		}
		mu.Lock()
		// cmds[0] is the sender's own run: its caller sends, and stays.
		for i := 1; i < len(cmds); i += 2 {
			key := fmt.Sprint(cmds[i].Args()[3]) // evalsha sha numkeys KEYS[1] ...
			d := key[strings.LastIndexByte(key, ':')+1:]
			doomed[d] = true
			cancels[d]()
		}
		mu.Unlock()
		<-release
	}
	results := make([]kvstore.ClaimResult, n)
	errs := make([]error, n)
	all := make(chan struct{})
	go func() {
		defer close(all)
		burst(h, n, func(i int) {
			req := claimReq("acme", fmt.Sprintf("cancel-%d", i), "w1", time.Minute)
			cctx, cancel := context.WithCancel(ctx(t))
			defer cancel()
			mu.Lock()
			cancels[req.Key] = cancel
			mu.Unlock()
			results[i], errs[i] = s.Claim(cctx, req)
			if cctx.Err() != nil {
				gone.Add(1)
			}
		})
	}()
	wait.Eventually(t, waitLimit, "the cancelled callers to return while their pipeline is held", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(doomed) > 0 && gone.Load() == int64(len(doomed))
	})
	close(release)
	<-all
	for i := range n {
		d := digest(fmt.Sprintf("cancel-%d", i))
		if doomed[d] {
			if !errors.Is(errs[i], kvstore.ErrUnavailable) || !errors.Is(errs[i], context.Canceled) || results[i] != (kvstore.ClaimResult{}) {
				t.Errorf("cancelled claim %d: %+v, %v; want no answer and ErrUnavailable with context.Canceled", i, results[i], errs[i])
			}
			continue
		}
		if errs[i] != nil || !results[i].Claimed {
			t.Errorf("claim %d beside cancelled ones: claimed %t, error %v", i, results[i].Claimed, errs[i])
		}
	}
	t.Logf("%d of %d callers cancelled in their pipeline; stats %+v", len(doomed), n, s.PipelineStats())
}

// TestPipelineOff: MaxBatch 1 sends every script alone.
func TestPipelineOff(t *testing.T) {
	t.Parallel()
	h := newTripHook()
	s, _ := hookedStore(t, h, redisstore.Config{MaxBatch: 1})
	burst(h, 16, func(i int) {
		mustClaim(t, s, claimReq("acme", fmt.Sprintf("off-%d", i), "w1", time.Minute))
	})
	if got := h.piped.Load(); got != 0 || s.PipelineStats() != (redisstore.PipelineStats{}) {
		t.Fatalf("MaxBatch 1: %d pipelines, stats %+v; want none", got, s.PipelineStats())
	}
}

// TestPipelineConnectionLost black-holes the connection as a pipeline goes
// out: its runs' outcomes are unknown, so each is handed back to its caller,
// who runs it alone, and every one of them ends with kvstore.ErrUnavailable
// (bounded by the client's timeouts), as a run alone does.
func TestPipelineConnectionLost(t *testing.T) {
	t.Parallel()
	const n = 16
	c, px := proxiedClient(t, 1)
	h := newTripHook()
	c.AddHook(h)
	s, err := redisstore.New(c, redisstore.Config{Prefix: uniquePrefix(t, newClient(t)), Pipelines: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var cut atomic.Bool
	h.beforePipeline = func([]redis.Cmder) {
		if !cut.Swap(true) {
			px.Blackhole()
		}
	}
	results := make([]kvstore.ClaimResult, n)
	errs := make([]error, n)
	start := time.Now()
	burst(h, n, func(i int) {
		results[i], errs[i] = s.Claim(context.Background(), claimReq("acme", fmt.Sprintf("lost-%d", i), "w1", time.Minute))
	})
	t.Logf("%d claims through a black hole in %v; stats %+v", n, time.Since(start).Round(time.Millisecond), s.PipelineStats())
	failed := 0
	for i := range n {
		switch {
		case errs[i] == nil && results[i].Claimed: // went out before the black hole
		case errors.Is(errs[i], kvstore.ErrUnavailable) && results[i] == (kvstore.ClaimResult{}):
			failed++
		default:
			t.Errorf("claim %d through a black hole: %+v, %v; want a claim or ErrUnavailable alone", i, results[i], errs[i])
		}
	}
	if st := s.PipelineStats(); failed == 0 || st.Alone == 0 {
		t.Fatalf("%d claims failed, stats %+v: no pipeline met the black hole, the test did not test", failed, st)
	}
	px.Restore()
	wait.Eventually(t, waitLimit, "the store to work again", func() bool {
		_, err := s.Claim(ctx(t), claimReq("acme", "after", "w1", time.Minute))
		return err == nil
	})
}
