package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Defaults for [Config].
const (
	// DefaultHost is the address the server listens on: loopback only.
	DefaultHost = "127.0.0.1"
	// DefaultPort is the NATS client port.
	DefaultPort = 4222
	// DefaultServerName names the server.
	DefaultServerName = "toolexec"
	// RandomPort asks for a port the operating system picks.
	RandomPort = -1
)

// readyTimeout bounds how long the embedded server may take to start.
const readyTimeout = 30 * time.Second

// Config configures the NATS server with JetStream that an executor runs
// inside its own process when it is given no NATS URL.
type Config struct {
	// Host is the address to listen on; default DefaultHost (loopback only).
	Host string
	// Port is the client port; default DefaultPort (4222). RandomPort
	// (-1) lets the operating system choose; read it back with
	// (*server.Server).ClientURL.
	Port int
	// StoreDir is where JetStream keeps its data. Required. The server holds it
	// alone, locked, while it runs (see Start).
	StoreDir string
	// SyncInterval is how often JetStream syncs its files to disk. Zero, the
	// default, syncs every write before acknowledging it (the server setting
	// sync_interval: always): a claim acknowledged and then lost to a power
	// failure is a second booking. A positive interval syncs on that period, as
	// nats-server does by default every two minutes: faster, but acknowledged
	// writes can be lost with the machine.
	SyncInterval time.Duration
	// InProcess starts the server without listening on any port; clients reach it
	// with nats.InProcessServer(s) (bus.ConnectConfig.InProcess). For tests and
	// single-process use.
	InProcess bool
	// MaxPayload is the largest message the server accepts, in bytes; default the
	// server's (1 MiB).
	MaxPayload int32
	// ServerName names the server; default DefaultServerName.
	ServerName string
	// Logger receives the server's log (notices as Info, warnings, errors; debug
	// output when the logger is enabled for Debug); nil silences it.
	Logger *slog.Logger
}

// Start starts a NATS server with JetStream as cfg says and returns it
// once it accepts connections. Shut it down with s.Shutdown() and
// s.WaitForShutdown().
//
// Start first takes an exclusive lock on StoreDir (creating the folder if
// missing), held until the server has shut down: two servers on one store
// corrupt it. While another server holds the folder, in another process or in
// this one, it returns at once a [*StoreInUseError], matching ErrStoreInUse,
// that names the folder and that server's pid and client URL. The lock is the
// kernel's, so a holder that died, even by SIGKILL, holds nothing; a server of
// this process that is shutting down is waited for, so that a restart in one
// process works.
//
// It then checks that the port is free: when it is not (this is often a
// machine that already runs a NATS server on 4222) it returns a
// [*PortInUseError], matching ErrPortInUse, that says how to choose another
// port or use the running server. It returns an error matching
// ErrInvalidConfig when StoreDir is empty, and another error when the server
// does not start or starts without JetStream.
func Start(cfg Config) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, invalidConfig("StoreDir is required")
	}
	if cfg.SyncInterval < 0 {
		return nil, invalidConfig("SyncInterval must not be negative")
	}
	lock, err := lockStore(cfg.StoreDir)
	if err != nil {
		return nil, err
	}
	s, err := start(cfg)
	if err != nil {
		lock.release()
		return nil, err
	}
	url := ""
	if !cfg.InProcess {
		url = s.ClientURL()
	}
	if err := lock.hold(s, url); err != nil {
		s.Shutdown()
		s.WaitForShutdown()
		lock.release()
		return nil, err
	}
	return s, nil
}

// start starts the server once its store folder is locked.
func start(cfg Config) (*server.Server, error) {
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		DontListen: cfg.InProcess,
		MaxPayload: cfg.MaxPayload,
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
	}
	if opts.ServerName == "" {
		opts.ServerName = DefaultServerName
	}
	if opts.Host == "" {
		opts.Host = DefaultHost
	}
	if opts.Port == 0 {
		opts.Port = DefaultPort
	}
	if cfg.SyncInterval == 0 {
		opts.SyncAlways = true
	} else {
		opts.SyncInterval = cfg.SyncInterval
	}
	if !cfg.InProcess && opts.Port != RandomPort {
		if err := checkPortFree(opts.Host, opts.Port); err != nil {
			return nil, err
		}
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded NATS: %w", err)
	}
	if cfg.Logger != nil {
		debug := cfg.Logger.Enabled(context.Background(), slog.LevelDebug)
		s.SetLoggerV2(serverLogger{cfg.Logger}, debug, false, false)
	}
	go s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("embedded NATS: server not ready after %v (is %s writable?)", readyTimeout, cfg.StoreDir)
	}
	if !s.JetStreamEnabled() {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("embedded NATS: JetStream did not start (is %s writable?)", cfg.StoreDir)
	}
	return s, nil
}

// checkPortFree binds host:port and lets it go, so that a taken port is reported
// clearly before nats-server meets it (the server only logs the failure).
func checkPortFree(host string, port int) error {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return &PortInUseError{Addr: addr, Err: err}
		}
		return fmt.Errorf("embedded NATS: cannot listen on %s: %w", addr, err)
	}
	return l.Close()
}
