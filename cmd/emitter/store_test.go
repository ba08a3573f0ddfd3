package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/dbproc"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/kvstore/pgstore"
	"github.com/tesserix/toolexec/kvstore/redisstore"
)

// directStore is a store an executor would have left behind, and the flags
// that make the emitter work on it directly.
type directStore struct {
	store kvstore.Store // the test's own client, to set up and check records
	flags []string
	// retained reports whether the store keeps its records by the --retention
	// flag (PostgreSQL, Redis) rather than by the bucket's own (JetStream).
	retained bool
}

// storeKinds are the stores --store names.
var storeKinds = []string{"jetstream", "postgres", "redis"}

// openDirect opens a store of the kind named: JetStream KV on e's server, and
// PostgreSQL and Redis on the shared test servers, in a schema or prefix of the
// test's own.
func openDirect(t *testing.T, e *env, kind string) directStore {
	t.Helper()
	switch kind {
	case "jetstream":
		s, err := natsstore.New(ctxT(t), e.js, natsstore.Config{Retention: 72 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return directStore{store: s, flags: []string{"--store", "jetstream"}}
	case "postgres":
		url := testenv.PostgresURL(t)
		s, _ := dbproc.PostgresStore(t, url, pgstore.Config{})
		return directStore{store: s, retained: true,
			flags: []string{"--store", "postgres", "--postgres-url", url, "--postgres-schema", s.Config().Schema}}
	case "redis":
		url := testenv.RedisURL(t)
		s, _ := dbproc.RedisStore(t, url, redisstore.Config{})
		return directStore{store: s, retained: true,
			flags: []string{"--store", "redis", "--redis-url", url, "--redis-prefix", s.Config().Prefix}}
	}
	t.Fatalf("unknown store %q", kind)
	return directStore{}
}

func keyOf(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:])
}

// park leaves an indeterminate record for name in s, as an Effectful call whose
// body failed would, and returns its key.
func park(t *testing.T, s kvstore.Store, tenant, name string) string {
	t.Helper()
	key := keyOf(name)
	res, err := s.Claim(ctxT(t), kvstore.ClaimRequest{Tenant: tenant, Key: key, Holder: "x1", Lease: time.Minute,
		Tool: "book", RunID: "run_d", CallID: "call-" + name})
	if err != nil || !res.Claimed {
		t.Fatalf("claim %s: %+v, %v", name, res, err)
	}
	if err := s.MarkIndeterminate(ctxT(t), res.Lease, string(events.ReasonBodyFailed), true); err != nil {
		t.Fatal(err)
	}
	return key
}

// TestDirectStoreAdmin inspects, resolves and forgets with --store, with no
// executor running, over each store: the store changes as an executor's admin
// would change it, a resolution publishes its resolved audit event to
// TOOLEXEC_EVENTS, and forget purges the tenant's calls and events.
func TestDirectStoreAdmin(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			e := newBareEnv(t, true) // streams, no executor
			ds := openDirect(t, e, kind)
			emit := func(stdin string, args ...string) result {
				t.Helper()
				return e.emit(t, stdin, append(args, ds.flags...)...)
			}
			done, released := park(t, ds.store, tenant, "done"), park(t, ds.store, tenant, "released")

			// inspect
			r := emit("", "inspect", "--tenant", tenant, "--key", done)
			mustExit(t, r, exitOK)
			for name, want := range map[string]string{"state": "indeterminate", "reason": "body_failed", "tool": "book", "call": "call-done"} {
				if got := field(r.stdout, name); got != want {
					t.Errorf("inspect: %s is %q, want %q:\n%s", name, got, want, r.stdout)
				}
			}
			r = emit("", "inspect", "--tenant", tenant, "--key", keyOf("nothing"))
			mustExit(t, r, exitFailed)
			if !strings.Contains(r.stderr, "has no record for key") {
				t.Errorf("inspect of an unknown key: stderr %q", r.stderr)
			}

			// resolve, with its audit event
			audit, err := e.nc.SubscribeSync(wire.KindSubjects(events.KindResolved))
			if err != nil {
				t.Fatal(err)
			}
			args := []string{"resolve", "--json", "--tenant", tenant, "--key", done, "--complete", "--outcome", "PNR-OPS", "--operator", "ops"}
			if ds.retained {
				args = append(args, "--retention", "48h")
			}
			r = emit("", args...)
			mustExit(t, r, exitOK)
			var ri admin.RecordInfo
			if err := json.Unmarshal([]byte(r.stdout), &ri); err != nil || ri.State != kvstore.StateCompleted || ri.Outcome != "PNR-OPS" {
				t.Fatalf("resolve --json: %+v, %v: %q", ri, err, r.stdout)
			}
			rec, err := ds.store.Get(ctxT(t), tenant, done)
			if err != nil || rec.State != kvstore.StateCompleted || rec.Outcome != "PNR-OPS" {
				t.Fatalf("the store after resolve: %+v, %v", rec, err)
			}
			if ds.retained {
				if left := time.Until(rec.ExpiresAt); left < 47*time.Hour {
					t.Errorf("resolved with --retention 48h, the record expires in %v", left)
				}
			}
			m, err := audit.NextMsg(10 * time.Second)
			if err != nil {
				t.Fatalf("no resolved event: %v", err)
			}
			a, err := wire.DecodeAnswer(m.Header, m.Data)
			if err != nil || a.Kind != events.KindResolved || a.Key != done || a.Operator != "ops" || a.Outcome != "PNR-OPS" || a.CallID != "call-done" {
				t.Fatalf("resolved event %+v, %v", a, err)
			}
			r = emit("", "resolve", "--tenant", tenant, "--key", done, "--release")
			mustExit(t, r, exitFailed)
			r = emit("", "resolve", "--tenant", tenant, "--key", released, "--release")
			mustExit(t, r, exitOK)
			if _, err := ds.store.Get(ctxT(t), tenant, released); !errorsIsNotFound(err) {
				t.Fatalf("the released key is still there: %v", err)
			}

			// forget: the records, and the tenant's calls and events
			park(t, ds.store, tenant, "again")
			if _, err := e.js.PublishMsg(ctxT(t), &nats.Msg{Subject: wire.CallSubject(tenant, "book", "c1"), Data: []byte("x")}); err != nil {
				t.Fatal(err)
			}
			r = emit("", "forget", "--yes", "--tenant", tenant)
			mustExit(t, r, exitOK)
			if !strings.HasPrefix(r.stdout, "forgot tenant acme: ") || !strings.Contains(r.stdout, "its calls and events were purged") {
				t.Fatalf("forget: stdout %q", r.stdout)
			}
			if _, err := ds.store.Get(ctxT(t), tenant, done); !errorsIsNotFound(err) {
				t.Fatalf("a forgotten record is still there: %v", err)
			}
			if st := e.callsStored(t); st.Msgs != 0 {
				t.Errorf("TOOLEXEC_CALLS holds %d messages after forget", st.Msgs)
			}
			if kind == "jetstream" { // opening the bucket must not have reconfigured it
				kv, err := e.js.KeyValue(ctxT(t), natsstore.DefaultBucket)
				if err != nil {
					t.Fatal(err)
				}
				if st, err := kv.Status(ctxT(t)); err != nil || st.TTL() != 72*time.Hour {
					t.Errorf("the bucket's TTL after the emitter used it: %v, %v; want 72h as the executor made it", st.TTL(), err)
				}
			}
		})
	}
}

// field returns the value of the "name: value" line of a printed record.
func field(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func errorsIsNotFound(err error) bool { return errors.Is(err, kvstore.ErrNotFound) }

// TestDirectResolveWithoutNATS: with NATS out of reach a PostgreSQL or Redis
// store is still resolved (and forgotten), and the command says plainly that no
// audit event was stored (that the streams were not purged), with exit 1.
func TestDirectResolveWithoutNATS(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + l.Addr().String()
	_ = l.Close()
	for _, kind := range storeKinds[1:] {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ds := openDirect(t, nil, kind)
			key := park(t, ds.store, tenant, "lonely")
			var (
				stdout, stderr strings.Builder
			)
			code := run(ctxT(t), append([]string{"--server", dead, "resolve", "--tenant", tenant, "--key", key, "--complete", "--outcome", "X"}, ds.flags...),
				strings.NewReader(""), &stdout, &stderr)
			if code != exitFailure {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitFailure, stdout.String(), stderr.String())
			}
			for _, want := range []string{"resolution was applied", "NOT stored in TOOLEXEC_EVENTS", "NATS could not be reached"} {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			if field(stdout.String(), "state") != "completed" {
				t.Errorf("stdout should show the resolved record:\n%s", stdout.String())
			}
			if rec, err := ds.store.Get(ctxT(t), tenant, key); err != nil || rec.State != kvstore.StateCompleted {
				t.Fatalf("the store: %+v, %v; want the record completed", rec, err)
			}

			// forget: the records go; the streams could not be purged, and it says so.
			stdout.Reset()
			stderr.Reset()
			code = run(ctxT(t), append([]string{"--server", dead, "forget", "--yes", "--tenant", tenant}, ds.flags...),
				strings.NewReader(""), &stdout, &stderr)
			if code != exitFailure || !strings.Contains(stderr.String(), "1 records erased, but purging") ||
				!strings.Contains(stderr.String(), "NATS could not be reached") {
				t.Fatalf("forget without NATS: exit %d, stderr %q", code, stderr.String())
			}
			if _, err := ds.store.Get(ctxT(t), tenant, key); !errorsIsNotFound(err) {
				t.Fatalf("forget without NATS left the record: %v", err)
			}
		})
	}
}

// TestDirectStoreFlags refuses store flags that cannot work, before anything
// is contacted (exit 2), and names what is missing.
func TestDirectStoreFlags(t *testing.T) {
	t.Setenv("TOOLEXEC_POSTGRES_URL", "")
	t.Setenv("TOOLEXEC_REDIS_URL", "")
	t.Setenv("TOOLEXEC_RETENTION", "")
	key := keyOf("k")
	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"url without store", []string{"inspect", "--tenant", tenant, "--key", key, "--postgres-url", "postgres://x"}, "--postgres-url needs --store"},
		{"unknown store", []string{"inspect", "--tenant", tenant, "--key", key, "--store", "etcd"}, `--store "etcd"`},
		{"postgres without url", []string{"resolve", "--tenant", tenant, "--key", key, "--release", "--store", "postgres"}, "--store postgres needs --postgres-url"},
		{"redis without url", []string{"forget", "--yes", "--tenant", tenant, "--store", "redis"}, "--store redis needs --redis-url"},
		{"retention with jetstream", []string{"resolve", "--tenant", tenant, "--key", key, "--release", "--store", "jetstream", "--retention", "1h"}, "bucket's own"},
		{"bad schema", []string{"inspect", "--tenant", tenant, "--key", key, "--store", "postgres", "--postgres-url", "postgres://127.0.0.1:1/x", "--postgres-schema", "Bad-Schema"}, "schema"},
		{"zero retention", []string{"resolve", "--tenant", tenant, "--key", key, "--release", "--store", "redis", "--redis-url", "redis://127.0.0.1:1", "--retention", "0s"}, "--retention"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := run(ctxT(t), tt.args, strings.NewReader(""), &stdout, &stderr)
			if code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want exit %d naming %q", code, stderr.String(), exitUsage, tt.want)
			}
		})
	}
}

// TestDirectJetStreamWithoutBucket: a server where no executor kept records
// has nothing to administer; the bucket is not created.
func TestDirectJetStreamWithoutBucket(t *testing.T) {
	t.Parallel()
	e := newBareEnv(t, true)
	r := e.emit(t, "", "inspect", "--tenant", tenant, "--key", keyOf("k"), "--store", "jetstream")
	mustExit(t, r, exitFailure)
	if !strings.Contains(r.stderr, "no KV bucket "+natsstore.DefaultBucket) {
		t.Fatalf("stderr %q", r.stderr)
	}
	if _, err := e.js.KeyValue(ctxT(t), natsstore.DefaultBucket); err == nil {
		t.Fatal("inspect created the bucket")
	}
}

// TestDirectStoreUnreachable: a store that cannot be reached is an error that
// names it, with the password hidden.
func TestDirectStoreUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	var stdout, stderr strings.Builder
	code := run(ctxT(t), []string{"inspect", "--tenant", tenant, "--key", keyOf("k"), "--store", "postgres",
		"--postgres-url", fmt.Sprintf("postgres://ops:s3cret@%s/db?sslmode=disable&connect_timeout=2", addr)},
		strings.NewReader(""), &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d; stderr %q", code, exitFailure, stderr.String())
	}
	if !strings.Contains(stderr.String(), "the PostgreSQL store at postgres://ops:xxxxx@"+addr) || strings.Contains(stderr.String(), "s3cret") {
		t.Fatalf("stderr %q: want the store named, without its password", stderr.String())
	}
}

// TestDirectStoreFromEnvironment: with the executor's TOOLEXEC_* variables set,
// --store alone is enough.
func TestDirectStoreFromEnvironment(t *testing.T) {
	url := testenv.PostgresURL(t)
	s, _ := dbproc.PostgresStore(t, url, pgstore.Config{})
	key := park(t, s, tenant, "from-env")
	t.Setenv("TOOLEXEC_POSTGRES_URL", url)
	t.Setenv("TOOLEXEC_POSTGRES_SCHEMA", s.Config().Schema)
	var stdout, stderr strings.Builder
	code := run(ctxT(t), []string{"inspect", "--tenant", tenant, "--key", key, "--store", "postgres"},
		strings.NewReader(""), &stdout, &stderr)
	if code != exitOK || field(stdout.String(), "state") != "indeterminate" {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout.String(), stderr.String())
	}
	t.Setenv("TOOLEXEC_POSTGRES_SCHEMA", "no_such_schema")
	stdout.Reset()
	stderr.Reset()
	code = run(ctxT(t), []string{"inspect", "--tenant", tenant, "--key", key, "--store", "postgres"},
		strings.NewReader(""), &stdout, &stderr)
	if code != exitFailure || !strings.Contains(stderr.String(), "check --postgres-schema") {
		t.Fatalf("a schema without tables: exit %d, stderr %q", code, stderr.String())
	}
}
