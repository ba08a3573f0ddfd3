package natsstore

import (
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

// msgGetResponse is the answer of $JS.API.STREAM.MSG.GET.
type msgGetResponse struct {
	Error   *jetstream.APIError `json:"error,omitempty"`
	Message *struct {
		Subject  string    `json:"subject"`
		Sequence uint64    `json:"seq"`
		Header   []byte    `json:"hdrs,omitempty"`
		Data     []byte    `json:"data,omitempty"`
		Time     time.Time `json:"time"`
	} `json:"message,omitempty"`
}

// bounded returns ctx, limited to the JetStream context's default API timeout
// when ctx has no deadline of its own, for one request to the server. nats.go
// bounds its API requests that way but not its publishes (KV writes are
// publishes): without this, a write to a server that stopped answering would
// wait for as long as the caller's context allows, which may be forever.
func (s *Store) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.apiTimeout)
}

// get returns the key's latest entry as the stream's leader has it, or
// jetstream.ErrKeyNotFound when the key has no value (never written, deleted,
// purged or expired).
func (s *Store) get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	req, err := json.Marshal(map[string]string{"last_by_subj": s.subjectOf(key)})
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	msg, err := s.nc.RequestWithContext(ctx, s.apiPrefix+"STREAM.MSG.GET.KV_"+s.bucket, req)
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
	if len(m.Header) > 0 {
		hdr, err := nats.DecodeHeadersMsg(m.Header)
		if err != nil {
			return nil, fmt.Errorf("message get: headers: %w", err)
		}
		if hdr.Get(kvOperationHeader) != "" || hdr.Get(markerReason) != "" {
			return nil, jetstream.ErrKeyNotFound // a delete, purge or expiry marker
		}
	}
	return e, nil
}

// subjectOf is the stream subject a key's values are stored under.
func (s *Store) subjectOf(key string) string { return "$KV." + s.bucket + "." + key }

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
}

var _ jetstream.KeyValueEntry = (*entry)(nil)

func (e *entry) Bucket() string                  { return e.bucket }
func (e *entry) Key() string                     { return e.key }
func (e *entry) Value() []byte                   { return e.value }
func (e *entry) Revision() uint64                { return e.revision }
func (e *entry) Created() time.Time              { return e.created }
func (e *entry) Delta() uint64                   { return 0 }
func (e *entry) Operation() jetstream.KeyValueOp { return jetstream.KeyValuePut }
