package natsstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
	"github.com/tesserix/toolexec/kvstore/natsstore"
)

// syncModes are the two fsync settings the store runs under: the embedded
// executor's default (sync before every acknowledgement) and nats-server's
// default (lazy, every two minutes).
var syncModes = []struct {
	name string
	opts []natstest.Option
}{
	{"sync=always", []natstest.Option{natstest.SyncAlways()}},
	{"sync=lazy", nil},
}

// benchStore starts a server of its own (file storage, in a temporary
// directory) and returns a store on it, connected over TCP as an executor is.
func benchStore(b *testing.B, opts []natstest.Option) *natsstore.Store {
	b.Helper()
	srv := natstest.Start(b, opts...)
	js := natstest.JetStream(b, natstest.Connect(b, srv))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := natsstore.New(ctx, js, natsstore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkClaimRecord measures one claim cycle at a time: the latency of a
// create and an update, each acknowledged by the server.
func BenchmarkClaimRecord(b *testing.B) {
	for _, m := range syncModes {
		b.Run(m.name, func(b *testing.B) { kvstoretest.BenchClaimCycles(b, benchStore(b, m.opts)) })
	}
}

// BenchmarkClaimRecordParallel runs claim cycles from 64 goroutines (32 per
// CPU on two CPUs), as an executor with 64 calls in flight does.
func BenchmarkClaimRecordParallel(b *testing.B) {
	for _, m := range syncModes {
		b.Run(m.name, func(b *testing.B) { kvstoretest.BenchClaimCyclesParallel(b, benchStore(b, m.opts)) })
	}
}

// BenchmarkClaimDuplicate measures the claim of a key already completed: the
// refused create and the read of the winner's record, as for every duplicate
// call.
func BenchmarkClaimDuplicate(b *testing.B) {
	kvstoretest.BenchClaimDuplicate(b, benchStore(b, nil))
}

// BenchmarkCount measures one census of the keys awaiting decision
// (kvstore.Census) over a bucket of 20,000 completed records: the pass over
// every live record each executor makes once per --awaiting-interval.
// records/s is how many records one count reads per second.
func BenchmarkCount(b *testing.B) {
	const records = 20_000
	s := benchStore(b, nil)
	ctx := context.Background()
	for range records {
		if err := kvstoretest.ClaimCycle(ctx, s, "bench"); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		got, err := s.Count(ctx, kvstore.StateIndeterminate)
		if err != nil {
			b.Fatal(err)
		}
		if len(got) != 0 {
			b.Fatalf("Count = %v, want no indeterminate records", got)
		}
	}
	b.ReportMetric(float64(records)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
}
