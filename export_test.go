package toolexec

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// NewClientOn returns a client that publishes and reads through js, which a
// test may wrap to lose what it likes.
func NewClientOn(js jetstream.JetStream, opts ...ClientOption) (*Client, error) {
	return newClient(js, opts...)
}

// ShortenCallPublishAttempts makes each try of a Client's publication of a
// call wait at most d for its PubAck until the test ends.
func ShortenCallPublishAttempts(t interface{ Cleanup(func()) }, d time.Duration) {
	old := callPublishAttempt
	callPublishAttempt = d
	t.Cleanup(func() { callPublishAttempt = old })
}
