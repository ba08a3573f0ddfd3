package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tesserix/toolexec/kvstore"
)

// Store is a [kvstore.Store] on Redis. Create it with [New]; it is safe for
// concurrent use, and any number of Stores (in any number of processes) may share
// one Redis and prefix.
type Store struct {
	client redis.UniversalClient
	cfg    Config
	retMS  string // cfg.Retention in milliseconds, as scripts take it

	closeOnce sync.Once
	done      chan struct{} // closed by Close; wakes blocked Waits
}

var _ kvstore.Store = (*Store)(nil)

// New returns a Store that keeps its records in client, configured by cfg (zero
// fields take their defaults; see [Config]). It does no I/O: an unreachable Redis
// shows up as kvstore.ErrUnavailable from the first operation. It returns an
// error wrapping kvstore.ErrInvalid for a nil client or a field out of range.
// Close does not close client.
func New(client redis.UniversalClient, cfg Config) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("redisstore: nil client: %w", kvstore.ErrInvalid)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Store{
		client: client,
		cfg:    cfg,
		retMS:  strconv.FormatInt(durMS(cfg.Retention), 10),
		done:   make(chan struct{}),
	}, nil
}

// Config returns the store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// Close makes every later operation fail with ErrClosed (wrapping
// kvstore.ErrUnavailable) and wakes blocked Waits. It does not close the client.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { close(s.done) })
	return nil
}

func (s *Store) closed(op string) error {
	select {
	case <-s.done:
		return unavailable(op, ErrClosed)
	default:
		return nil
	}
}

// Key names; see the package documentation for the layout.

func (s *Store) tag(tenant string) string { return s.cfg.Prefix + ":{" + tenant + "}:" }
func (s *Store) recKey(tenant, digest string) string {
	return s.tag(tenant) + digest
}
func (s *Store) idxKey(tenant string) string { return s.tag(tenant) + "idx" }
func (s *Store) revKey(tenant string) string { return s.tag(tenant) + "rev" }

// channel is the Pub/Sub channel on which every change to the record is announced.
// forgetScript derives the same name from the record key.
func (s *Store) channel(tenant, digest string) string {
	return s.recKey(tenant, digest) + ":chg"
}

// run executes one of the writing scripts on the record for tenant/digest with
// the common leading arguments and args after them.
func (s *Store) run(ctx context.Context, sc *redis.Script, tenant, digest string, args ...any) (any, error) {
	keys := []string{s.recKey(tenant, digest), s.idxKey(tenant), s.revKey(tenant)}
	argv := append([]any{digest, s.retMS, s.channel(tenant, digest)}, args...)
	return sc.Run(ctx, s.client, keys, argv...).Result()
}

// Claim creates the record in StateClaimed unless a live record exists, in one
// atomic script that stamps the lease deadline from Redis's clock. It returns
// Claimed with a Lease (and the new record), or the existing record with
// LeaseExpired judged by Redis's clock. It never takes over a claim. Errors:
// kvstore.ErrInvalid for a malformed request, kvstore.ErrUnavailable when Redis
// cannot be reached — never a claim.
func (s *Store) Claim(ctx context.Context, req kvstore.ClaimRequest) (kvstore.ClaimResult, error) {
	const op = "claim"
	if err := s.closed(op); err != nil {
		return kvstore.ClaimResult{}, err
	}
	if err := validClaim(op, req); err != nil {
		return kvstore.ClaimResult{}, err
	}
	token, err := newToken()
	if err != nil {
		return kvstore.ClaimResult{}, unavailable(op, err)
	}
	v, err := s.run(ctx, claimScript, req.Tenant, req.Digest,
		req.Tenant, req.Holder, durMS(req.Lease), token,
		req.CheckDigest, req.Tool, req.RunID, req.CallID)
	if err != nil {
		return kvstore.ClaimResult{}, unavailable(op, err)
	}
	status, snap, err := parseReply(v)
	if err != nil {
		return kvstore.ClaimResult{}, unavailable(op, err)
	}
	if status != statusOK && status != statusExists {
		return kvstore.ClaimResult{}, statusErr(op, status)
	}
	if !snap.found {
		return kvstore.ClaimResult{}, unavailable(op, fmt.Errorf("script returned no record"))
	}
	rec, err := snap.record()
	if err != nil {
		return kvstore.ClaimResult{}, unavailable(op, err)
	}
	if status == statusExists {
		return kvstore.ClaimResult{Record: rec}, nil
	}
	return kvstore.ClaimResult{
		Claimed: true,
		Lease:   kvstore.Lease{Tenant: req.Tenant, Digest: req.Digest, Holder: req.Holder, Token: token},
		Record:  rec,
	}, nil
}

// Get returns the live record, with LeaseExpired judged by Redis's clock, or an
// error wrapping kvstore.ErrNotFound.
func (s *Store) Get(ctx context.Context, tenant, digest string) (kvstore.Record, error) {
	const op = "get"
	if err := s.closed(op); err != nil {
		return kvstore.Record{}, err
	}
	if err := validKey(op, tenant, digest); err != nil {
		return kvstore.Record{}, err
	}
	snap, err := s.read(ctx, op, tenant, digest)
	if err != nil {
		return kvstore.Record{}, err
	}
	if !snap.found {
		return kvstore.Record{}, fmt.Errorf("redisstore: %s: %w", op, kvstore.ErrNotFound)
	}
	rec, err := snap.record()
	if err != nil {
		return kvstore.Record{}, unavailable(op, err)
	}
	return rec, nil
}

// read fetches the record together with Redis's time.
func (s *Store) read(ctx context.Context, op, tenant, digest string) (snapshot, error) {
	v, err := readScript.Run(ctx, s.client, []string{s.recKey(tenant, digest)}).Result()
	if err != nil {
		return snapshot{}, unavailable(op, err)
	}
	status, snap, err := parseReply(v)
	if err != nil {
		return snapshot{}, unavailable(op, err)
	}
	if status != statusOK && status != statusGone {
		return snapshot{}, statusErr(op, status)
	}
	return snap, nil
}

// holderOp runs a holder-only script and translates its status.
func (s *Store) holderOp(ctx context.Context, op string, sc *redis.Script, lease kvstore.Lease, args ...any) (snapshot, error) {
	if err := s.closed(op); err != nil {
		return snapshot{}, err
	}
	if err := validLease(op, lease); err != nil {
		return snapshot{}, err
	}
	v, err := s.run(ctx, sc, lease.Tenant, lease.Digest, append([]any{lease.Holder, lease.Token}, args...)...)
	if err != nil {
		return snapshot{}, unavailable(op, err)
	}
	status, snap, err := parseReply(v)
	if err != nil {
		return snapshot{}, unavailable(op, err)
	}
	switch status {
	case statusOK:
		return snap, nil
	case statusGone:
		return snapshot{}, holderGone(op)
	default:
		return snapshot{}, statusErr(op, status)
	}
}

// Record stores outcome and moves the claim to StateCompleted. It returns an error
// wrapping kvstore.ErrNotHolder if lease is no longer current (also matching
// kvstore.ErrNotFound when the record is gone), kvstore.ErrTooLarge if outcome is
// longer than Config.MaxValueSize.
func (s *Store) Record(ctx context.Context, lease kvstore.Lease, outcome string) error {
	const op = "record"
	if len(outcome) > s.cfg.MaxValueSize {
		return errf(op, kvstore.ErrTooLarge, "outcome of %d bytes exceeds %d", len(outcome), s.cfg.MaxValueSize)
	}
	_, err := s.holderOp(ctx, op, recordScript, lease, outcome)
	return err
}

// Release drops the claim so that the key is free again. It returns an error
// wrapping kvstore.ErrNotHolder if lease is no longer current.
func (s *Store) Release(ctx context.Context, lease kvstore.Lease) error {
	_, err := s.holderOp(ctx, "release", releaseScript, lease)
	return err
}

// MarkIndeterminate parks the claim in StateIndeterminate with reason. It returns
// an error wrapping kvstore.ErrNotHolder if lease is no longer current,
// kvstore.ErrTooLarge if reason is longer than Config.MaxValueSize.
func (s *Store) MarkIndeterminate(ctx context.Context, lease kvstore.Lease, reason string, bodyEntered bool) error {
	const op = "mark indeterminate"
	if len(reason) > s.cfg.MaxValueSize {
		return errf(op, kvstore.ErrTooLarge, "reason of %d bytes exceeds %d", len(reason), s.cfg.MaxValueSize)
	}
	be := "0"
	if bodyEntered {
		be = "1"
	}
	_, err := s.holderOp(ctx, op, indeterminateScript, lease, reason, be)
	return err
}

// Renew sets the lease deadline to Redis's now plus d and returns the lease to use
// from then on (the same token: earlier copies stay valid). It returns an error
// wrapping kvstore.ErrNotHolder if lease is no longer current, kvstore.ErrInvalid
// for a non-positive d.
func (s *Store) Renew(ctx context.Context, lease kvstore.Lease, d time.Duration) (kvstore.Lease, error) {
	const op = "renew"
	if d <= 0 {
		return kvstore.Lease{}, errf(op, kvstore.ErrInvalid, "lease %v must be positive", d)
	}
	if _, err := s.holderOp(ctx, op, renewScript, lease, durMS(d)); err != nil {
		return kvstore.Lease{}, err
	}
	return lease, nil
}

// TakeOver replaces the claim seen, whose lease has run out by Redis's clock, with
// a new claim for req.Holder, comparing the revision and holder in seen inside the
// same script. It returns an error wrapping kvstore.ErrLeaseHeld if the lease has
// not run out or the record changed (including a record no longer claimed), and
// kvstore.ErrNotFound if it is gone. req.Tenant and req.Digest may be left empty;
// if set they must match seen's.
func (s *Store) TakeOver(ctx context.Context, seen kvstore.Record, req kvstore.ClaimRequest) (kvstore.Lease, error) {
	const op = "take over"
	if err := s.closed(op); err != nil {
		return kvstore.Lease{}, err
	}
	if req.Tenant == "" {
		req.Tenant = seen.Tenant
	}
	if req.Digest == "" {
		req.Digest = seen.Digest
	}
	if req.Tenant != seen.Tenant || req.Digest != seen.Digest {
		return kvstore.Lease{}, errf(op, kvstore.ErrInvalid, "request names %s/%s but seen record is %s/%s", req.Tenant, req.Digest, seen.Tenant, seen.Digest)
	}
	if err := validClaim(op, req); err != nil {
		return kvstore.Lease{}, err
	}
	token, err := newToken()
	if err != nil {
		return kvstore.Lease{}, unavailable(op, err)
	}
	v, err := s.run(ctx, takeOverScript, req.Tenant, req.Digest,
		strconv.FormatUint(seen.Revision, 10), seen.Holder, req.Holder, durMS(req.Lease), token,
		req.CheckDigest, req.Tool, req.RunID, req.CallID)
	if err != nil {
		return kvstore.Lease{}, unavailable(op, err)
	}
	status, _, err := parseReply(v)
	if err != nil {
		return kvstore.Lease{}, unavailable(op, err)
	}
	if status != statusOK {
		return kvstore.Lease{}, statusErr(op, status)
	}
	return kvstore.Lease{Tenant: req.Tenant, Digest: req.Digest, Holder: req.Holder, Token: token}, nil
}

// Resolve applies an operator's decision to an indeterminate record and returns
// the record as it now is (for a release, as it was). It returns an error
// wrapping kvstore.ErrNotIndeterminate for a record in another state,
// kvstore.ErrNotFound if there is none, kvstore.ErrTooLarge for an outcome longer
// than Config.MaxValueSize.
func (s *Store) Resolve(ctx context.Context, tenant, digest string, res kvstore.Resolution) (kvstore.Record, error) {
	const op = "resolve"
	if err := s.closed(op); err != nil {
		return kvstore.Record{}, err
	}
	if err := validKey(op, tenant, digest); err != nil {
		return kvstore.Record{}, err
	}
	if !res.Release && len(res.Outcome) > s.cfg.MaxValueSize {
		return kvstore.Record{}, errf(op, kvstore.ErrTooLarge, "outcome of %d bytes exceeds %d", len(res.Outcome), s.cfg.MaxValueSize)
	}
	rel := "0"
	if res.Release {
		rel = "1"
	}
	v, err := s.run(ctx, resolveScript, tenant, digest, rel, res.Outcome)
	if err != nil {
		return kvstore.Record{}, unavailable(op, err)
	}
	status, snap, err := parseReply(v)
	if err != nil {
		return kvstore.Record{}, unavailable(op, err)
	}
	if status != statusOK {
		return kvstore.Record{}, statusErr(op, status)
	}
	rec, err := snap.record()
	if err != nil {
		return kvstore.Record{}, unavailable(op, err)
	}
	return rec, nil
}

// Forget erases every record of tenant and returns how many it removed. It walks
// the tenant's index in batches of Config.ForgetBatch, each batch one script that
// unlinks the records, drops them from the index and tells their waiters; it never
// scans the keyspace. Other tenants' records are untouched. Records claimed while
// Forget runs may or may not be removed.
func (s *Store) Forget(ctx context.Context, tenant string) (int64, error) {
	const op = "forget"
	if err := s.closed(op); err != nil {
		return 0, err
	}
	if err := validTenant(op, tenant); err != nil {
		return 0, err
	}
	idx := s.idxKey(tenant)
	var total int64
	for {
		digests, err := s.client.ZRange(ctx, idx, 0, int64(s.cfg.ForgetBatch-1)).Result()
		if err != nil {
			return total, unavailable(op, err)
		}
		if len(digests) == 0 {
			return total, nil
		}
		keys := make([]string, 0, len(digests)+1)
		args := make([]any, 0, len(digests))
		keys = append(keys, idx)
		for _, d := range digests {
			keys = append(keys, s.recKey(tenant, d))
			args = append(args, d)
		}
		n, err := forgetScript.Run(ctx, s.client, keys, args...).Int64()
		if err != nil {
			return total, unavailable(op, err)
		}
		total += n
	}
}

// newToken returns a random fencing token.
func newToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// durMS converts d to whole milliseconds, rounding up so that a positive duration
// never becomes zero.
func durMS(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
