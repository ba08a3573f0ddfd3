package natsstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/kvstore"
)

// Defaults for a zero [Config].
const (
	// DefaultBucket is the KV bucket the records live in.
	DefaultBucket = "toolexec_idempotency"
	// DefaultRetention is how long a record lives after its last write.
	DefaultRetention = 24 * time.Hour
)

// clockKey is the key the store writes to learn the server's time. No tenant
// can produce it: record keys start with a tenant token ([A-Za-z0-9_-]).
const clockKey = "=clock"

// headroom is what a write needs beyond its value: subject and headers count
// against the server's max_payload too.
const headroom = 512

// maxAttempts bounds the retries of one operation against a key that keeps
// changing under it, or a read that is behind a write (across a leader change).
const maxAttempts = 10

// recheckAfter is how soon Wait looks again when the server has not yet caught up
// with a deadline (a read behind seen, an expiry the server has not yet run).
const recheckAfter = 50 * time.Millisecond

// safetyRecheck is the longest a Wait goes without asking the stream leader,
// whatever its watch says or fails to say.
const safetyRecheck = 2 * time.Second

var bucketRe = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

var (
	errClosed      = errors.New("store closed")
	errWatchClosed = errors.New("watch closed by the connection")
	errConflict    = errors.New("key changed since the expected revision")
)

// Config configures a [Store]. The zero value is usable.
type Config struct {
	// Bucket names the KV bucket. Default: DefaultBucket.
	Bucket string

	// Replicas is how many servers keep the bucket (1..5). Default: 1. Use 3 on a
	// cluster: a single replica loses claims with its server.
	Replicas int

	// Retention is how long a record lives after its last write (the bucket's
	// TTL, enforced by the server as the stream's MaxAge). Every write to a record
	// restarts it. Default: DefaultRetention (24h).
	Retention time.Duration

	// Storage is the bucket's storage. Default: jetstream.FileStorage.
	Storage jetstream.StorageType

	// MaxValueSize caps, in bytes, a stored value: the encoded record, outcome
	// included. A larger outcome or reason is refused with kvstore.ErrTooLarge.
	// The bucket enforces it too. Default: 0, as much as the server's max_payload
	// allows (1 MiB by default, less a little for headers).
	MaxValueSize int32
}

// Store is the JetStream KV [kvstore.Store]. It is safe for concurrent use by
// many goroutines and, on one bucket, by many processes. Create one with [New].
type Store struct {
	kv         jetstream.KeyValue
	pub        publisher // writes of values (update)
	stream     jetstream.Stream
	nc         *nats.Conn
	msgGet     string        // the subject of the stream's message-get API
	putPrefix  string        // the subject of a key's writes, less the key
	apiTimeout time.Duration // for requests whose context has no deadline
	bucket     string
	retention  time.Duration
	maxValue   int

	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

var (
	_ kvstore.Store = (*Store)(nil)
	_ interface {
		DumpRaw(ctx context.Context, tenant string) ([][]byte, error)
	} = (*Store)(nil)
)

// New creates the bucket described by cfg, or updates it if it exists, and
// returns a store on it. It returns an error wrapping kvstore.ErrUnavailable
// when JetStream cannot be reached (or its reply did not come before ctx
// ended), and kvstore.ErrInvalid for a bad cfg. It makes two JetStream API
// requests, each safe to repeat: a caller that may meet a cluster still
// forming calls New again, each time with a deadline of its own, while the
// error matches kvstore.ErrUnavailable (the executor does so).
func New(ctx context.Context, js jetstream.JetStream, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = DefaultBucket
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Retention == 0 {
		cfg.Retention = DefaultRetention
	}
	switch {
	case js == nil:
		return nil, fmt.Errorf("natsstore: nil JetStream: %w", kvstore.ErrInvalid)
	case !bucketRe.MatchString(cfg.Bucket):
		return nil, fmt.Errorf("natsstore: bucket name %q must match %s: %w", cfg.Bucket, bucketRe, kvstore.ErrInvalid)
	case cfg.Replicas < 1 || cfg.Replicas > 5:
		return nil, fmt.Errorf("natsstore: %d replicas, want 1..5: %w", cfg.Replicas, kvstore.ErrInvalid)
	case cfg.Retention < 0:
		return nil, fmt.Errorf("natsstore: retention %v: %w", cfg.Retention, kvstore.ErrInvalid)
	case cfg.MaxValueSize < 0:
		return nil, fmt.Errorf("natsstore: max value size %d: %w", cfg.MaxValueSize, kvstore.ErrInvalid)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:       cfg.Bucket,
		Description:  "toolexec idempotency records",
		History:      1,
		TTL:          cfg.Retention,
		Storage:      cfg.Storage,
		Replicas:     cfg.Replicas,
		MaxValueSize: cfg.MaxValueSize,
	})
	if err != nil {
		return nil, setupError("create bucket "+cfg.Bucket, err)
	}
	stream, err := js.Stream(ctx, "KV_"+cfg.Bucket)
	if err != nil {
		return nil, setupError("look up stream of bucket "+cfg.Bucket, err)
	}
	maxValue := int(js.Conn().MaxPayload()) - headroom
	if cfg.MaxValueSize > 0 && int(cfg.MaxValueSize) < maxValue {
		maxValue = int(cfg.MaxValueSize)
	}
	return &Store{
		kv:         kv,
		pub:        js,
		stream:     stream,
		nc:         js.Conn(),
		msgGet:     apiPrefixOf(js) + "STREAM.MSG.GET.KV_" + cfg.Bucket,
		putPrefix:  putPrefixOf(js, cfg.Bucket),
		apiTimeout: js.Options().DefaultTimeout,
		bucket:     cfg.Bucket,
		retention:  cfg.Retention,
		maxValue:   maxValue,
		done:       make(chan struct{}),
	}, nil
}

// setupError classifies a failure of New: unreachable JetStream is
// kvstore.ErrUnavailable; anything else (a bucket that cannot take this
// configuration) is returned as it is.
func setupError(op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrConnectionClosed) ||
		errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) || errors.Is(err, nats.ErrDisconnected) {
		return unavailable(op, err)
	}
	return fmt.Errorf("natsstore: %s: %w", op, err)
}

// Bucket returns the name of the store's KV bucket.
func (s *Store) Bucket() string { return s.bucket }

// Claim creates the record with a write the server applies only if the key has
// no live value: one conditional on the key's last revision being 0 (never
// written, or gone with its retention or a Forget) or, after a release, the
// delete marker's (as kv.Create does). If someone else holds the key it returns
// their record as the stream's leader has it (LeaseExpired is never set here:
// that needs the server's time; see Wait and TakeOver). A write whose answer was
// lost (a timeout during a leader change) may still have landed: Claim reads the
// key back and recognises its own claim by its id. It returns kvstore.ErrInvalid
// for a malformed request and an error wrapping kvstore.ErrUnavailable when the
// server cannot be reached; never a claim it is unsure of.
//
// A claim of a free key is one round trip; of a held key two (the refused write,
// then the read of the holder's record); of a released key, whose delete marker
// the first write does not expect, three.
//
// The returned Record of a won claim is built from what Claim wrote: its
// UpdatedAt, LeaseUntil and ExpiresAt are the claimer's estimates; the records
// Get and Wait return carry the server's times.
func (s *Store) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	const op = "claim"
	if err := req.Validate(); err != nil {
		return kvstore.ClaimResult{}, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := s.usable(op); err != nil {
		return kvstore.ClaimResult{}, err
	}
	v := newClaim(req, time.Now())
	buf := v.encode()
	defer putBuf(buf)
	b := *buf
	if len(b) > s.maxValue {
		return kvstore.ClaimResult{}, fmt.Errorf("natsstore: %s: record of %d bytes, limit %d: %w: %w",
			op, len(b), s.maxValue, kvstore.ErrInvalid, kvstore.ErrTooLarge)
	}
	key := keyOf(req.Tenant, req.Key)
	var (
		over  uint64 // the revision the write expects: 0, or a delete marker's
		waits int    // reads that found the key gone after a refused write
	)
	for attempt := 0; ; attempt++ {
		if attempt >= maxAttempts {
			return kvstore.ClaimResult{}, unavailable(op, errors.New("the key kept changing between a refused create and the read"))
		}
		if err := pause(ctx, waits); err != nil {
			return kvstore.ClaimResult{}, unavailable(op, err)
		}
		// A write at revision 0 is kv.Create's write without the read
		// kv.Create makes when it is refused (from any replica): the read below
		// goes to the leader and does for both.
		rev, err := s.update(ctx, key, b, over)
		if err == nil {
			return s.won(req, v, rev), nil
		}
		if !isConflict(err) {
			if isTooLarge(err) {
				return kvstore.ClaimResult{}, fmt.Errorf("natsstore: %s: %w: %w", op, kvstore.ErrInvalid, kvstore.ErrTooLarge)
			}
			if notWritten(err) || ctx.Err() != nil {
				return kvstore.ClaimResult{}, unavailable(op, err)
			}
			// The write may have landed although its answer was lost: read
			// the key to find out.
		}
		e, err := s.latest(ctx, key)
		switch {
		case err == nil && !e.deleted:
			cur, err := decodeValue(e.value)
			if err != nil {
				return kvstore.ClaimResult{}, fmt.Errorf("natsstore: %s: key %s: %w", op, key, err)
			}
			if cur.Claim == v.Claim {
				// Our own write, whose answer was lost.
				return s.won(req, v, e.revision), nil
			}
			return kvstore.ClaimResult{Record: s.recordOf(req.Tenant, req.Key, cur, e)}, nil
		case err == nil:
			// Released: write over the delete marker, at once.
			over = e.revision
		case errors.Is(err, jetstream.ErrKeyNotFound):
			// Expired or forgotten between the write and the read: try
			// again, after a pause.
			over = 0
			waits++
		default:
			return kvstore.ClaimResult{}, unavailable(op, err)
		}
	}
}

func (s *Store) won(req kvstore.ClaimRequest, v value, rev uint64) kvstore.ClaimResult {
	return kvstore.ClaimResult{
		Claimed: true,
		Lease:   s.leaseOf(req.Tenant, req.Key, rev, v),
		Record:  v.record(req.Tenant, req.Key, rev, time.Unix(0, v.Created), s.retention),
	}
}

// Get returns the live record for the key as the stream's leader has it, or
// kvstore.ErrNotFound: it sees every write acknowledged before it. LeaseExpired
// is never set (judging it needs the server's time: see Wait).
func (s *Store) Get(ctx context.Context, tenant, digest string) (kvstore.Record, error) {
	const op = "get"
	if err := kvstore.CheckKey(tenant, digest); err != nil {
		return kvstore.Record{}, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := s.usable(op); err != nil {
		return kvstore.Record{}, err
	}
	rec, _, err := s.read(ctx, tenant, digest)
	if err != nil {
		return kvstore.Record{}, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	return rec, nil
}

// read returns the record and its entry as the leader has them,
// kvstore.ErrNotFound, ErrCorrupt, or an error wrapping kvstore.ErrUnavailable.
func (s *Store) read(ctx context.Context, tenant, digest string) (kvstore.Record, jetstream.KeyValueEntry, error) {
	e, err := s.get(ctx, keyOf(tenant, digest))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return kvstore.Record{}, nil, kvstore.ErrNotFound
	}
	if err != nil {
		return kvstore.Record{}, nil, fmt.Errorf("%w: %w", kvstore.ErrUnavailable, err)
	}
	v, err := decodeValue(e.Value())
	if err != nil {
		return kvstore.Record{}, nil, fmt.Errorf("key %s: %w", e.Key(), err)
	}
	return s.recordOf(tenant, digest, v, e), e, nil
}

func (s *Store) recordOf(tenant, digest string, v value, e jetstream.KeyValueEntry) kvstore.Record {
	return v.record(tenant, digest, e.Revision(), e.Created(), s.retention)
}

// Record stores outcome and completes the claim: a compare-and-set on the
// revision the lease carries (if the holder renewed since, on the renewal's). It
// returns kvstore.ErrNotHolder once the claim has ended (taken over, released,
// recorded, marked indeterminate, forgotten or expired, or the key claimed
// anew), and kvstore.ErrTooLarge if the record with outcome exceeds the value
// limit; nothing is written then.
func (s *Store) Record(ctx context.Context, lease kvstore.Lease, outcome string) error {
	_, _, err := s.holderWrite(ctx, "record", lease, func(base value) value {
		v := base.next(kvstore.StateCompleted)
		v.Outcome = text(outcome)
		return v
	})
	return err
}

// MarkIndeterminate parks the claim in kvstore.StateIndeterminate with reason
// and bodyEntered. Errors as for [Store.Record].
func (s *Store) MarkIndeterminate(ctx context.Context, lease kvstore.Lease, reason string, bodyEntered bool) error {
	_, _, err := s.holderWrite(ctx, "mark indeterminate", lease, func(base value) value {
		v := base.next(kvstore.StateIndeterminate)
		v.Reason = text(reason)
		v.Entered = bodyEntered
		return v
	})
	return err
}

// Renew rewrites the claim with lease duration d. The server stamps the write,
// so the lease runs until the write's server time plus d. It returns the lease to
// use from then on, kvstore.ErrInvalid for a non-positive d and
// kvstore.ErrNotHolder if the claim has ended. Earlier copies of the lease stay
// valid while the claim lasts (fencing is by claim, see [Store.Record]), so a
// holder whose Renew answer was lost can go on with the lease it had.
func (s *Store) Renew(ctx context.Context, lease kvstore.Lease, d time.Duration) (kvstore.Lease, error) {
	if err := kvstore.CheckLeaseDuration(d); err != nil {
		return kvstore.Lease{}, fmt.Errorf("natsstore: renew: %w", err)
	}
	rev, v, err := s.holderWrite(ctx, "renew", lease, func(base value) value {
		v := base.next(kvstore.StateClaimed)
		v.Lease = int64(d)
		return v
	})
	if err != nil {
		return kvstore.Lease{}, err
	}
	return s.leaseOf(lease.Tenant, lease.Key, rev, v), nil
}

// Release deletes the claim (a delete marker conditional on the lease's
// revision; watchers see the delete, and a later Create succeeds over it). It
// returns kvstore.ErrNotHolder if the record changed since the lease was granted.
func (s *Store) Release(ctx context.Context, lease kvstore.Lease) error {
	const op = "release"
	tok, err := s.checkLease(op, lease)
	if err != nil {
		return err
	}
	key := keyOf(lease.Tenant, lease.Key)
	err = s.fenced(ctx, key, tok, func(rev uint64) error { return s.casDelete(ctx, key, rev) })
	if errors.Is(err, errConflict) {
		return fmt.Errorf("natsstore: %s: %w", op, kvstore.ErrNotHolder)
	}
	if err != nil {
		return unavailable(op, err)
	}
	return nil
}

// Withdraw deletes the claim seen if the key is still at seen's revision and
// the record there is holder's claim (a read, then a delete conditional on the
// revision, as Release's is on the lease's), whatever the claim's lease: see
// kvstore.Withdrawer. It returns kvstore.ErrNotHolder if the
// record changed since seen, kvstore.ErrNotFound if it is gone and
// kvstore.ErrInvalid for a seen that is not a claim of holder.
func (s *Store) Withdraw(ctx context.Context, seen kvstore.Record, holder string) error {
	const op = "withdraw"
	if err := kvstore.ValidateWithdraw(seen, holder); err != nil {
		return fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := s.usable(op); err != nil {
		return err
	}
	// The delete below compares only the revision: read first that the record
	// at that revision is the holder's claim.
	rec, e, err := s.read(ctx, seen.Tenant, seen.Key)
	if err != nil {
		return fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if e.Revision() != seen.Revision || rec.State != kvstore.StateClaimed || rec.Holder != holder {
		return fmt.Errorf("natsstore: %s: record changed since it was read: %w", op, kvstore.ErrNotHolder)
	}
	key := keyOf(seen.Tenant, seen.Key)
	err = s.casDelete(ctx, key, seen.Revision)
	if errors.Is(err, errConflict) {
		if _, _, rerr := s.read(ctx, seen.Tenant, seen.Key); errors.Is(rerr, kvstore.ErrNotFound) {
			return fmt.Errorf("natsstore: %s: %w", op, kvstore.ErrNotFound)
		}
		return fmt.Errorf("natsstore: %s: record changed since it was read: %w", op, kvstore.ErrNotHolder)
	}
	if err != nil {
		return unavailable(op, err)
	}
	return nil
}

// holderWrite checks lease, builds the new value from the claim the lease
// carries and writes it if the record is still at the lease's revision.
func (s *Store) holderWrite(ctx context.Context, op string, lease kvstore.Lease, build func(base value) value) (uint64, value, error) {
	tok, err := s.checkLease(op, lease)
	if err != nil {
		return 0, value{}, err
	}
	v := build(tok.Value)
	buf := v.encode()
	defer putBuf(buf)
	b := *buf
	if len(b) > s.maxValue {
		return 0, value{}, fmt.Errorf("natsstore: %s: record of %d bytes, limit %d: %w", op, len(b), s.maxValue, kvstore.ErrTooLarge)
	}
	key := keyOf(lease.Tenant, lease.Key)
	var rev uint64
	err = s.fenced(ctx, key, tok, func(at uint64) error {
		var err error
		rev, err = s.cas(ctx, key, b, v.Write, at)
		return err
	})
	switch {
	case errors.Is(err, errConflict):
		return 0, value{}, fmt.Errorf("natsstore: %s: %w", op, kvstore.ErrNotHolder)
	case errors.Is(err, kvstore.ErrTooLarge):
		return 0, value{}, fmt.Errorf("natsstore: %s: %w", op, err)
	case err != nil:
		return 0, value{}, unavailable(op, err)
	}
	return rev, v, nil
}

// fenced runs a holder's conditional write at the revision the lease carries. If
// the record has moved on, it looks at it: if it is still the lease's claim
// (same claim id, still claimed: the holder renewed since this copy of the lease
// was issued, or a renewal's answer was lost), the write is tried again at the
// current revision; otherwise it returns errConflict. Fencing is thus by claim:
// a take-over, a release, a record, a mark or a new claim of the key all end the
// claim, and with it every copy of its lease.
func (s *Store) fenced(ctx context.Context, key string, tok token, write func(rev uint64) error) error {
	rev := tok.Rev
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if err := pause(ctx, attempt); err != nil {
			return err
		}
		err := write(rev)
		if !errors.Is(err, errConflict) {
			return err
		}
		e, err := s.get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return errConflict
		case err != nil:
			return err
		}
		cur, err := decodeValue(e.Value())
		if err != nil || cur.Claim != tok.Value.Claim || kvstore.State(cur.State) != kvstore.StateClaimed {
			return errConflict
		}
		if e.Revision() > rev {
			rev = e.Revision()
		}
		// Otherwise the read is behind the write that made ours fail (a leader
		// just elected): look again.
	}
	return fmt.Errorf("the claim kept changing under %d attempts", maxAttempts)
}

// checkLease validates a lease and decodes its token.
func (s *Store) checkLease(op string, lease kvstore.Lease) (token, error) {
	if err := lease.Validate(); err != nil {
		return token{}, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := s.usable(op); err != nil {
		return token{}, err
	}
	tok, err := parseToken(lease.Token)
	if err != nil {
		return token{}, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if string(tok.Value.Holder) != lease.Holder {
		return token{}, fmt.Errorf("natsstore: %s: token was granted to another holder: %w", op, kvstore.ErrNotHolder)
	}
	return tok, nil
}

// cas writes b to key if the key is at revision rev, and returns the new
// revision, errConflict if it is not, or another error. A write whose answer was
// lost is looked for by its write id and retried if it did not land.
func (s *Store) cas(ctx context.Context, key string, b []byte, writeID string, rev uint64) (uint64, error) {
	ambiguous := false
	var lastErr error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if err := pause(ctx, attempt); err != nil {
			return 0, err
		}
		nrev, err := s.update(ctx, key, b, rev)
		if err == nil {
			return nrev, nil
		}
		lastErr = err
		switch {
		case isTooLarge(err):
			return 0, fmt.Errorf("%w: %w", kvstore.ErrTooLarge, err)
		case isConflict(err):
			if !ambiguous {
				return 0, errConflict
			}
		case notWritten(err) || ctx.Err() != nil:
			return 0, err
		default:
			ambiguous = true
		}
		// An earlier attempt may have landed: look for our write.
		e, err := s.get(ctx, key)
		switch {
		case err == nil:
			if cur, derr := decodeValue(e.Value()); derr == nil && cur.Write == writeID {
				return e.Revision(), nil
			}
			if e.Revision() > rev {
				return 0, errConflict
			}
			// Still at rev (or a replica behind it): write again.
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return 0, errConflict
		default:
			return 0, err
		}
	}
	return 0, fmt.Errorf("no answer after %d attempts: %w", maxAttempts, lastErr)
}

// casValue writes v to key with cas, unless its encoding exceeds the value
// limit (kvstore.ErrTooLarge; nothing is written).
func (s *Store) casValue(ctx context.Context, key string, v *value, rev uint64) (uint64, error) {
	buf := v.encode()
	defer putBuf(buf)
	if len(*buf) > s.maxValue {
		return 0, fmt.Errorf("record of %d bytes, limit %d: %w", len(*buf), s.maxValue, kvstore.ErrTooLarge)
	}
	return s.cas(ctx, key, *buf, v.Write, rev)
}

// casDelete deletes key if it is at revision rev. It returns errConflict if the
// key is at another revision; a key already gone after a lost answer counts as
// deleted.
func (s *Store) casDelete(ctx context.Context, key string, rev uint64) error {
	ambiguous := false
	var lastErr error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if err := pause(ctx, attempt); err != nil {
			return err
		}
		err := s.kv.Delete(ctx, key, jetstream.LastRevision(rev))
		if err == nil {
			return nil
		}
		lastErr = err
		switch {
		case isConflict(err):
			if !ambiguous {
				return errConflict
			}
		case notWritten(err) || ctx.Err() != nil:
			return err
		default:
			ambiguous = true
		}
		e, err := s.get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return nil
		case err != nil:
			return err
		case e.Revision() > rev:
			return errConflict
		}
	}
	return fmt.Errorf("no answer after %d attempts: %w", maxAttempts, lastErr)
}

// TakeOver replaces the claim seen, whose lease has run out, with a claim for
// req.Holder: a compare-and-set on seen.Revision. Whether the lease has run out
// is judged by the server's clock: the server's time of the claim's last write
// plus its lease, against the server's time now (learned by a probe write). It
// returns kvstore.ErrLeaseHeld if the lease has not run out or the record changed
// since seen, kvstore.ErrNotFound if the record is gone, and kvstore.ErrInvalid
// for a malformed seen or req, or a req that names another key than seen (see
// kvstore.ClaimRequest.ValidateTakeOver).
func (s *Store) TakeOver(ctx context.Context, seen kvstore.Record, req kvstore.ClaimRequest) (kvstore.Lease, error) {
	const op = "take over"
	if err := req.ValidateTakeOver(seen); err != nil {
		return kvstore.Lease{}, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := s.usable(op); err != nil {
		return kvstore.Lease{}, err
	}
	var (
		cur value
		e   jetstream.KeyValueEntry
		err error
	)
	for attempt := 0; ; attempt++ {
		if err := pause(ctx, attempt); err != nil {
			return kvstore.Lease{}, unavailable(op, err)
		}
		var rec kvstore.Record
		rec, e, err = s.read(ctx, seen.Tenant, seen.Key)
		if errors.Is(err, kvstore.ErrNotFound) {
			return kvstore.Lease{}, fmt.Errorf("natsstore: %s: %w", op, kvstore.ErrNotFound)
		}
		if err != nil {
			return kvstore.Lease{}, fmt.Errorf("natsstore: %s: %w", op, err)
		}
		if e.Revision() < seen.Revision && attempt < maxAttempts {
			continue // a replica behind the caller's read
		}
		if e.Revision() != seen.Revision || rec.State != kvstore.StateClaimed || rec.Holder != seen.Holder {
			return kvstore.Lease{}, fmt.Errorf("natsstore: %s: record changed since it was read: %w", op, kvstore.ErrLeaseHeld)
		}
		cur, _ = decodeValue(e.Value()) // read decoded it already
		break
	}
	now, err := s.serverNow(ctx)
	if err != nil {
		return kvstore.Lease{}, unavailable(op, err)
	}
	until := e.Created().Add(time.Duration(cur.Lease))
	if now.Before(until) {
		return kvstore.Lease{}, fmt.Errorf("natsstore: %s: lease runs for %v more by the server's clock: %w",
			op, until.Sub(now), kvstore.ErrLeaseHeld)
	}
	req.Tenant, req.Key = seen.Tenant, seen.Key
	v := newClaim(req, time.Unix(0, cur.Created))
	buf := v.encode()
	defer putBuf(buf)
	b := *buf
	if len(b) > s.maxValue {
		return kvstore.Lease{}, fmt.Errorf("natsstore: %s: record of %d bytes, limit %d: %w: %w",
			op, len(b), s.maxValue, kvstore.ErrInvalid, kvstore.ErrTooLarge)
	}
	key := keyOf(seen.Tenant, seen.Key)
	rev, err := s.cas(ctx, key, b, v.Write, seen.Revision)
	if errors.Is(err, errConflict) {
		if _, _, rerr := s.read(ctx, seen.Tenant, seen.Key); errors.Is(rerr, kvstore.ErrNotFound) {
			return kvstore.Lease{}, fmt.Errorf("natsstore: %s: %w", op, kvstore.ErrNotFound)
		}
		return kvstore.Lease{}, fmt.Errorf("natsstore: %s: record changed since it was read: %w", op, kvstore.ErrLeaseHeld)
	}
	if err != nil {
		return kvstore.Lease{}, unavailable(op, err)
	}
	return s.leaseOf(seen.Tenant, seen.Key, rev, v), nil
}

// Resolve applies an operator's decision to an indeterminate record: a
// compare-and-set completing it with res.Outcome (its reason is kept), or a
// conditional delete. It returns the record as it now is (UpdatedAt and
// ExpiresAt then are the writer's estimates) or, for a release, as it was. It
// returns kvstore.ErrNotIndeterminate for a record in another state,
// kvstore.ErrNotFound if there is none and kvstore.ErrTooLarge for an outcome
// that does not fit.
func (s *Store) Resolve(ctx context.Context, tenant, digest string, res kvstore.Resolution) (kvstore.Record, error) {
	const op = "resolve"
	if err := kvstore.CheckKey(tenant, digest); err != nil {
		return kvstore.Record{}, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := s.usable(op); err != nil {
		return kvstore.Record{}, err
	}
	key := keyOf(tenant, digest)
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if err := pause(ctx, attempt); err != nil {
			return kvstore.Record{}, unavailable(op, err)
		}
		rec, e, err := s.read(ctx, tenant, digest)
		if err != nil {
			return kvstore.Record{}, fmt.Errorf("natsstore: %s: %w", op, err)
		}
		if rec.State != kvstore.StateIndeterminate {
			return kvstore.Record{}, fmt.Errorf("natsstore: %s: record is %s: %w", op, rec.State, kvstore.ErrNotIndeterminate)
		}
		if res.Release {
			err := s.casDelete(ctx, key, e.Revision())
			if errors.Is(err, errConflict) {
				continue // changed under us: look again
			}
			if err != nil {
				return kvstore.Record{}, unavailable(op, err)
			}
			return rec, nil
		}
		cur, _ := decodeValue(e.Value())
		v := cur
		v.State = string(kvstore.StateCompleted)
		v.Outcome = text(res.Outcome)
		v.Write = newID()
		rev, err := s.casValue(ctx, key, &v, e.Revision())
		switch {
		case errors.Is(err, errConflict):
			continue
		case errors.Is(err, kvstore.ErrTooLarge):
			return kvstore.Record{}, fmt.Errorf("natsstore: %s: %w", op, err)
		case err != nil:
			return kvstore.Record{}, unavailable(op, err)
		}
		return v.record(tenant, digest, rev, time.Now(), s.retention), nil
	}
	return kvstore.Record{}, unavailable(op, errors.New("the record kept changing"))
}

// Forget erases every record of tenant with one stream purge filtered on the
// tenant's subjects. The purge writes no markers, so watchers see nothing: a
// Wait on a claimed record of the tenant notices at its lease deadline (it
// re-reads then and returns kvstore.ErrNotFound); a Wait on a completed or
// indeterminate one at its retention deadline. The server does not tell how
// many records (as opposed to messages, delete markers included) it removed, so
// Forget returns -1.
func (s *Store) Forget(ctx context.Context, tenant string) (int64, error) {
	const op = "forget"
	if err := kvstore.CheckTenant(tenant); err != nil {
		return 0, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := s.usable(op); err != nil {
		return 0, err
	}
	subject := "$KV." + s.bucket + "." + tenant + ".>"
	if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return 0, unavailable(op, err)
	}
	return -1, nil
}

// DumpRaw returns the tenant's live records as the bucket stores them, ordered
// by key: each is the KV key, a space, and the value's bytes. It is for tests and
// operators (it implements kvstoretest.RawDumper) and reads the tenant's keys with
// one watch.
func (s *Store) DumpRaw(ctx context.Context, tenant string) ([][]byte, error) {
	const op = "dump"
	if err := kvstore.CheckTenant(tenant); err != nil {
		return nil, fmt.Errorf("natsstore: %s: %w", op, err)
	}
	if err := s.usable(op); err != nil {
		return nil, err
	}
	w, err := s.kv.Watch(ctx, tenant+".>", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, unavailable(op, err)
	}
	defer w.Stop()
	byKey := map[string][]byte{}
	for {
		select {
		case <-ctx.Done():
			return nil, unavailable(op, ctx.Err())
		case e, ok := <-w.Updates():
			if !ok {
				return nil, unavailable(op, errWatchClosed)
			}
			if e != nil {
				byKey[e.Key()] = append([]byte(e.Key()+" "), e.Value()...)
				continue
			}
			keys := make([]string, 0, len(byKey))
			for k := range byKey {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			out := make([][]byte, len(keys))
			for i, k := range keys {
				out[i] = byKey[k]
			}
			return out, nil
		}
	}
}

// Close makes later calls fail with kvstore.ErrUnavailable and wakes blocked
// Waits, which return that error too. It does not close the NATS connection.
// Closing twice is harmless.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	return nil
}

// usable returns an error wrapping kvstore.ErrUnavailable once the store is
// closed.
func (s *Store) usable(op string) error {
	select {
	case <-s.done:
		return unavailable(op, errClosed)
	default:
		return nil
	}
}

// serverNow learns the server's current time: it writes to clockKey and reads
// the entry back from the leader; the entry's timestamp is the server's. If the
// read is behind the probe (a leader just elected), it returns an earlier time
// of the server's, which only makes a lease look longer, never shorter.
func (s *Store) serverNow(ctx context.Context) (time.Time, error) {
	rev, err := s.kv.Put(ctx, clockKey, nil)
	if err != nil {
		return time.Time{}, fmt.Errorf("clock probe: %w", err)
	}
	var last time.Time
	for attempt := 0; attempt < 3; attempt++ {
		if err := pause(ctx, attempt); err != nil {
			break
		}
		e, err := s.get(ctx, clockKey)
		if err != nil {
			continue
		}
		last = e.Created()
		if e.Revision() >= rev {
			return last, nil
		}
	}
	if last.IsZero() {
		return time.Time{}, fmt.Errorf("clock probe: no answer to the read back")
	}
	return last, nil
}

func (s *Store) leaseOf(tenant, digest string, rev uint64, v value) kvstore.Lease {
	return kvstore.Lease{
		Tenant: tenant,
		Key:    digest,
		Holder: string(v.Holder),
		Token:  token{Rev: rev, Value: v}.String(),
	}
}

// pause waits before a retry: nothing before the first attempt, then 2 ms,
// doubling up to 100 ms (about half a second over maxAttempts): long enough for a
// new leader to catch up. It returns ctx's error if ctx ends first, else nil.
// It is internal/backoff's Backoff{Initial: 2ms, Max: 100ms} written out, as a
// backend is to import only package kvstore and its drivers.
func pause(ctx context.Context, attempt int) error {
	if attempt == 0 {
		return ctx.Err()
	}
	d := min(2*time.Millisecond<<min(attempt-1, 16), 100*time.Millisecond)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// keyOf is the KV key of a record: <tenant>.<digest>.
func keyOf(tenant, digest string) string { return tenant + "." + digest }
