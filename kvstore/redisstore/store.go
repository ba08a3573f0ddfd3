package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
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
	// The scripts' common leading arguments, boxed once: the retention and the
	// index slack (indexSlack, at most the retention) in milliseconds.
	retMS, slackMS any

	pipe *pipeliner // sends script runs in pipelines (pipe.go); nil when off

	closeOnce sync.Once
	done      chan struct{} // closed by Close; wakes blocked Waits
}

var _ kvstore.Store = (*Store)(nil)

// indexSlack is how far past a write's retention the tenant index entry of the
// record reaches (at most the retention itself). Later writes that fall within
// it — the record that completes a claim, typically — leave the index alone; the
// price is that an entry may outlive its record by as much before a claim prunes
// it. The index's and the revision counter's TTLs are pushed a slack beyond
// that reach, once a slack rather than on every claim.
const indexSlack = time.Hour

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
	ret := durMS(cfg.Retention)
	s := &Store{
		client:  client,
		cfg:     cfg,
		retMS:   strconv.FormatInt(ret, 10),
		slackMS: strconv.FormatInt(min(ret, durMS(indexSlack)), 10),
		done:    make(chan struct{}),
	}
	s.pipe = newPipeliner(client, cfg)
	return s, nil
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

func (s *Store) recKey(tenant, digest string) string {
	return s.cfg.Prefix + ":{" + tenant + "}:" + digest
}
func (s *Store) idxKey(tenant string) string { return s.cfg.Prefix + ":{" + tenant + "}:idx" }

// keys returns the keys every record script takes: the record, the tenant's
// index and its revision counter, cut from one string.
func (s *Store) keys(tenant, digest string) []string {
	tag := len(s.cfg.Prefix) + len(tenant) + 4 // <prefix>:{<tenant>}:
	var b strings.Builder
	b.Grow(3*tag + len(digest) + 6)
	for _, name := range [...]string{digest, "idx", "rev"} {
		b.WriteString(s.cfg.Prefix)
		b.WriteString(":{")
		b.WriteString(tenant)
		b.WriteString("}:")
		b.WriteString(name)
	}
	all := b.String()
	rec := tag + len(digest)
	return []string{all[:rec], all[rec : rec+tag+3], all[rec+tag+3:]}
}

// channel is the Pub/Sub channel on which changes to the record are announced;
// the scripts derive the same name from the record key.
func (s *Store) channel(tenant, digest string) string {
	return s.recKey(tenant, digest) + ":chg"
}

// run executes one of the record scripts on tenant/digest; args start with the
// common leading arguments (retention and index slack).
func (s *Store) run(ctx context.Context, sc *redis.Script, tenant, digest string, args ...any) (any, error) {
	return s.script(ctx, sc, s.keys(tenant, digest), args...)
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
	if err := invalid(op, req.Validate()); err != nil {
		return kvstore.ClaimResult{}, err
	}
	token, err := newToken()
	if err != nil {
		return kvstore.ClaimResult{}, unavailable(op, err)
	}
	res, err := s.claim(ctx, req, token)
	if err != nil {
		return kvstore.ClaimResult{}, unavailable(op, err)
	}
	return res, nil
}

// claim runs the claim script for req with the fencing token token. The
// script's answer for an existing record that holds this very claim (the client
// ran the script again after a timeout, and the first run had landed) is the
// caller's own claim, answered as granted.
func (s *Store) claim(ctx context.Context, req kvstore.ClaimRequest, token string) (kvstore.ClaimResult, error) {
	lease := durMS(req.Lease)
	v, err := s.run(ctx, claimScript, req.Tenant, req.Key, s.retMS, s.slackMS, lease, encodeIdentity(req, token))
	if err != nil {
		return kvstore.ClaimResult{}, err
	}
	status, now, rest, err := splitReply(v)
	if err != nil {
		return kvstore.ClaimResult{}, err
	}
	granted := kvstore.Lease{Tenant: req.Tenant, Key: req.Key, Holder: req.Holder, Token: token}
	switch status {
	case statusOK:
		rev, err := strconv.ParseUint(rest, 10, 64)
		if err != nil {
			return kvstore.ClaimResult{}, fmt.Errorf("unexpected revision %q", rest)
		}
		at := msTime(now)
		return kvstore.ClaimResult{Claimed: true, Lease: granted, Record: kvstore.Record{
			Tenant: req.Tenant, Key: req.Key, State: kvstore.StateClaimed,
			CheckDigest: req.CheckDigest, Tool: req.Tool, RunID: req.RunID, CallID: req.CallID,
			Holder: req.Holder, Lease: time.Duration(lease) * time.Millisecond,
			LeaseUntil: msTime(now + lease), Revision: rev,
			CreatedAt: at, UpdatedAt: at, ExpiresAt: msTime(now + durMS(s.cfg.Retention)),
		}}, nil
	case statusExists:
		rec, stored, err := decode(req.Tenant, req.Key, rest, now)
		if err != nil {
			return kvstore.ClaimResult{}, err
		}
		if rec.State == kvstore.StateClaimed && rec.Holder == req.Holder && stored == token {
			return kvstore.ClaimResult{Claimed: true, Lease: granted, Record: rec}, nil
		}
		return kvstore.ClaimResult{Record: rec}, nil
	default:
		return kvstore.ClaimResult{}, fmt.Errorf("unexpected script status %q", status)
	}
}

// Get returns the live record, with LeaseExpired judged by Redis's clock, or an
// error wrapping kvstore.ErrNotFound.
func (s *Store) Get(ctx context.Context, tenant, digest string) (kvstore.Record, error) {
	const op = "get"
	if err := s.closed(op); err != nil {
		return kvstore.Record{}, err
	}
	if err := invalid(op, kvstore.CheckKey(tenant, digest)); err != nil {
		return kvstore.Record{}, err
	}
	rec, _, err := s.read(ctx, op, readScript, tenant, digest)
	return rec, err
}

// read runs readScript or watchScript (with args) on the record and returns it
// with Redis's time at the read (ms), or an error wrapping kvstore.ErrNotFound.
func (s *Store) read(ctx context.Context, op string, sc *redis.Script, tenant, digest string, args ...any) (kvstore.Record, int64, error) {
	found, now, v, err := s.readValue(ctx, sc, tenant, digest, args...)
	if err != nil {
		return kvstore.Record{}, 0, unavailable(op, err)
	}
	if !found {
		return kvstore.Record{}, now, fmt.Errorf("redisstore: %s: %w", op, kvstore.ErrNotFound)
	}
	rec, _, err := decode(tenant, digest, v, now)
	if err != nil {
		return kvstore.Record{}, 0, unavailable(op, err)
	}
	return rec, now, nil
}

// readValue runs readScript or watchScript (with args) on the record and
// returns whether it exists, Redis's time at the read (ms) and the value in this
// version's layout.
func (s *Store) readValue(ctx context.Context, sc *redis.Script, tenant, digest string, args ...any) (bool, int64, string, error) {
	v, err := s.script(ctx, sc, []string{s.recKey(tenant, digest)}, args...)
	if err != nil {
		return false, 0, "", err
	}
	status, now, rest, err := splitReply(v)
	switch {
	case err != nil:
		return false, 0, "", err
	case status == statusOK:
		return true, now, rest, nil
	case status == statusGone:
		return false, now, "", nil
	default:
		return false, 0, "", fmt.Errorf("unexpected script status %q", status)
	}
}

// holderOp runs a holder-only script for lease; args follow the lease.
func (s *Store) holderOp(ctx context.Context, op string, sc *redis.Script, lease kvstore.Lease, args ...any) error {
	if err := s.closed(op); err != nil {
		return err
	}
	if err := invalid(op, lease.Validate()); err != nil {
		return err
	}
	argv := make([]any, 3, 3+len(args))
	argv[0], argv[1], argv[2] = s.retMS, s.slackMS, encodeLeaseID(lease.Holder, lease.Token)
	v, err := s.run(ctx, sc, lease.Tenant, lease.Key, append(argv, args...)...)
	if err != nil {
		return unavailable(op, err)
	}
	status, _, _, err := splitReply(v)
	if err != nil {
		return unavailable(op, err)
	}
	switch status {
	case statusOK:
		return nil
	case statusGone:
		return holderGone(op)
	default:
		return statusErr(op, status)
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
	return s.holderOp(ctx, op, recordScript, lease, outcome)
}

// Release drops the claim so that the key is free again. It returns an error
// wrapping kvstore.ErrNotHolder if lease is no longer current.
func (s *Store) Release(ctx context.Context, lease kvstore.Lease) error {
	return s.holderOp(ctx, "release", releaseScript, lease)
}

// Withdraw deletes the claim seen, whatever its lease, comparing its revision,
// holder and state inside one script: see kvstore.Withdrawer. It returns an
// error wrapping kvstore.ErrNotHolder if the record changed since seen,
// kvstore.ErrNotFound if it is gone and kvstore.ErrInvalid for a seen that is
// not a claim of holder.
func (s *Store) Withdraw(ctx context.Context, seen kvstore.Record, holder string) error {
	const op = "withdraw"
	if err := s.closed(op); err != nil {
		return err
	}
	if err := invalid(op, kvstore.ValidateWithdraw(seen, holder)); err != nil {
		return err
	}
	v, err := s.run(ctx, withdrawScript, seen.Tenant, seen.Key, s.retMS, s.slackMS,
		encodeHolder(holder), strconv.FormatUint(seen.Revision, 10))
	if err != nil {
		return unavailable(op, err)
	}
	status, _, _, err := splitReply(v)
	if err != nil {
		return unavailable(op, err)
	}
	if status != statusOK {
		return statusErr(op, status)
	}
	return nil
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
	return s.holderOp(ctx, op, indeterminateScript, lease, reason, be)
}

// Renew sets the lease deadline to Redis's now plus d and returns the lease to use
// from then on (the same token: earlier copies stay valid). It returns an error
// wrapping kvstore.ErrNotHolder if lease is no longer current, kvstore.ErrInvalid
// for a non-positive d.
func (s *Store) Renew(ctx context.Context, lease kvstore.Lease, d time.Duration) (kvstore.Lease, error) {
	const op = "renew"
	if err := invalid(op, kvstore.CheckLeaseDuration(d)); err != nil {
		return kvstore.Lease{}, err
	}
	if err := s.holderOp(ctx, op, renewScript, lease, durMS(d)); err != nil {
		return kvstore.Lease{}, err
	}
	return lease, nil
}

// TakeOver replaces the claim seen, whose lease has run out by Redis's clock, with
// a new claim for req.Holder, comparing the revision and holder in seen inside the
// same script. It returns an error wrapping kvstore.ErrLeaseHeld if the lease has
// not run out or the record changed (including a record no longer claimed), and
// kvstore.ErrNotFound if it is gone, and kvstore.ErrInvalid for a malformed seen
// or req, or a req that names another key than seen (see
// kvstore.ClaimRequest.ValidateTakeOver).
func (s *Store) TakeOver(ctx context.Context, seen kvstore.Record, req kvstore.ClaimRequest) (kvstore.Lease, error) {
	const op = "take over"
	if err := s.closed(op); err != nil {
		return kvstore.Lease{}, err
	}
	if err := invalid(op, req.ValidateTakeOver(seen)); err != nil {
		return kvstore.Lease{}, err
	}
	token, err := newToken()
	if err != nil {
		return kvstore.Lease{}, unavailable(op, err)
	}
	v, err := s.run(ctx, takeOverScript, req.Tenant, req.Key, s.retMS, s.slackMS,
		encodeHolder(seen.Holder), strconv.FormatUint(seen.Revision, 10), durMS(req.Lease), encodeIdentity(req, token))
	if err != nil {
		return kvstore.Lease{}, unavailable(op, err)
	}
	status, _, _, err := splitReply(v)
	if err != nil {
		return kvstore.Lease{}, unavailable(op, err)
	}
	if status != statusOK {
		return kvstore.Lease{}, statusErr(op, status)
	}
	return kvstore.Lease{Tenant: req.Tenant, Key: req.Key, Holder: req.Holder, Token: token}, nil
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
	if err := invalid(op, kvstore.CheckKey(tenant, digest)); err != nil {
		return kvstore.Record{}, err
	}
	if !res.Release && len(res.Outcome) > s.cfg.MaxValueSize {
		return kvstore.Record{}, errf(op, kvstore.ErrTooLarge, "outcome of %d bytes exceeds %d", len(res.Outcome), s.cfg.MaxValueSize)
	}
	rel := "0"
	if res.Release {
		rel = "1"
	}
	v, err := s.run(ctx, resolveScript, tenant, digest, s.retMS, s.slackMS, rel, res.Outcome)
	if err != nil {
		return kvstore.Record{}, unavailable(op, err)
	}
	status, now, rest, err := splitReply(v)
	if err != nil {
		return kvstore.Record{}, unavailable(op, err)
	}
	if status != statusOK {
		return kvstore.Record{}, statusErr(op, status)
	}
	rec, _, err := decode(tenant, digest, rest, now)
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
	if err := invalid(op, kvstore.CheckTenant(tenant)); err != nil {
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
	var h [32]byte
	hex.Encode(h[:], b[:])
	return string(h[:]), nil
}

// durMS converts d to whole milliseconds, rounding up so that a positive duration
// never becomes zero.
func durMS(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
