package bus_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

func TestUnreachable(t *testing.T) {
	dial := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	tests := []struct {
		name string
		give error
		want bool
	}{
		{"no servers", nats.ErrNoServers, true},
		{"no servers, wrapped", fmt.Errorf("connecting: %w", nats.ErrNoServers), true},
		{"name does not resolve", dial(&net.DNSError{Err: "no such host", Name: "nats", IsNotFound: true}), true},
		{"refused", dial(os.NewSyscallError("connect", syscall.ECONNREFUSED)), true},
		{"no route to host", dial(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), true},
		{"network unreachable", dial(os.NewSyscallError("connect", syscall.ENETUNREACH)), true},
		{"reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"read timed out", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, true},
		{"handshake timed out", nats.ErrTimeout, true},
		{"closed during the handshake", io.EOF, true},

		{"nil", nil, false},
		{"authorization", nats.ErrAuthorization, false},
		{"authentication expired", nats.ErrAuthExpired, false},
		{"authentication revoked", nats.ErrAuthRevoked, false},
		{"bad port in the URL", &url.Error{Op: "parse", URL: "nats://h:x", Err: errors.New("invalid port")}, false},
		{"bad address", dial(&net.AddrError{Err: "too many colons in address", Addr: "::::4222"}), false},
		// A missing file's errno has Timeout and Temporary methods, as net.Error
		// has: it must not pass for a network failure.
		{"creds file missing", fmt.Errorf("nats: %w", &fs.PathError{Op: "open", Path: "x.creds", Err: syscall.ENOENT}), false},
		{"unknown certificate authority", x509.UnknownAuthorityError{}, false},
		{"secure connection required", nats.ErrSecureConnRequired, false},
		{"invalid configuration", bus.ErrInvalidConfig, false},
		{"anything else", errors.New("something else"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := bus.Unreachable(tt.give); got != tt.want {
				t.Errorf("Unreachable(%v) = %t, want %t", tt.give, got, tt.want)
			}
		})
	}
}

// TestUnreachableFromConnect holds Unreachable to the errors Connect really
// gives.
func TestUnreachableFromConnect(t *testing.T) {
	tests := []struct {
		name string
		give string
		want bool
	}{
		{"nothing listens", "nats://" + testenv.FreeAddr(t), true},
		{"name does not resolve", "nats://no-such-host.invalid:4222", true},
		{"bad port", "nats://127.0.0.1:port", false},
		{"bad address", "nats://[::1:4222", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, err := bus.Connect(bus.ConnectConfig{URL: tt.give, Logger: testLogger()})
			if err == nil {
				nc.Close()
				t.Fatal("connected")
			}
			if got := bus.Unreachable(err); got != tt.want {
				t.Errorf("Unreachable(%v) = %t, want %t", err, got, tt.want)
			}
		})
	}
}

// onPort starts the test server on addr's port.
func onPort(t *testing.T, addr string) natstest.Option {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return func(o *server.Options) { _, _ = fmt.Sscan(port, &o.Port) }
}

// quick is a WaitConfig that keeps the tests short.
func quick(failed func(int, error)) bus.WaitConfig {
	return bus.WaitConfig{FirstPause: time.Millisecond, MaxPause: 5 * time.Millisecond, Failed: failed}
}

// TestConnectWaitForServer: the server comes up after three failed attempts;
// ConnectWait connects to it, having reported each failure.
func TestConnectWaitForServer(t *testing.T) {
	addr := testenv.FreeAddr(t)
	var failures []error
	nc, err := bus.ConnectWait(context.Background(), bus.ConnectConfig{URL: "nats://" + addr, Logger: testLogger()},
		quick(func(n int, err error) {
			failures = append(failures, err)
			if n != len(failures) {
				t.Errorf("attempt %d reported as %d", len(failures), n)
			}
			if n == 3 {
				natstest.Start(t, onPort(t, addr))
			}
		}))
	if err != nil {
		t.Fatalf("ConnectWait: %v", err)
	}
	defer nc.Close()
	if len(failures) != 3 {
		t.Errorf("%d failures reported, want 3", len(failures))
	}
	for _, err := range failures {
		if !errors.Is(err, nats.ErrNoServers) {
			t.Errorf("failure reported with %v, want ErrNoServers", err)
		}
	}
	if !nc.IsConnected() || nc.ConnectedAddr() != addr {
		t.Errorf("connected %t to %s, want %s", nc.IsConnected(), nc.ConnectedAddr(), addr)
	}
}

// TestConnectWaitEndsWithContext: cancelled, or past its deadline, ConnectWait
// returns an error naming both the context's end and the last failure.
func TestConnectWaitEndsWithContext(t *testing.T) {
	cfg := bus.ConnectConfig{URL: "nats://" + testenv.FreeAddr(t), Logger: testLogger()}
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		attempts := 0
		nc, err := bus.ConnectWait(ctx, cfg, quick(func(n int, _ error) {
			if attempts = n; n == 2 {
				cancel()
			}
		}))
		if nc != nil || !errors.Is(err, context.Canceled) || !errors.Is(err, nats.ErrNoServers) {
			t.Fatalf("ConnectWait = %v, %v; want Canceled and ErrNoServers", nc, err)
		}
		if attempts != 2 {
			t.Errorf("%d attempts, want 2", attempts)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		nc, err := bus.ConnectWait(ctx, cfg, quick(nil))
		if nc != nil || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, nats.ErrNoServers) {
			t.Fatalf("ConnectWait = %v, %v; want DeadlineExceeded and ErrNoServers", nc, err)
		}
	})
}

// TestConnectWaitNoConnectionAfterContext: a server that is up does not make
// ConnectWait hand out a connection once its context has ended.
func TestConnectWaitNoConnectionAfterContext(t *testing.T) {
	s := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	nc, err := bus.ConnectWait(ctx, bus.ConnectConfig{URL: s.ClientURL(), Logger: testLogger()}, quick(nil))
	if nc != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("ConnectWait = %v, %v; want no connection and Canceled", nc, err)
	}
	wait.Eventually(t, 10*time.Second, "the server to lose the connection", func() bool { return s.NumClients() == 0 })
}

// TestConnectWaitFailsAtOnce: errors that waiting cannot cure come back from
// the first attempt, whether a server listens or not.
func TestConnectWaitFailsAtOnce(t *testing.T) {
	s := natstest.Start(t, func(o *server.Options) { o.Username, o.Password = "exec", "pw" })
	down := "nats://" + testenv.FreeAddr(t)
	missing := filepath.Join(t.TempDir(), "missing")
	is := func(target error) func(error) bool { return func(err error) bool { return errors.Is(err, target) } }
	tests := []struct {
		name  string
		give  bus.ConnectConfig
		match func(error) bool
	}{
		{"wrong password", bus.ConnectConfig{URL: s.ClientURL(), User: "exec", Password: "guess"}, is(nats.ErrAuthorization)},
		{"no credentials", bus.ConnectConfig{URL: s.ClientURL()}, is(nats.ErrAuthorization)},
		{"creds file missing", bus.ConnectConfig{URL: down, CredsFile: missing}, is(os.ErrNotExist)},
		{"client certificate missing", bus.ConnectConfig{URL: down, TLSCert: missing, TLSKey: missing}, is(os.ErrNotExist)},
		{"CA file missing", bus.ConnectConfig{URL: down, TLSCA: missing}, is(os.ErrNotExist)},
		{"two ways to authenticate", bus.ConnectConfig{URL: down, User: "u", Token: "t"}, is(bus.ErrInvalidConfig)},
		{"bad URL", bus.ConnectConfig{URL: "nats://127.0.0.1:port"}, func(err error) bool { var ue *url.Error; return errors.As(err, &ue) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The deadline only fences a ConnectWait that would wait for ever.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			tt.give.Logger = testLogger()
			nc, err := bus.ConnectWait(ctx, tt.give, quick(func(n int, err error) {
				t.Errorf("attempt %d reported as a wait: %v", n, err)
			}))
			if nc != nil {
				nc.Close()
			}
			if !tt.match(err) || errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("ConnectWait = %v, want the error at once", err)
			}
		})
	}
}
