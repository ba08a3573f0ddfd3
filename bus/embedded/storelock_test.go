package embedded_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/embedded"
	"github.com/tesserix/toolexec/internal/dirlock"
)

func start(t *testing.T, cfg embedded.Config) *server.Server {
	t.Helper()
	s, err := embedded.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	shutdownServer(t, s)
	return s
}

// wantStoreInUse checks that Start(cfg) is refused at once because the server
// at url (empty: in-process) of this process holds dir.
func wantStoreInUse(t *testing.T, cfg embedded.Config, dir, url string) {
	t.Helper()
	began := time.Now()
	s, err := embedded.Start(cfg)
	if err == nil {
		shutdownServer(t, s)
		t.Fatal("a second server started on a held store folder")
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("the refusal took %v", took)
	}
	if !errors.Is(err, embedded.ErrStoreInUse) || !errors.Is(err, dirlock.ErrHeld) {
		t.Fatalf("error %v matches neither ErrStoreInUse nor dirlock.ErrHeld", err)
	}
	var se *embedded.StoreInUseError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *StoreInUseError", err)
	}
	if se.Dir != dir || se.PID != os.Getpid() || se.URL != url {
		t.Errorf("StoreInUseError{Dir: %q, PID: %d, URL: %q}; want {%q, %d, %q}", se.Dir, se.PID, se.URL, dir, os.Getpid(), url)
	}
	holder := fmt.Sprintf("store folder %s is in use by process %d", dir, os.Getpid())
	wants := []string{holder + ": one store folder serves one server at a time", "--data-dir"}
	if url != "" {
		wants = []string{holder + " (" + url + "): ", "--data-dir", "--server " + url}
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
}

// serves checks that s takes a client and JetStream requests.
func serves(t *testing.T, s *server.Server) {
	t.Helper()
	cc := bus.ConnectConfig{URL: s.ClientURL(), Logger: testLogger()}
	if s.Addr() == nil {
		cc.InProcess = s
	}
	nc, err := bus.Connect(cc)
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
}

// TestStartRefusesAHeldStoreDir: while a server runs on a store folder, a
// second Start on it is refused at once, naming the folder and the holder,
// and the holder keeps serving.
func TestStartRefusesAHeldStoreDir(t *testing.T) {
	tests := []struct {
		name   string
		holder embedded.Config
		second embedded.Config
	}{
		{
			name:   "two servers on ports",
			holder: embedded.Config{Port: embedded.RandomPort},
			second: embedded.Config{Port: embedded.RandomPort},
		},
		{
			name:   "the folder spelled otherwise",
			holder: embedded.Config{Port: embedded.RandomPort},
			second: embedded.Config{Port: embedded.RandomPort, StoreDir: "/sub/.."},
		},
		{
			name:   "an in-process server after one on a port",
			holder: embedded.Config{Port: embedded.RandomPort},
			second: embedded.Config{InProcess: true},
		},
		{
			name:   "held by an in-process server",
			holder: embedded.Config{InProcess: true},
			second: embedded.Config{Port: embedded.RandomPort},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			tt.holder.StoreDir = dir
			tt.second.StoreDir = dir + tt.second.StoreDir
			holder := start(t, tt.holder)
			url := ""
			if !tt.holder.InProcess {
				url = holder.ClientURL()
			}
			wantStoreInUse(t, tt.second, dir, url)
			serves(t, holder)
		})
	}
}

// TestShutdownLetsTheStoreDirGo: a server started on the folder of one this
// process has just shut down (Shutdown returned, WaitForShutdown not called)
// starts, as tests that restart the embedded server need, and holds the
// folder in its turn.
func TestShutdownLetsTheStoreDirGo(t *testing.T) {
	dir := t.TempDir()
	cfg := embedded.Config{Port: embedded.RandomPort, StoreDir: dir}
	for i := range 5 {
		s, err := embedded.Start(cfg)
		if err != nil {
			t.Fatalf("start %d: %v", i+1, err)
		}
		serves(t, s)
		wantStoreInUse(t, cfg, dir, s.ClientURL())
		s.Shutdown()
	}
}

// TestFailedStartLetsTheStoreDirGo: a Start that fails after locking the
// folder (here on a taken port) leaves it free.
func TestFailedStartLetsTheStoreDirGo(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	dir := t.TempDir()
	if _, err := embedded.Start(embedded.Config{Port: l.Addr().(*net.TCPAddr).Port, StoreDir: dir}); !errors.Is(err, embedded.ErrPortInUse) {
		t.Fatalf("Start on a taken port: %v; want ErrPortInUse", err)
	}
	cfg := embedded.Config{Port: embedded.RandomPort, StoreDir: dir}
	s := start(t, cfg)
	wantStoreInUse(t, cfg, dir, s.ClientURL())
}
