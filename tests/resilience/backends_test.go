package resilience_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/dbproc"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/kvstore/pgstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
	"github.com/tesserix/toolexec/tool"
)

// opTimeout bounds each store operation's wait for its server in these tests
// (the stores' defaults are longer), so that a black hole turns into an error
// quickly. It is a bound, not an expectation of speed.
const opTimeout = time.Second

// testLog discards logs unless RESILIENCE_TEST_LOG is set.
func testLog() *slog.Logger {
	if os.Getenv("RESILIENCE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// backend is a kind of store whose server a test can run privately.
type backend struct {
	name  string
	start func(t *testing.T) *storeServer
}

// backends are the shared stores under test.
var backends = []backend{
	{"postgres", startPostgres},
	{"redis", startRedis},
	{"jetstream", startJetStream},
}

// storeServer is one private server of a backend.
type storeServer struct {
	// addr is the server's host:port.
	addr string
	// stop shuts the server down politely, crash as abruptly as the backend
	// allows, and start brings it back with its data on the same port.
	stop, crash, start func(t testing.TB)
	// open returns a new store client connecting through addr (the server's own
	// address, or a proxy's), with every operation bounded by opTimeout. The
	// store and its client are closed when the test ends.
	open func(t *testing.T, addr string) kvstore.Store
}

func startPostgres(t *testing.T) *storeServer {
	t.Helper()
	pg := dbproc.StartPostgres(t)
	const schema = "resilience"
	dbproc.PostgresStore(t, pg.URL(), pgstore.Config{Schema: schema, SweepInterval: -1}) // EnsureSchema, once
	return &storeServer{
		addr: pg.Addr(), stop: pg.Stop, crash: pg.Crash, start: pg.Start,
		open: func(t *testing.T, addr string) kvstore.Store {
			t.Helper()
			pool := dbproc.PostgresPool(t, pg.URLVia(addr)+"&connect_timeout=1")
			s, err := pgstore.New(ctxT(t), pool, pgstore.Config{
				Schema: schema, SweepInterval: -1, RecheckInterval: 200 * time.Millisecond,
				OpTimeout: opTimeout, Logger: testLog(),
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

func startRedis(t *testing.T) *storeServer {
	t.Helper()
	r := dbproc.StartRedis(t)
	return &storeServer{
		addr: r.Addr(), stop: r.Stop, crash: r.Crash, start: r.Start,
		open: func(t *testing.T, addr string) kvstore.Store {
			t.Helper()
			c := dbproc.RedisClient(t, r.URLVia(addr), func(o *redis.Options) {
				o.DialTimeout, o.ReadTimeout, o.WriteTimeout = opTimeout, opTimeout, opTimeout
			})
			s, err := redisstore.New(c, redisstore.Config{Prefix: "resilience", WaitRecheck: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

// startJetStream runs an embedded NATS server that syncs every write before
// acknowledging it, as the executor's does. Being in-process it cannot be
// killed: crash is a shutdown too.
func startJetStream(t *testing.T) *storeServer {
	t.Helper()
	// A fixed port, so that a server started again after a shutdown listens
	// where the clients reconnect to.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	var (
		mu  sync.Mutex // protects srv
		srv = natstest.Start(t, natstest.SyncAlways(), func(o *server.Options) { o.Port = port })
	)
	addr := srv.Addr().(*net.TCPAddr).String()
	down := func(testing.TB) {
		mu.Lock()
		defer mu.Unlock()
		srv.Shutdown()
		srv.WaitForShutdown()
	}
	return &storeServer{
		addr: addr, stop: down, crash: down,
		start: func(t testing.TB) {
			mu.Lock()
			defer mu.Unlock()
			srv = natstest.Restart(t, srv)
		},
		open: func(t *testing.T, addr string) kvstore.Store {
			t.Helper()
			// The executor's connection options (bus.Connect), with a short reconnect wait.
			opts, err := bus.ConnectConfig{Name: t.Name(), ReconnectWait: 50 * time.Millisecond, Logger: quietLog}.Options()
			if err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect("nats://"+addr, append(opts, nats.Timeout(opTimeout))...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(opTimeout))
			if err != nil {
				t.Fatal(err)
			}
			s, err := natsstore.New(ctxT(t), js, natsstore.Config{Bucket: "resilience"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
	}
}

// quietLog discards the connection's notices.
var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))

// ctxT returns a context that ends with the test or after two minutes.
func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// waitUsable polls the store until it answers (a record or ErrNotFound), for
// after a server came back: the first operations on a client whose connections
// died may fail.
func waitUsable(t *testing.T, s kvstore.Store) {
	t.Helper()
	wait.EventuallyNoError(t, time.Minute, "the store to come back", func() error {
		c, cancel := context.WithTimeout(context.Background(), 5*opTimeout)
		defer cancel()
		if _, err := s.Get(c, tenant, digest("probe")); err != nil && !errors.Is(err, kvstore.ErrNotFound) {
			return err
		}
		return nil
	})
}

const tenant = "acme"

// digest returns a well-formed key derived from name.
func digest(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:])
}

// booking is an Effectful tool keyed by flight whose body counts its runs per
// idempotency key and can be held inside until released.
type booking struct {
	mu      sync.Mutex               // protects runs and holds
	runs    map[string]int           // by idempotency key
	holds   map[string]chan struct{} // by flight: the body waits for the channel to close
	entered chan string              // receives each flight whose body is entered
	tool    *tool.Tool
}

const bookSchema = `{"type":"object","properties":{"flight":{"type":"string"},"request_id":{"type":"string"}},"required":["flight"]}`

func newBooking(t *testing.T) *booking {
	t.Helper()
	b := &booking{runs: map[string]int{}, holds: map[string]chan struct{}{}, entered: make(chan string, 100)}
	tl, err := tool.New(tool.Spec{
		Name:        "book",
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}},
		Parameters:  json.RawMessage(bookSchema),
	}, b.body)
	if err != nil {
		t.Fatal(err)
	}
	b.tool = tl
	return b
}

func (b *booking) body(ctx context.Context, tc tool.Context, args json.RawMessage) (string, error) {
	var a struct{ Flight string }
	if err := json.Unmarshal(args, &a); err != nil {
		return "", tool.NoEffect(err)
	}
	b.mu.Lock()
	b.runs[tc.IdempotencyKey]++
	n := b.runs[tc.IdempotencyKey]
	hold := b.holds[a.Flight]
	b.mu.Unlock()
	b.entered <- a.Flight
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	return fmt.Sprintf("booked %s (run %d)", a.Flight, n), nil
}

// hold makes the body of flight wait inside until the returned function is
// called.
func (b *booking) hold(flight string) (release func()) {
	ch := make(chan struct{})
	b.mu.Lock()
	b.holds[flight] = ch
	b.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// runsOf returns how many times the body ran for key.
func (b *booking) runsOf(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs[key]
}

// checkOnce fails the test for every key whose body ran more than once.
func (b *booking) checkOnce(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, n := range b.runs {
		if n > 1 {
			t.Errorf("the body ran %d times for key %s", n, k)
		}
	}
}

// dispatcher returns a dispatcher over s serving b, with lease as its claims'
// lease.
func (b *booking) dispatcher(t *testing.T, s kvstore.Store, holder string, lease time.Duration) *dispatch.Dispatcher {
	t.Helper()
	reg, err := tool.NewRegistry(b.tool)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: s, Holder: holder, Lease: lease, Logger: testLog()})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func bookCall(callID, flight string) events.Call {
	return events.Call{
		Tenant: tenant, RunID: "run-1", CallID: callID, Tool: "book",
		Arguments: json.RawMessage(fmt.Sprintf(`{"flight":%q,"request_id":%q}`, flight, callID)),
	}
}
