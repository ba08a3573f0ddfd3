package natstest

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// GlobalAccount is the account clients use when the server defines none.
const GlobalAccount = server.DEFAULT_GLOBAL_ACCOUNT

// readyTimeout bounds how long a server may take to accept connections, and
// clusterTimeout how long a cluster may take to elect its leaders.
const (
	readyTimeout   = 10 * time.Second
	clusterTimeout = 30 * time.Second
)

// Option adjusts a server's options before it starts.
type Option func(*server.Options)

// SyncAlways makes JetStream sync every write to disk before acknowledging it
// (the server setting sync_interval: always), as the executor's embedded server
// does.
func SyncAlways() Option {
	return func(o *server.Options) { o.SyncAlways = true }
}

// WithMaxPayload sets the largest message the server accepts, in bytes.
func WithMaxPayload(n int32) Option {
	return func(o *server.Options) { o.MaxPayload = n }
}

// started remembers the options each running server was started with, so that
// Restart can bring it back on the same ports with the same data.
var started sync.Map // *server.Server -> *server.Options

// Start runs a single-node NATS server with JetStream on a random port of
// 127.0.0.1, storing its data under t.TempDir(), with logging off. The server is
// shut down when the test ends. Start fails the test if the server does not come
// up.
func Start(t testing.TB, opts ...Option) *server.Server {
	t.Helper()
	s, err := RunServer(t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(func() { Shutdown(s) })
	return s
}

// RunServer is [Start] for code without a testing.TB (a TestMain sharing one
// server between a package's tests): the server stores its data in storeDir and
// runs until [Shutdown].
func RunServer(storeDir string, opts ...Option) (*server.Server, error) {
	o := &server.Options{
		ServerName: "natstest",
		Host:       "127.0.0.1",
		Port:       -1,
		JetStream:  true,
		StoreDir:   storeDir,
		NoLog:      true,
		NoSigs:     true,
	}
	for _, opt := range opts {
		opt(o)
	}
	return run(o)
}

// StartCluster runs an n-node JetStream cluster inside this process: every node
// listens for clients and routes on random ports of 127.0.0.1, has its own store
// directory under t.TempDir() and routes to all the others. It returns once
// JetStream has a meta leader that sees all n peers and every node reports itself
// current. The servers are shut down when the test ends.
func StartCluster(t testing.TB, n int, opts ...Option) []*server.Server {
	t.Helper()
	servers, err := RunCluster(t.TempDir(), n, opts...)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(func() { Shutdown(servers...) })
	return servers
}

// RunCluster is [StartCluster] for code without a testing.TB: node i stores its
// data under baseDir/n<i>, and the cluster runs until [Shutdown].
func RunCluster(baseDir string, n int, opts ...Option) ([]*server.Server, error) {
	if n < 1 {
		return nil, fmt.Errorf("cluster of %d nodes", n)
	}
	// Route ports must be known before any node starts, so that each can list
	// the others. Another process may take a port between our probe and the
	// server's bind: then start over with new ports.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		dir := filepath.Join(baseDir, fmt.Sprintf("try%d", attempt))
		ports, err := freePorts(n)
		if err != nil {
			return nil, err
		}
		routes := make([]string, n)
		for i, p := range ports {
			routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", p)
		}
		servers, err := startCluster(dir, ports, opts, func(_ int, o *server.Options) {
			o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		})
		if err != nil {
			lastErr = err
			continue
		}
		if err := WaitClusterReady(servers, clusterTimeout); err != nil {
			Shutdown(servers...)
			lastErr = err
			continue
		}
		return servers, nil
	}
	return nil, fmt.Errorf("starting a %d-node cluster: %w", n, lastErr)
}

// startCluster starts one node per route port in ports, node i listening for
// routes on ports[i]; wire(i, o) sets node i's routes (and anything else the
// layout needs) before opts apply.
func startCluster(dir string, ports []int, opts []Option, wire func(i int, o *server.Options)) ([]*server.Server, error) {
	n := len(ports)
	name := fmt.Sprintf("natstest-%d", time.Now().UnixNano())
	servers := make([]*server.Server, 0, n)
	for i := 0; i < n; i++ {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       -1,
			JetStream:  true,
			StoreDir:   filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			NoLog:      true,
			NoSigs:     true,
			Cluster: server.ClusterOpts{
				Name: name,
				Host: "127.0.0.1",
				Port: ports[i],
			},
		}
		wire(i, o)
		for _, opt := range opts {
			opt(o)
		}
		s, err := run(o)
		if err != nil {
			Shutdown(servers...)
			return nil, err
		}
		servers = append(servers, s)
	}
	return servers, nil
}

// WaitClusterReady waits until the running servers among servers agree on a
// JetStream meta leader that counts every one of them as a peer, and each of
// them is current with the meta group.
func WaitClusterReady(servers []*server.Server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		running := 0
		for _, s := range servers {
			if s.Running() {
				running++
			}
		}
		var leader *server.Server
		current := 0
		for _, s := range servers {
			if !s.Running() {
				continue
			}
			if s.JetStreamIsLeader() {
				leader = s
			}
			if s.JetStreamIsCurrent() {
				current++
			}
		}
		if leader != nil && current == running && len(leader.JetStreamClusterPeers()) >= running {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster not ready after %v (leader: %v, %d of %d current)",
				timeout, leader != nil, current, running)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// Connect connects to s and closes the connection when the test ends.
// Additional nats options are applied after the package's own (a short
// reconnect wait, no reconnect buffer limit changes).
func Connect(t testing.TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	all := append([]nats.Option{nats.Name(t.Name()), nats.ReconnectWait(50 * time.Millisecond)}, opts...)
	nc, err := nats.Connect(s.ClientURL(), all...)
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", s.ClientURL(), err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// ConnectCluster connects to the first server of a cluster, knowing the URLs of
// all the others so that the client fails over when a node stops. The
// connection is closed when the test ends.
func ConnectCluster(t testing.TB, servers []*server.Server, opts ...nats.Option) *nats.Conn {
	t.Helper()
	urls := make([]string, 0, len(servers))
	for _, s := range servers {
		if s.Running() {
			urls = append(urls, s.ClientURL())
		}
	}
	all := append([]nats.Option{
		nats.Name(t.Name()),
		nats.ReconnectWait(50 * time.Millisecond),
		nats.MaxReconnects(-1),
		nats.DontRandomize(),
	}, opts...)
	nc, err := nats.Connect(strings.Join(urls, ","), all...)
	if err != nil {
		t.Fatalf("natstest: connect to cluster: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream returns a JetStream context on nc, failing the test on error.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: jetstream: %v", err)
	}
	return js
}

// StreamLeader waits up to timeout for one of the running servers to lead the
// stream of the given account (use [GlobalAccount] when the servers define no
// accounts) and returns it, or nil if none does in time. A KV bucket b is the
// stream "KV_b".
func StreamLeader(servers []*server.Server, account, stream string, timeout time.Duration) *server.Server {
	deadline := time.Now().Add(timeout)
	for {
		for _, s := range servers {
			if s.Running() && s.JetStreamIsStreamLeader(account, stream) {
				return s
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// KillStreamLeader stops the server leading the stream and returns it (so that
// [Restart] can bring it back). It fails the test if no leader appears within
// ten seconds.
func KillStreamLeader(t testing.TB, servers []*server.Server, account, stream string) *server.Server {
	t.Helper()
	s := StreamLeader(servers, account, stream, 10*time.Second)
	if s == nil {
		t.Fatalf("natstest: stream %s has no leader", stream)
	}
	shutdown(s)
	return s
}

// Restart stops s if it is running and starts a new server with the same
// options, the same client and cluster ports and the same store directory. The
// new server is shut down when the test ends. Callers holding a slice of
// servers should replace s with the result.
func Restart(t testing.TB, s *server.Server) *server.Server {
	t.Helper()
	v, ok := started.Load(s)
	if !ok {
		t.Fatalf("natstest: Restart: server %s was not started by natstest", s.Name())
	}
	o := v.(*server.Options).Clone()
	if a, ok := s.Addr().(*net.TCPAddr); ok && a != nil {
		o.Port = a.Port
	}
	shutdown(s)
	ns, err := run(o)
	if err != nil {
		t.Fatalf("natstest: restart %s: %v", o.ServerName, err)
	}
	t.Cleanup(func() { Shutdown(ns) })
	return ns
}

func run(o *server.Options) (*server.Server, error) {
	opts := o.Clone()
	s, err := server.NewServer(o)
	if err != nil {
		return nil, fmt.Errorf("new server: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(readyTimeout) {
		shutdown(s)
		return nil, fmt.Errorf("server %s not ready after %v", o.ServerName, readyTimeout)
	}
	started.Store(s, opts)
	return s, nil
}

// Shutdown stops the servers and waits until they have stopped. A server
// stopped this way cannot be restarted with [Restart].
func Shutdown(servers ...*server.Server) {
	for _, s := range servers {
		shutdown(s)
		started.Delete(s)
	}
}

func shutdown(s *server.Server) {
	if s == nil {
		return
	}
	s.Shutdown()
	s.WaitForShutdown()
}

// freePorts returns n distinct TCP ports of 127.0.0.1 that were free a moment
// ago.
func freePorts(n int) ([]int, error) {
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// StreamSubjects returns, for every subject of stream matching filter, how many
// messages it holds; it fails the test if the stream cannot be read.
func StreamSubjects(t testing.TB, js jetstream.JetStream, stream, filter string) map[string]uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Subjects == nil {
		return map[string]uint64{}
	}
	return info.State.Subjects
}

// WaitHealthy waits until every running server among servers passes its
// health check (the monitoring endpoint /healthz: JetStream's meta group and
// every stream and consumer replica the server holds are current), and
// returns an error naming a server that does not when timeout passes.
func WaitHealthy(servers []*server.Server, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		bad := ""
		for _, s := range servers {
			if !s.Running() {
				continue
			}
			if h := s.Healthz(nil); h.Status != "ok" {
				bad = fmt.Sprintf("%s: %s %s", s.Name(), h.Status, h.Error)
				break
			}
		}
		if bad == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not healthy after %v: %s", timeout, bad)
		}
		time.Sleep(25 * time.Millisecond)
	}
}
