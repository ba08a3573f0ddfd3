package natsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/retry"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
)

func TestNewDefaults(t *testing.T) {
	ctx := testCtx(t)
	_, js := connectTo(t, []*server.Server{single})
	s, err := New(ctx, js, Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), DefaultBucket) })
	if s.Bucket() != "toolexec_idempotency" {
		t.Errorf("default bucket %q", s.Bucket())
	}
	info := streamInfo(t, js, DefaultBucket)
	cfg := info.Config
	if cfg.MaxAge != 24*time.Hour || cfg.MaxMsgsPerSubject != 1 || cfg.Replicas != 1 || cfg.Storage != jetstream.FileStorage {
		t.Errorf("default bucket: MaxAge %v, history %d, replicas %d, storage %v; want 24h, 1, 1, file",
			cfg.MaxAge, cfg.MaxMsgsPerSubject, cfg.Replicas, cfg.Storage)
	}
	// Retention is the bucket's MaxAge, not per-key TTLs: those need
	// AllowMsgTTL, and kv.Update would drop them.
	if cfg.AllowMsgTTL || cfg.SubjectDeleteMarkerTTL != 0 {
		t.Errorf("bucket allows per-message TTLs (AllowMsgTTL %t, marker TTL %v): the store must not rely on them", cfg.AllowMsgTTL, cfg.SubjectDeleteMarkerTTL)
	}

	// A second New with another retention updates the bucket in place.
	if _, err := New(ctx, js, Config{Retention: time.Hour}); err != nil {
		t.Fatalf("New on an existing bucket: %v", err)
	}
	if got := streamInfo(t, js, DefaultBucket).Config.MaxAge; got != time.Hour {
		t.Errorf("after New with Retention 1h: MaxAge %v", got)
	}
}

func streamInfo(t testing.TB, js jetstream.JetStream, bucket string) *jetstream.StreamInfo {
	t.Helper()
	st, err := js.Stream(testCtx(t), "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return info
}

func TestNewRefusesBadConfig(t *testing.T) {
	_, js := connectTo(t, []*server.Server{single})
	tests := []struct {
		name string
		cfg  Config
	}{
		{"bucket with a dot", Config{Bucket: "a.b"}},
		{"bucket with a space", Config{Bucket: "a b"}},
		{"replicas 6", Config{Bucket: "x", Replicas: 6}},
		{"negative replicas", Config{Bucket: "x", Replicas: -1}},
		{"negative retention", Config{Bucket: "x", Retention: -time.Second}},
		{"negative max value", Config{Bucket: "x", MaxValueSize: -2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(testCtx(t), js, tt.cfg); !errors.Is(err, kvstore.ErrInvalid) {
				t.Errorf("New(%+v) = %v, want ErrInvalid", tt.cfg, err)
			}
		})
	}
	if _, err := New(testCtx(t), nil, Config{}); !errors.Is(err, kvstore.ErrInvalid) {
		t.Errorf("New with nil JetStream = %v, want ErrInvalid", err)
	}
}

func TestNewUnreachable(t *testing.T) {
	nc, js := connectTo(t, []*server.Server{single})
	nc.Close()
	if _, err := New(testCtx(t), js, Config{Bucket: uniqueBucket()}); !errors.Is(err, kvstore.ErrUnavailable) {
		t.Errorf("New on a closed connection = %v, want ErrUnavailable", err)
	}
}

// TestNewSurvivesLostReplies: the first reply to each of New's requests is
// dropped after the request took effect. One New gives up with ErrUnavailable
// when its deadline passes; New called again under retry.Setup, as the
// executor calls it, succeeds within the caller's deadline.
func TestNewSurvivesLostReplies(t *testing.T) {
	nc, js := connectTo(t, []*server.Server{single})
	lossy := natstest.NewLossyAPI(t, nc)
	bucket := uniqueBucket()
	t.Cleanup(func() { _ = js.DeleteKeyValue(context.Background(), bucket) })
	short, cancel := context.WithTimeout(testCtx(t), 300*time.Millisecond)
	_, err := New(short, lossy, Config{Bucket: bucket})
	cancel()
	if !errors.Is(err, kvstore.ErrUnavailable) {
		t.Fatalf("New whose reply was lost = %v, want ErrUnavailable", err)
	}
	start := time.Now()
	err = retry.Setup(testCtx(t), 300*time.Millisecond, func(ctx context.Context) (err error) {
		_, err = New(ctx, lossy, Config{Bucket: bucket})
		return err
	})
	if err != nil {
		t.Fatalf("New under retry.Setup with lost replies: %v", err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("New took %v", d)
	}
	// CreateOrUpdateKeyValue asks for the account's info, then tries an update
	// and creates the stream when there is none; then New looks the stream up.
	stream := "KV_" + bucket
	want := []string{"INFO", "STREAM.UPDATE." + stream, "STREAM.CREATE." + stream, "STREAM.INFO." + stream}
	if got := lossy.Dropped(); !slices.Equal(got, want) {
		t.Errorf("dropped replies %q, want %q", got, want)
	}
	if got := streamInfo(t, js, bucket).Config.MaxMsgsPerSubject; got != 1 {
		t.Errorf("bucket made through lost replies keeps %d values a key", got)
	}
}

// TestKeyLayout: the record lives under <tenant>.<digest> as compact JSON that
// names the holder and claim, with no server times in it.
func TestKeyLayout(t *testing.T) {
	s, js := newTestStore(t, []*server.Server{single}, Config{})
	tenant, d := newTenant(), digestOf("layout")
	l := mustClaim(t, s, claimReq(tenant, d, "worker-1", time.Minute))
	kv, err := js.KeyValue(testCtx(t), s.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(testCtx(t), tenant+"."+d)
	if err != nil {
		t.Fatalf("the record is not under <tenant>.<digest>: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(e.Value(), &m); err != nil {
		t.Fatalf("value is not JSON: %v: %s", err, e.Value())
	}
	tok, _ := parseToken(l.Token)
	if m["h"] != "worker-1" || m["s"] != "claimed" || m["c"] != tok.Value.Claim || m["l"] != float64(time.Minute) {
		t.Errorf("stored value %s lacks holder, state, claim id or lease", e.Value())
	}
	if tok.Rev != e.Revision() {
		t.Errorf("lease token revision %d, entry revision %d", tok.Rev, e.Revision())
	}
}

// TestServerDown: with the server gone (the client still trying to reconnect),
// operations end with ErrUnavailable at their context's deadline, and Claim
// grants nothing.
func TestServerDown(t *testing.T) {
	t.Parallel() // sleeps: overlap with the others
	srv := natstest.Start(t)
	s, _ := newTestStore(t, []*server.Server{srv}, Config{})
	tenant := newTenant()
	natstest.Shutdown(srv)

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	res, err := s.Claim(ctx, claimReq(tenant, digestOf("down"), "a", time.Minute))
	if res.Claimed || !errors.Is(err, kvstore.ErrUnavailable) {
		t.Errorf("Claim with the server down = %+v, %v; want not claimed, ErrUnavailable", res, err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := s.Get(ctx, tenant, digestOf("down")); !errors.Is(err, kvstore.ErrUnavailable) {
		t.Errorf("Get with the server down = %v, want ErrUnavailable", err)
	}
}

// TestStoreClose: after Close every call fails with ErrUnavailable, and a blocked
// Wait returns.
func TestStoreClose(t *testing.T) {
	t.Parallel() // sleeps: overlap with the others
	s, _ := newTestStore(t, []*server.Server{single}, Config{})
	tenant, d := newTenant(), digestOf("close")
	mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
	res, err := s.Claim(testCtx(t), claimReq(tenant, d, "b", time.Minute))
	if err != nil || res.Claimed {
		t.Fatalf("second Claim = %+v, %v", res, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Wait(testCtx(t), res.Record)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, kvstore.ErrUnavailable) {
			t.Errorf("Wait ended by Close = %v, want ErrUnavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not wake a blocked Wait")
	}
	if _, err := s.Claim(testCtx(t), claimReq(tenant, digestOf("after"), "c", time.Minute)); !errors.Is(err, kvstore.ErrUnavailable) {
		t.Errorf("Claim after Close = %v, want ErrUnavailable", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// faultKV wraps a bucket to lose answers: a write that lands but whose
// acknowledgement is replaced by a timeout (as during a leader change), or a
// write that times out without landing. It also records every error a write
// of a value (the store's update, Claim's included) returned.
type faultKV struct {
	jetstream.KeyValue
	pub            publisher
	mu             sync.Mutex
	loseUpdateAcks int
	failUpdates    int
	loseDeleteAcks int
	updateErrs     []error
}

func (f *faultKV) take(n *int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

// PublishMsg is the store's write of a value.
func (f *faultKV) PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	if f.take(&f.failUpdates) {
		return nil, nats.ErrTimeout
	}
	ack, err := f.pub.PublishMsg(ctx, m, opts...)
	if err != nil {
		f.mu.Lock()
		f.updateErrs = append(f.updateErrs, err)
		f.mu.Unlock()
		return nil, err
	}
	if f.take(&f.loseUpdateAcks) {
		return nil, nats.ErrTimeout
	}
	return ack, nil
}

func (f *faultKV) Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error {
	err := f.KeyValue.Delete(ctx, key, opts...)
	if err == nil && f.take(&f.loseDeleteAcks) {
		return nats.ErrTimeout
	}
	return err
}

func withFaults(s *Store) *faultKV {
	f := &faultKV{KeyValue: s.kv, pub: s.pub}
	s.kv, s.pub = f, f
	return f
}

// TestLostCreateAck: a claim's write that landed but whose answer was lost is
// recognised as the caller's own claim; the lease it returns works. So is one
// over a delete marker.
func TestLostCreateAck(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{})
	f := withFaults(s)
	tenant := newTenant()
	released := digestOf("released")
	if err := s.Release(testCtx(t), mustClaim(t, s, claimReq(tenant, released, "a", time.Minute))); err != nil {
		t.Fatal(err)
	}
	f.loseUpdateAcks = 1
	if res, err := s.Claim(testCtx(t), claimReq(tenant, released, "a", time.Minute)); err != nil || !res.Claimed {
		t.Fatalf("Claim over a delete marker whose ack was lost = %+v, %v; want claimed", res, err)
	}

	d := digestOf("lost-create")
	f.loseUpdateAcks = 1
	res, err := s.Claim(testCtx(t), claimReq(tenant, d, "a", time.Minute))
	if err != nil || !res.Claimed {
		t.Fatalf("Claim whose create ack was lost = %+v, %v; want claimed", res, err)
	}
	if f.loseUpdateAcks != 0 {
		t.Fatal("the fault was not triggered")
	}
	if err := s.Record(testCtx(t), res.Lease, "ok"); err != nil {
		t.Fatalf("Record with the recovered lease: %v", err)
	}
	// Another claimer still loses.
	res, err = s.Claim(testCtx(t), claimReq(tenant, d, "b", time.Minute))
	if err != nil || res.Claimed || res.Record.Outcome != "ok" {
		t.Errorf("Claim after = %+v, %v; want refused with the outcome", res, err)
	}
}

// TestLostUpdateAck: a holder write that landed but whose answer was lost is
// found by its write id and reported done, not refused as a conflict with
// itself; a write that timed out without landing is retried.
func TestLostUpdateAck(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{})
	f := withFaults(s)
	tenant := newTenant()

	d := digestOf("lost-update")
	l := mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
	f.loseUpdateAcks = 1
	if err := s.Record(testCtx(t), l, "landed"); err != nil {
		t.Fatalf("Record whose ack was lost = %v, want nil", err)
	}
	if rec, _ := s.Get(testCtx(t), tenant, d); rec.State != kvstore.StateCompleted || rec.Outcome != "landed" {
		t.Errorf("after Record: %+v", rec)
	}

	d = digestOf("failed-update")
	l = mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
	f.failUpdates = 1
	if err := s.MarkIndeterminate(testCtx(t), l, "body_failed", true); err != nil {
		t.Fatalf("MarkIndeterminate whose first write timed out = %v, want nil", err)
	}
	if rec, _ := s.Get(testCtx(t), tenant, d); rec.State != kvstore.StateIndeterminate {
		t.Errorf("after MarkIndeterminate: %+v", rec)
	}

	d = digestOf("lost-delete")
	l = mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
	f.loseDeleteAcks = 1
	if err := s.Release(testCtx(t), l); err != nil {
		t.Fatalf("Release whose ack was lost = %v, want nil", err)
	}
	if _, err := s.Get(testCtx(t), tenant, d); !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("after Release: %v, want ErrNotFound", err)
	}
}

// TestLeaseSurvivesLostRenewAck: fencing is by claim, so a holder whose Renew
// answer was lost can go on with the lease it had; another claim of the key still
// fences it out.
func TestLeaseSurvivesLostRenewAck(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{})
	f := withFaults(s)
	tenant, d := newTenant(), digestOf("renew")
	l := mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
	f.loseUpdateAcks = 1
	nl, err := s.Renew(testCtx(t), l, 2*time.Minute)
	if err != nil {
		t.Fatalf("Renew whose ack was lost = %v, want recognised", err)
	}
	if nl.Token == l.Token {
		t.Error("Renew returned the old token")
	}
	// Both copies name the same claim.
	if err := s.Record(testCtx(t), l, "with the pre-renew lease"); err != nil {
		t.Fatalf("Record with the lease from before the renewal: %v", err)
	}
	if err := s.Record(testCtx(t), nl, "again"); !errors.Is(err, kvstore.ErrNotHolder) {
		t.Errorf("Record after Record = %v, want ErrNotHolder", err)
	}
}

// TestLeaseOfAnotherHolder: a token is bound to its holder and its key.
func TestLeaseOfAnotherHolder(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{})
	tenant := newTenant()
	d1, d2 := digestOf("k1"), digestOf("k2")
	l1 := mustClaim(t, s, claimReq(tenant, d1, "a", time.Minute))
	l2 := mustClaim(t, s, claimReq(tenant, d2, "b", time.Minute))

	forged := l1
	forged.Holder = "b"
	if err := s.Record(testCtx(t), forged, "x"); !errors.Is(err, kvstore.ErrNotHolder) {
		t.Errorf("Record with another holder's name on the lease = %v, want ErrNotHolder", err)
	}
	moved := l2
	moved.Key = d1 // b's token, aimed at a's key
	moved.Holder = "b"
	if err := s.Record(testCtx(t), moved, "x"); !errors.Is(err, kvstore.ErrNotHolder) {
		t.Errorf("Record with a token of another key = %v, want ErrNotHolder", err)
	}
	if rec, _ := s.Get(testCtx(t), tenant, d1); rec.State != kvstore.StateClaimed || rec.Holder != "a" {
		t.Errorf("record changed by refused writes: %+v", rec)
	}
}

// TestTakeOverJudgedByServer: TakeOver goes by the server's timestamps, not by
// the times in the record the caller hands it: a seen record whose times say the
// lease ran out long ago cannot take a running claim.
func TestTakeOverJudgedByServer(t *testing.T) {
	t.Parallel() // sleeps: overlap with the others
	s, _ := newTestStore(t, []*server.Server{single}, Config{})
	tenant, d := newTenant(), digestOf("forged")
	mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
	seen, err := s.Get(testCtx(t), tenant, d)
	if err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-time.Hour)
	seen.UpdatedAt, seen.LeaseUntil, seen.Lease, seen.LeaseExpired = long, long, time.Millisecond, true
	if _, err := s.TakeOver(testCtx(t), seen, claimReq(tenant, d, "b", time.Minute)); !errors.Is(err, kvstore.ErrLeaseHeld) {
		t.Errorf("TakeOver with forged times = %v, want ErrLeaseHeld", err)
	}
	// The same with a short real lease, once the server says it ran out.
	d = digestOf("short")
	mustClaim(t, s, claimReq(tenant, d, "a", 200*time.Millisecond))
	seen, _ = s.Get(testCtx(t), tenant, d)
	time.Sleep(300 * time.Millisecond)
	if _, err := s.TakeOver(testCtx(t), seen, claimReq(tenant, d, "b", time.Minute)); err != nil {
		t.Errorf("TakeOver after the server's lease ran out = %v", err)
	}
}

// TestServerNowIsServerTime: the probe's time is the server's, and it does not
// land where a tenant's records or a Forget could reach it.
func TestServerNowIsServerTime(t *testing.T) {
	s, js := newTestStore(t, []*server.Server{single}, Config{})
	before := time.Now()
	now, err := s.serverNow(testCtx(t))
	after := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	// One process, one clock: the server's stamp lies between our readings.
	if now.Before(before.Add(-time.Second)) || now.After(after.Add(time.Second)) {
		t.Errorf("serverNow = %v, outside [%v, %v]", now, before, after)
	}
	kv, _ := js.KeyValue(testCtx(t), s.Bucket())
	if _, err := kv.Get(testCtx(t), clockKey); err != nil {
		t.Fatalf("probe key: %v", err)
	}
	keys, err := kv.ListKeysFiltered(testCtx(t), "*.>")
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		t.Errorf("a tenant filter matched the probe key %q", k)
	}
}

// TestWaitAfterForget: a Forget writes no markers, so watchers hear nothing;
// Wait still returns ErrNotFound, at the lease deadline for a claimed record and
// at the retention deadline for a completed one.
func TestWaitAfterForget(t *testing.T) {
	t.Parallel() // sleeps: overlap with the others
	s, _ := newTestStore(t, []*server.Server{single}, Config{Retention: 2 * time.Second})
	tenant := newTenant()

	held := digestOf("held")
	mustClaim(t, s, claimReq(tenant, held, "a", time.Second))
	res, err := s.Claim(testCtx(t), claimReq(tenant, held, "b", time.Second))
	if err != nil || res.Claimed {
		t.Fatalf("second Claim = %+v, %v", res, err)
	}
	done := digestOf("done")
	l := mustClaim(t, s, claimReq(tenant, done, "a", time.Minute))
	if err := s.Record(testCtx(t), l, "ok"); err != nil {
		t.Fatal(err)
	}
	doneRec, err := s.Get(testCtx(t), tenant, done)
	if err != nil {
		t.Fatal(err)
	}

	type result struct {
		rec kvstore.Record
		err error
	}
	waitOn := func(seen kvstore.Record) <-chan result {
		ch := make(chan result, 1)
		go func() {
			r, err := s.Wait(testCtx(t), seen)
			ch <- result{r, err}
		}()
		return ch
	}
	heldCh, doneCh := waitOn(res.Record), waitOn(doneRec)
	time.Sleep(100 * time.Millisecond)
	if _, err := s.Forget(testCtx(t), tenant); err != nil {
		t.Fatal(err)
	}
	for name, ch := range map[string]<-chan result{"claimed": heldCh, "completed": doneCh} {
		select {
		case r := <-ch:
			if !errors.Is(r.err, kvstore.ErrNotFound) {
				t.Errorf("Wait on a forgotten %s record = %+v, %v; want ErrNotFound", name, r.rec, r.err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("Wait on a forgotten %s record did not return", name)
		}
	}
}

// TestWaitRecordExpires: a Wait on a completed record returns ErrNotFound once
// the bucket's MaxAge removes it, though that makes no watch event.
func TestWaitRecordExpires(t *testing.T) {
	t.Parallel() // sleeps: overlap with the others
	s, _ := newTestStore(t, []*server.Server{single}, Config{Retention: time.Second})
	tenant, d := newTenant(), digestOf("expires")
	l := mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
	if err := s.Record(testCtx(t), l, "ok"); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(testCtx(t), tenant, d)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := s.Wait(ctx, rec); !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("Wait on a record past its retention = %v, want ErrNotFound", err)
	}
}

// TestRetentionNeedsNoPerKeyTTL: records written by Update (Record) carry no
// per-message TTL, and still leave at the retention: MaxAge applies to every
// message, so that Update drops per-key TTLs does not matter.
func TestRetentionNeedsNoPerKeyTTL(t *testing.T) {
	t.Parallel() // sleeps: overlap with the others
	s, js := newTestStore(t, []*server.Server{single}, Config{Retention: time.Second})
	tenant, d := newTenant(), digestOf("ttl")
	l := mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
	if err := s.Record(testCtx(t), l, "ok"); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(testCtx(t), "KV_"+s.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := st.GetLastMsgForSubject(testCtx(t), "$KV."+s.Bucket()+"."+tenant+"."+d)
	if err != nil {
		t.Fatal(err)
	}
	if ttl := msg.Header.Get(jetstream.MsgTTLHeader); ttl != "" {
		t.Errorf("record written with a per-message TTL %q", ttl)
	}
	wait.EventuallyNoError(t, 15*time.Second, "the record to go, past a retention of 1s", func() error {
		if _, err := s.Get(testCtx(t), tenant, d); !errors.Is(err, kvstore.ErrNotFound) {
			return fmt.Errorf("Get: %v, want ErrNotFound", err)
		}
		return nil
	})
	// The key is free again.
	mustClaim(t, s, claimReq(tenant, d, "b", time.Minute))
}

// TestTooLarge: an outcome or reason that does not fit is refused with
// ErrTooLarge, nothing is written and the lease still holds.
func TestTooLarge(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		size int
	}{
		{"server max_payload", Config{}, 1 << 20},
		{"configured MaxValueSize", Config{MaxValueSize: 2048}, 4096},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestStore(t, []*server.Server{single}, tt.cfg)
			tenant, d := newTenant(), digestOf("big")
			l := mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
			big := strings.Repeat("x", tt.size)
			if err := s.Record(testCtx(t), l, big); !errors.Is(err, kvstore.ErrTooLarge) {
				t.Errorf("Record of %d bytes = %v, want ErrTooLarge", tt.size, err)
			}
			if err := s.MarkIndeterminate(testCtx(t), l, big, true); !errors.Is(err, kvstore.ErrTooLarge) {
				t.Errorf("MarkIndeterminate with a %d-byte reason = %v, want ErrTooLarge", tt.size, err)
			}
			if err := s.Record(testCtx(t), l, "small"); err != nil {
				t.Errorf("Record of a small outcome after the refusals: %v", err)
			}
		})
	}
	// The bucket itself enforces the configured limit.
	s, js := newTestStore(t, []*server.Server{single}, Config{MaxValueSize: 2048})
	if got := streamInfo(t, js, s.Bucket()).Config.MaxMsgSize; got != 2048 {
		t.Errorf("bucket MaxMsgSize %d, want 2048", got)
	}
}

// TestNonUTF8RoundTrip: outcomes and reasons are bytes; invalid UTF-8 survives.
func TestNonUTF8RoundTrip(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{})
	tenant, d := newTenant(), digestOf("bytes")
	l := mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
	out := "\xff\xfe\x00binary\xc3\x28"
	if err := s.Record(testCtx(t), l, out); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Get(testCtx(t), tenant, d)
	if err != nil || rec.Outcome != out {
		t.Errorf("Get = %q, %v; want %q", rec.Outcome, err, out)
	}
}

// TestDumpRaw: the dump shows the tenant's records with their keys, and only
// theirs.
func TestDumpRaw(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{})
	a, b := newTenant(), newTenant()
	mustClaim(t, s, claimReq(a, digestOf("1"), "x", time.Minute))
	l := mustClaim(t, s, claimReq(a, digestOf("2"), "x", time.Minute))
	if err := s.Release(testCtx(t), l); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, s, claimReq(b, digestOf("3"), "x", time.Minute))
	raw, err := s.DumpRaw(testCtx(t), a)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 1 || !strings.HasPrefix(string(raw[0]), a+"."+digestOf("1")+" {") {
		t.Errorf("DumpRaw(%s) = %q; want the one live record with its key", a, raw)
	}
}

// TestReadsGoToLeader: the store never reads with direct gets, which any replica
// may answer; it asks the leader with the message-get API. A spy subscription
// sees the requests.
func TestReadsGoToLeader(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{})
	spy := natstest.Connect(t, single)
	direct, err := spy.SubscribeSync("$JS.API.DIRECT.GET.KV_" + s.Bucket() + ".>")
	if err != nil {
		t.Fatal(err)
	}
	leader, err := spy.SubscribeSync("$JS.API.STREAM.MSG.GET.KV_" + s.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	tenant, d := newTenant(), digestOf("reads")
	l := mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
	if res, err := s.Claim(testCtx(t), claimReq(tenant, d, "b", time.Minute)); err != nil || res.Claimed {
		t.Fatalf("second Claim = %+v, %v", res, err)
	}
	if _, err := s.Get(testCtx(t), tenant, d); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkIndeterminate(testCtx(t), l, "body_failed", true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve(testCtx(t), tenant, d, kvstore.Resolution{Outcome: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.serverNow(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	for i := range 4 { // the refused Claim's read, Get, Resolve, the clock probe
		if _, err := leader.NextMsg(5 * time.Second); err != nil {
			t.Fatalf("leader message get %d of 4: %v", i+1, err)
		}
	}
	if n, _, _ := direct.Pending(); n > 0 {
		t.Errorf("%d direct gets: reads must go to the leader", n)
	}
}

// TestClaimRoundTrips counts what Claim sends the server: one write for a free
// key; the refused write and one read of the leader for a held one; for a
// released one, the write the delete marker refuses, the read that finds the
// marker and the write over it.
func TestClaimRoundTrips(t *testing.T) {
	s, _ := newTestStore(t, []*server.Server{single}, Config{})
	spy := natstest.Connect(t, single)
	subscribe := func(subjects ...string) []*nats.Subscription {
		var subs []*nats.Subscription
		for _, subject := range subjects {
			sub, err := spy.SubscribeSync(subject)
			if err != nil {
				t.Fatal(err)
			}
			subs = append(subs, sub)
		}
		return subs
	}
	writes := subscribe("$KV." + s.Bucket() + ".>")
	reads := subscribe("$JS.API.STREAM.MSG.GET.KV_" + s.Bucket())
	direct := subscribe("$JS.API.DIRECT.GET.KV_"+s.Bucket(), "$JS.API.DIRECT.GET.KV_"+s.Bucket()+".>")
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	// taken takes want messages from subs, waiting up to a few seconds for
	// them, then whatever else has come: the server may hand a write to the
	// spy after the writer already has its PubAck (the stream's subscription
	// and the spy's are served in turn), so a flush alone does not prove the
	// spy has seen everything.
	taken := func(subs []*nats.Subscription, want int) int {
		n := 0
		deadline := time.Now().Add(5 * time.Second)
		for n < want && time.Now().Before(deadline) {
			for _, sub := range subs {
				if _, err := sub.NextMsg(10 * time.Millisecond); err == nil {
					n++
				}
			}
		}
		if err := spy.Flush(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		for _, sub := range subs {
			for {
				if _, err := sub.NextMsg(0); err != nil {
					break
				}
				n++
			}
		}
		return n
	}
	count := func(what string, wantWrites, wantReads int) {
		t.Helper()
		w, r, d := taken(writes, wantWrites), taken(reads, wantReads), taken(direct, 0)
		if w != wantWrites || r != wantReads || d != 0 {
			t.Errorf("%s: %d writes, %d leader reads, %d direct gets; want %d, %d, 0", what, w, r, d, wantWrites, wantReads)
		}
	}
	tenant, d := newTenant(), digestOf("round-trips")
	l := mustClaim(t, s, claimReq(tenant, d, "a", time.Minute))
	count("claim of a free key", 1, 0)
	if res, err := s.Claim(testCtx(t), claimReq(tenant, d, "b", time.Minute)); err != nil || res.Claimed || res.Record.Holder != "a" {
		t.Fatalf("Claim of a held key = %+v, %v", res, err)
	}
	count("claim of a held key", 1, 1)
	if err := s.Release(testCtx(t), l); err != nil {
		t.Fatal(err)
	}
	count("release", 1, 0)
	mustClaim(t, s, claimReq(tenant, d, "c", time.Minute))
	count("claim of a released key", 2, 1)
}

// TestWriteWithoutDeadlineEnds: a write whose context has no deadline, to a
// bucket that no longer answers (its stream deleted, a silent subscriber in
// its place), ends with ErrUnavailable after the JetStream context's default
// timeout: the store leaves that bound to nats.go's publish.
func TestWriteWithoutDeadlineEnds(t *testing.T) {
	nc := natstest.Connect(t, single)
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	bucket := uniqueBucket()
	s, err := New(testCtx(t), js, Config{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	tenant := newTenant()
	l := mustClaim(t, s, claimReq(tenant, digestOf("held"), "a", time.Minute))
	if err := js.DeleteKeyValue(testCtx(t), bucket); err != nil {
		t.Fatal(err)
	}
	silent := natstest.Connect(t, single)
	if _, err := silent.Subscribe("$KV."+bucket+".>", func(*nats.Msg) {}); err != nil {
		t.Fatal(err)
	}
	if err := silent.Flush(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	go func() {
		res, err := s.Claim(context.Background(), claimReq(tenant, digestOf("new"), "b", time.Minute))
		if res.Claimed {
			err = errors.New("granted")
		}
		done <- err
	}()
	go func() { done <- s.Record(context.Background(), l, "x") }()
	for range 2 {
		select {
		case err := <-done:
			if !errors.Is(err, kvstore.ErrUnavailable) {
				t.Errorf("write to a silent bucket = %v, want ErrUnavailable", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a write without a deadline did not end")
		}
	}
}
