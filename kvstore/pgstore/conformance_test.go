package pgstore

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/kvstoretest"
)

var _ kvstoretest.RawDumper = (*Store)(nil)

// Every store in this module withdraws claims read back (kvstore.Withdrawer).
var _ kvstore.Withdrawer = (*Store)(nil)

// TestConformance runs the shared store suite, one fresh schema per subtest on
// one shared pool. Leases and retention are judged by the database clock, so the
// suite sleeps (Advance is nil). The suite's outage check runs on stores in the
// subtest's schema whose database is out of reach: one on a pool of its own,
// closed, and one on a pool that dials an address nothing listens on.
func TestConformance(t *testing.T) {
	pool := testPool(t, nil)
	kvstoretest.Run(t, func(t *testing.T, opts kvstoretest.Options) kvstoretest.Harness {
		s := openStore(t, pool, Config{Retention: opts.Retention})
		cfg := Config{Schema: s.cfg.Schema, Retention: opts.Retention}
		return kvstoretest.Harness{Store: s, Outages: []kvstoretest.Outage{
			{Name: "closed pool", Store: func() kvstore.Store {
				own := testPool(t, nil)
				st := openStore(t, own, cfg)
				own.Close()
				return st
			}},
			{Name: "dead address", Store: func() kvstore.Store {
				cfg.SweepInterval = -1
				st, err := New(ctx(t), deadPool(t), cfg)
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				t.Cleanup(func() { _ = st.Close() })
				return st
			}},
		}}
	})
}

// deadPool returns a pool for the test database's settings that dials a
// 127.0.0.1 port nothing listens on, and closes it at cleanup.
func deadPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).AddrPort().Port()
	_ = l.Close()
	cfg, err := pgxpool.ParseConfig(testenv.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = "127.0.0.1", port
	cfg.ConnConfig.Fallbacks = nil
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
