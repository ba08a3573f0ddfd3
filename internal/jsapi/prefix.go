package jsapi

import (
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// APIPrefix returns the subject prefix of js's JetStream API requests, with
// its trailing dot: the domain's ("$JS.<domain>.API."), the configured
// prefix, or jetstream.DefaultAPIPrefix.
func APIPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	}
	return jetstream.DefaultAPIPrefix
}

// NextSubject returns the subject that asks consumer of stream for its next
// messages (CONSUMER.MSG.NEXT) under js's API prefix.
func NextSubject(js jetstream.JetStream, stream, consumer string) string {
	return APIPrefix(js) + "CONSUMER.MSG.NEXT." + stream + "." + consumer
}
