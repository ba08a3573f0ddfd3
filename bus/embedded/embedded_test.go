package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/embedded"
)

func shutdownServer(t *testing.T, s *server.Server) {
	t.Helper()
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
}

// TestStartPortInUse occupies a port the way a system NATS server
// would, and expects a clear refusal instead of a server that logs and dies.
func TestStartPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	addr := fmt.Sprintf("127.0.0.1:%d", port)

	s, err := embedded.Start(embedded.Config{Port: port, StoreDir: t.TempDir()})
	if err == nil {
		shutdownServer(t, s)
		t.Fatal("Start on an occupied port succeeded")
	}
	if !errors.Is(err, embedded.ErrPortInUse) {
		t.Fatalf("error %v does not match ErrPortInUse", err)
	}
	var pe *embedded.PortInUseError
	if !errors.As(err, &pe) || pe.Addr != addr {
		t.Fatalf("error %v is not a *PortInUseError for %s", err, addr)
	}
	msg := err.Error()
	for _, want := range []string{addr + " is already in use", "--nats-port", "TOOLEXEC_NATS_PORT", "--server nats://" + addr} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
}

func TestStartSyncsByDefault(t *testing.T) {
	tests := []struct {
		name         string
		interval     time.Duration
		wantAlways   bool
		wantInterval time.Duration
	}{
		{name: "default: always", wantAlways: true},
		{name: "lazy", interval: 2 * time.Minute, wantInterval: 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: t.TempDir(), SyncInterval: tt.interval})
			if err != nil {
				t.Fatal(err)
			}
			shutdownServer(t, s)
			jc := s.JetStreamConfig()
			if jc == nil {
				t.Fatal("JetStream is not enabled")
			}
			if jc.SyncAlways != tt.wantAlways || (tt.wantInterval != 0 && jc.SyncInterval != tt.wantInterval) {
				t.Errorf("sync always %t interval %v, want %t %v", jc.SyncAlways, jc.SyncInterval, tt.wantAlways, tt.wantInterval)
			}
			serves(t, s)
		})
	}
}

func TestStartInProcess(t *testing.T) {
	var logs logBuffer
	s, err := embedded.Start(embedded.Config{InProcess: true, StoreDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	shutdownServer(t, s)
	if s.Addr() != nil {
		t.Errorf("an in-process server listens on %v", s.Addr())
	}
	nc, err := bus.Connect(bus.ConnectConfig{InProcess: s, URL: "nats://127.0.0.1:1", Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := bus.EnsureStreams(ctxT(t), js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "Server is ready") {
		t.Errorf("the server's log did not reach the logger: %q", logs.String())
	}
}

func TestStartNeedsStoreDir(t *testing.T) {
	if _, err := embedded.Start(embedded.Config{Port: embedded.RandomPort}); !errors.Is(err, embedded.ErrInvalidConfig) {
		t.Errorf("Start without StoreDir = %v, want ErrInvalidConfig", err)
	}
	if _, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: t.TempDir(), SyncInterval: -1}); !errors.Is(err, embedded.ErrInvalidConfig) {
		t.Errorf("Start with a negative interval = %v, want ErrInvalidConfig", err)
	}
}

// BenchmarkPublish measures what syncing before every acknowledgement
// costs: 32 publishers per CPU on a file stream, with sync_interval always and
// with the server's default lazy sync.
func BenchmarkPublish(b *testing.B) {
	for _, bc := range []struct {
		name     string
		interval time.Duration
	}{{"sync=always", 0}, {"sync=2m", 2 * time.Minute}} {
		b.Run(bc.name, func(b *testing.B) {
			s, err := embedded.Start(embedded.Config{Port: embedded.RandomPort, StoreDir: b.TempDir(), SyncInterval: bc.interval})
			if err != nil {
				b.Fatal(err)
			}
			defer func() { s.Shutdown(); s.WaitForShutdown() }()
			nc, err := bus.Connect(bus.ConnectConfig{URL: s.ClientURL(), Logger: testLogger()})
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			js, _ := jetstream.New(nc)
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "B", Subjects: []string{"b.>"}}); err != nil {
				b.Fatal(err)
			}
			payload := make([]byte, 256)
			b.ResetTimer()
			b.SetParallelism(32) // 32 × GOMAXPROCS publishers
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := js.Publish(ctx, "b.x", payload); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
