package jsapi_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/jsapi"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

// TestNextSubject: pulls go to the consumer's CONSUMER.MSG.NEXT subject under
// the API prefix of the JetStream context, domain included.
func TestNextSubject(t *testing.T) {
	nc := natstest.Connect(t, natstest.Start(t))
	withPrefix := func(p string) func() (jetstream.JetStream, error) {
		return func() (jetstream.JetStream, error) { return jetstream.NewWithAPIPrefix(nc, p) }
	}
	tests := []struct {
		name string
		js   func() (jetstream.JetStream, error)
		want string
	}{
		{"default", func() (jetstream.JetStream, error) { return jetstream.New(nc) }, "$JS.API.CONSUMER.MSG.NEXT.S.C"},
		{"prefix", withPrefix("$JS.hub.API"), "$JS.hub.API.CONSUMER.MSG.NEXT.S.C"},
		{"prefix with its dot", withPrefix("imported."), "imported.CONSUMER.MSG.NEXT.S.C"},
		{"domain", func() (jetstream.JetStream, error) { return jetstream.NewWithDomain(nc, "leaf") }, "$JS.leaf.API.CONSUMER.MSG.NEXT.S.C"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js, err := tt.js()
			if err != nil {
				t.Fatal(err)
			}
			if got := jsapi.NextSubject(js, "S", "C"); got != tt.want {
				t.Errorf("subject %q, want %q", got, tt.want)
			}
		})
	}
}
