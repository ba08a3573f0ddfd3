package natsstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Reads go to the stream's leader, not to any replica.
//
// kv.Get uses JetStream's direct get, which any replica may answer: on a
// replicated bucket it can miss a write the leader has acknowledged (a claim just
// made, a release just done), and two reads in a row can disagree around a
// record's expiry because each replica removes old messages by its own timer.
// The store's decisions (the loser's view of the winner, TakeOver's and
// Resolve's compare-and-set base, Wait's confirmation that a key is gone) need
// the state the next conditional write will be judged against, which is the
// leader's. So the store asks the leader with the stream's message-get API
// ($JS.API.STREAM.MSG.GET), which only the leader answers.

const (
	kvOperationHeader = "KV-Operation"
	markerReason      = jetstream.MarkerReasonHeader
)

// msgGetResponse is the answer of $JS.API.STREAM.MSG.GET, with the fields the
// store reads.
type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// bounded returns ctx, limited to the JetStream context's default API timeout
// when ctx has no deadline of its own, for one request to the server: a
// request to a server that stopped answering would otherwise wait for as long
// as the caller's context allows, which may be forever. (KV writes need no
// such bound: nats.go's publish applies the same timeout itself.)
func (s *Store) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.apiTimeout)
}

// get returns the key's latest entry as the stream's leader has it, or
// jetstream.ErrKeyNotFound when the key has no value (never written, deleted,
// purged or expired).
func (s *Store) get(ctx context.Context, key string) (*entry, error) {
	e, err := s.latest(ctx, key)
	if err == nil && e.deleted {
		return nil, jetstream.ErrKeyNotFound
	}
	return e, err
}

// latest returns the key's latest message as the stream's leader has it: a
// value, or a delete or purge marker (deleted set), or jetstream.ErrKeyNotFound
// when there is none (never written, expired, or purged by a Forget).
func (s *Store) latest(ctx context.Context, key string) (*entry, error) {
	// {"last_by_subj":"<subject>"}: subjects of keys need no escaping (the
	// bucket's and the keys' characters are all JSON-safe).
	req := make([]byte, 0, 64+len(s.bucket)+len(key))
	req = append(req, `{"last_by_subj":"$KV.`...)
	req = append(req, s.bucket...)
	req = append(req, '.')
	req = append(req, key...)
	req = append(req, `"}`...)
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	msg, err := s.nc.RequestWithContext(ctx, s.msgGet, req)
	if err != nil {
		return nil, err
	}
	var resp msgGetResponse
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return nil, fmt.Errorf("message get: %w", err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrKeyNotFound
		}
		return nil, resp.Error
	}
	m := resp.Message
	if m == nil {
		return nil, jetstream.ErrInvalidJetStreamResponse
	}
	e := &entry{bucket: s.bucket, key: key, value: m.Data, revision: m.Sequence, created: m.Time}
	// Header keys are matched exactly (nats.go keeps their case): a header
	// block that names neither key needs no decoding.
	if bytes.Contains(m.Header, []byte(kvOperationHeader)) || bytes.Contains(m.Header, []byte(markerReason)) {
		hdr, err := nats.DecodeHeadersMsg(m.Header)
		if err != nil {
			return nil, fmt.Errorf("message get: headers: %w", err)
		}
		e.deleted = hdr.Get(kvOperationHeader) != "" || hdr.Get(markerReason) != ""
	}
	return e, nil
}

// apiPrefixOf returns the subject prefix of js's API requests: the domain's,
// the configured prefix, or the default $JS.API.
func apiPrefixOf(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		if !strings.HasSuffix(o.APIPrefix, ".") {
			return o.APIPrefix + "."
		}
		return o.APIPrefix
	default:
		return jetstream.DefaultAPIPrefix
	}
}

// entry is a KV entry read from the leader.
type entry struct {
	bucket, key string
	value       []byte
	revision    uint64
	created     time.Time
	deleted     bool // a delete, purge or expiry marker
}

var _ jetstream.KeyValueEntry = (*entry)(nil)

func (e *entry) Bucket() string     { return e.bucket }
func (e *entry) Key() string        { return e.key }
func (e *entry) Value() []byte      { return e.value }
func (e *entry) Revision() uint64   { return e.revision }
func (e *entry) Created() time.Time { return e.created }
func (e *entry) Delta() uint64      { return 0 }

// Operation reports a marker as a delete (a purge marker too: the store does
// not tell them apart).
func (e *entry) Operation() jetstream.KeyValueOp {
	if e.deleted {
		return jetstream.KeyValueDelete
	}
	return jetstream.KeyValuePut
}
