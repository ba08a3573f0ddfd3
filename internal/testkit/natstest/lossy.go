package natstest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// LossyAPI is a JetStream on nc whose API requests pass through a relay that
// forwards each one to the server and drops the reply to the first request of
// every API subject: the request takes effect, its caller never hears so, as
// when a new cluster's routes reset under a reply.
type LossyAPI struct {
	jetstream.JetStream
	mu      sync.Mutex
	seen    map[string]int // requests relayed, by API subject
	dropped []string       // API subjects whose first reply was dropped
}

// lossyPrefix is the API prefix the relay listens on.
const lossyPrefix = "lossy.API"

// NewLossyAPI starts the relay on nc and returns the JetStream that uses it.
// Only requests made through the returned JetStream go through the relay.
func NewLossyAPI(t testing.TB, nc *nats.Conn) *LossyAPI {
	t.Helper()
	js, err := jetstream.NewWithAPIPrefix(nc, lossyPrefix)
	if err != nil {
		t.Fatal(err)
	}
	l := &LossyAPI{JetStream: js, seen: map[string]int{}}
	sub, err := nc.Subscribe(lossyPrefix+".>", func(m *nats.Msg) {
		api := strings.TrimPrefix(m.Subject, lossyPrefix+".")
		reply, err := nc.Request("$JS.API."+api, m.Data, 10*time.Second)
		if err != nil {
			return // the caller times out, as it would on a dropped reply
		}
		l.mu.Lock()
		l.seen[api]++
		first := l.seen[api] == 1
		if first {
			l.dropped = append(l.dropped, api)
		}
		l.mu.Unlock()
		if !first {
			_ = m.Respond(reply.Data)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return l
}

// Dropped returns the API subjects (without the prefix) whose first reply the
// relay dropped, in order.
func (l *LossyAPI) Dropped() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.dropped...)
}
