package admin_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

// testLogger discards logs unless TOOLEXEC_TEST_LOG is set.
func testLogger() *slog.Logger { return testenv.Logger() }

// harness is one embedded server with both streams, a connection, an admin
// client on it, and a toolexec client to watch the answers and audit events.
type harness struct {
	srv     *server.Server
	nc      *nats.Conn
	js      jetstream.JetStream
	client  *admin.Client
	watcher *toolexec.Client
}

func newHarness(t *testing.T, opts ...natstest.Option) *harness {
	t.Helper()
	srv := natstest.Start(t, opts...)
	nc := natstest.Connect(t, srv)
	js := natstest.JetStream(t, nc)
	if err := bus.EnsureStreams(ctxT(t), js, bus.StreamsConfig{}); err != nil {
		t.Fatalf("EnsureStreams: %v", err)
	}
	c, err := admin.NewClient(nc)
	if err != nil {
		t.Fatal(err)
	}
	w, err := toolexec.NewClient(nc, toolexec.WithLogger(testLogger()))
	if err != nil {
		t.Fatal(err)
	}
	return &harness{srv: srv, nc: nc, js: js, client: c, watcher: w}
}

// ctxT returns a context that ends with the test or after a minute.
func ctxT(t *testing.T) context.Context { return testenv.Context(t, time.Minute) }

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// decodeMsg decodes the answer or audit event m carries.
func decodeMsg(t *testing.T, m *nats.Msg) events.Answer {
	t.Helper()
	a, err := wire.DecodeAnswer(m.Header, m.Data)
	if err != nil {
		t.Fatalf("answer on %s: %v", m.Subject, err)
	}
	return a
}

// eventSubjects returns, for every subject of TOOLEXEC_EVENTS matching filter,
// how many messages it holds.
func eventSubjects(t *testing.T, js jetstream.JetStream, filter string) map[string]uint64 {
	t.Helper()
	return streamSubjects(t, js, wire.EventStream, filter)
}

func streamSubjects(t *testing.T, js jetstream.JetStream, stream, filter string) map[string]uint64 {
	t.Helper()
	return natstest.StreamSubjects(t, js, stream, filter)
}

var errBoom = errors.New("boom")
