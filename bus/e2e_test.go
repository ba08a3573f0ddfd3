package bus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
)

// downstream is an HTTP service that counts requests per Idempotency-Key, as a
// booking API would see them.
type downstream struct {
	srv *httptest.Server
	hc  *http.Client

	mu     sync.Mutex // protects counts
	counts map[string]int
}

func newDownstream(t *testing.T) *downstream {
	t.Helper()
	ds := &downstream{counts: map[string]int{}}
	ds.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if r.Method != http.MethodPost || key == "" {
			http.Error(w, "POST with an Idempotency-Key, please", http.StatusBadRequest)
			return
		}
		var args struct {
			Flight string `json:"flight"`
		}
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ds.mu.Lock()
		ds.counts[key]++
		ds.mu.Unlock()
		fmt.Fprintf(w, "booked %s", args.Flight)
	}))
	t.Cleanup(ds.srv.Close)
	ds.hc = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	return ds
}

// book is an inline HTTP tool body: it POSTs the arguments with the call's
// idempotency key.
func (ds *downstream) book(ctx context.Context, tc tool.Context, args json.RawMessage) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ds.srv.URL+"/book", bytes.NewReader(args))
	if err != nil {
		return "", tool.NoEffect(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", tc.IdempotencyKey)
	resp, err := ds.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("downstream answered %s: %s", resp.Status, body)
	}
	return string(body), nil
}

func (ds *downstream) snapshot() map[string]int {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := make(map[string]int, len(ds.counts))
	for k, v := range ds.counts {
		out[k] = v
	}
	return out
}

// TestThreeWorkersShareTheConsumer is the guarantee end to end: three workers,
// each with its own connection, dispatcher and store over one KV bucket, take
// 2,000 Effectful calls over 200 keys published concurrently. Each key reaches
// the downstream exactly once, each call has exactly one answer event, and 1,800
// calls are answered deduplicated.
func TestThreeWorkersShareTheConsumer(t *testing.T) {
	threeWorkersShareTheConsumer(t, func(t *testing.T, h *harness, reg *tool.Registry) *worker {
		return h.startWorker(t, reg, bus.WorkerConfig{}, 0)
	})
}

// threeWorkersShareTheConsumer is TestThreeWorkersShareTheConsumer with the
// workers started by startWorker, so that the scenario runs over any store (see
// store_e2e_test.go).
func threeWorkersShareTheConsumer(t *testing.T, startWorker func(t *testing.T, h *harness, reg *tool.Registry) *worker) {
	const (
		keys     = 200
		perKey   = 10
		calls    = keys * perKey
		inFlight = 500
	)
	h := newHarness(t)
	ds := newDownstream(t)
	reg := registry(t, bookTool(t, "book", tool.Effectful, ds.book))
	var workers []*worker
	for range 3 {
		workers = append(workers, startWorker(t, h, reg))
	}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type result struct {
		callID string
		a      events.Answer
		err    error
	}
	results := make(chan result, calls)
	sem := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	// Interleave the keys so that duplicates of one key arrive together.
	for i := range calls {
		k, n := i%keys, i/keys
		c := call("book", "run-1", fmt.Sprintf("call-%d-%d", k, n),
			fmt.Sprintf(`{"flight":"F%03d","request_id":"r-%d-%d"}`, k, k, n))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			a, err := h.client.Call(ctx, c)
			results <- result{c.CallID, a, err}
		}()
	}
	wg.Wait()
	close(results)
	t.Logf("%d calls answered in %v", calls, time.Since(start))

	kinds := map[events.Kind]int{}
	outcomes := map[string]map[string]bool{} // idempotency key -> outcomes seen
	for r := range results {
		if r.err != nil {
			t.Fatalf("call %s: %v", r.callID, r.err)
		}
		if r.a.CallID != r.callID {
			t.Fatalf("call %s answered as %s", r.callID, r.a.CallID)
		}
		kinds[r.a.Kind]++
		if outcomes[r.a.Key] == nil {
			outcomes[r.a.Key] = map[string]bool{}
		}
		outcomes[r.a.Key][r.a.Outcome] = true
	}
	if kinds[events.KindCompleted] != keys || kinds[events.KindDeduplicated] != calls-keys || len(kinds) != 2 {
		t.Errorf("answers by kind = %v, want %d completed and %d deduplicated", kinds, keys, calls-keys)
	}
	if len(outcomes) != keys {
		t.Errorf("answers name %d keys, want %d", len(outcomes), keys)
	}
	for key, seen := range outcomes {
		if len(seen) != 1 {
			t.Errorf("key %s answered with %d different outcomes: %v", key, len(seen), seen)
		}
	}

	counts := ds.snapshot()
	if len(counts) != keys {
		t.Errorf("downstream saw %d keys, want %d", len(counts), keys)
	}
	for key, n := range counts {
		if n != 1 {
			t.Errorf("downstream saw key %s %d times, want once", key, n)
		}
		if _, ok := outcomes[key]; !ok {
			t.Errorf("downstream key %s is not the key of any answer", key)
		}
	}
	var entered int64
	for _, w := range workers {
		entered += w.d.Stats().BodiesEntered.Load()
	}
	if entered != keys {
		t.Errorf("bodies entered %d times, want %d", entered, keys)
	}

	// Exactly one stored answer event per call.
	subjects := eventSubjects(t, h.js, wire.EventSubjects)
	if len(subjects) != calls {
		t.Errorf("TOOLEXEC_EVENTS holds %d subjects, want %d", len(subjects), calls)
	}
	stored := map[events.Kind]int{}
	for subj, n := range subjects {
		if n != 1 {
			t.Errorf("%s holds %d events, want 1", subj, n)
		}
		addr, err := wire.ParseEventSubject(subj)
		if err != nil {
			t.Fatalf("stored subject %s: %v", subj, err)
		}
		stored[addr.Kind]++
	}
	if stored[events.KindCompleted] != keys || stored[events.KindDeduplicated] != calls-keys {
		t.Errorf("stored events by kind = %v", stored)
	}
	if n := streamMsgs(t, h.js, wire.EventStream); n != calls {
		t.Errorf("TOOLEXEC_EVENTS holds %d messages, want %d", n, calls)
	}

	info := consumerSettled(t, h.js)
	if info.NumRedelivered != 0 {
		t.Errorf("consumer redelivered %d calls", info.NumRedelivered)
	}
	wait.Eventually(t, 10*time.Second, "the calls stream to empty", func() bool { return streamMsgs(t, h.js, wire.CallStream) == 0 })
	var received int64
	for i, w := range workers {
		n := w.w.Stats().Received.Load()
		t.Logf("worker %d took %d calls", i, n)
		received += n
	}
	if received != calls {
		t.Errorf("workers received %d messages, want %d (no redeliveries)", received, calls)
	}
	if t.Failed() {
		var sb strings.Builder
		for k, n := range kinds {
			fmt.Fprintf(&sb, "%s=%d ", k, n)
		}
		t.Logf("answers: %s", sb.String())
	}
}
