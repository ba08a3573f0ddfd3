package natsstore

import (
	"context"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Writes are published to the key's subject by the store itself, as kv.Update
// does, with the same header: the stream applies one only if the key's last
// message is at the expected revision. kv.Update would first match the key
// against a regular expression on every write, a few microseconds of each
// call's path; the store's keys are built from a checked tenant and a hex
// digest (kvstore.CheckKey), which that expression always accepts.

// publisher is what the store writes values through: its JetStream context, or
// in tests one that loses answers.
type publisher interface {
	PublishMsg(ctx context.Context, m *nats.Msg, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error)
}

// putPrefixOf returns the subject prefix of the bucket's writes: its keys'
// subjects, behind js's API prefix when js has one of its own (a JetStream
// domain, an imported API), as nats.go's KV writes are.
func putPrefixOf(js jetstream.JetStream, bucket string) string {
	p := "$KV." + bucket + "."
	if api := apiPrefixOf(js); api != jetstream.DefaultAPIPrefix {
		p = api + p
	}
	return p
}

// update writes b to key if the key's last message is at revision rev (0: the
// key has none), and returns the new revision. A refusal because the key
// moved on is a *jetstream.APIError that isConflict recognises.
func (s *Store) update(ctx context.Context, key string, b []byte, rev uint64) (uint64, error) {
	m := &nats.Msg{
		Subject: s.putPrefix + key,
		Header:  nats.Header{jetstream.ExpectedLastSubjSeqHeader: []string{strconv.FormatUint(rev, 10)}},
		Data:    b,
	}
	ack, err := s.pub.PublishMsg(ctx, m)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}
