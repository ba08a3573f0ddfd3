package kvstore

import (
	"fmt"
	"time"
)

// The request checks every store makes before it touches its backend. Each
// returns nil or an error wrapping [ErrInvalid] whose message names the field at
// fault; a store wraps it with its own name and operation. A backend may refuse
// more (PostgreSQL's text type holds no NUL bytes), never less.

// CheckTenant returns an error wrapping [ErrInvalid] unless tenant is a token of
// [A-Za-z0-9_-]{1,128}, the wire's rule (which also keeps it one NATS subject
// token, free of Redis hash-tag braces and of SQL surprises).
func CheckTenant(tenant string) error {
	ok := len(tenant) >= 1 && len(tenant) <= 128
	for i := 0; ok && i < len(tenant); i++ {
		c := tenant[i]
		ok = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-'
	}
	if !ok {
		return fmt.Errorf("%w: tenant %q must match [A-Za-z0-9_-]{1,128}", ErrInvalid, tenant)
	}
	return nil
}

// CheckKey returns an error wrapping [ErrInvalid] unless tenant passes
// [CheckTenant] and key is 64 lower-case hex digits. Stores call it before
// touching their backend.
func CheckKey(tenant, key string) error {
	if err := CheckTenant(tenant); err != nil {
		return err
	}
	ok := len(key) == 64
	for i := 0; ok && i < len(key); i++ {
		c := key[i]
		ok = '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
	}
	if !ok {
		return fmt.Errorf("%w: key %q must be 64 lower-case hex digits", ErrInvalid, key)
	}
	return nil
}

// CheckLeaseDuration returns an error wrapping [ErrInvalid] unless d, the length
// of a lease asked for by Claim, TakeOver or Renew, is positive.
func CheckLeaseDuration(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: lease %v must be positive", ErrInvalid, d)
	}
	return nil
}

// Validate returns an error wrapping [ErrInvalid] unless r names a valid key
// ([CheckKey]), a holder and a positive lease: the checks [Store.Claim] makes.
// CheckDigest, Tool, RunID and CallID are free text and may be empty.
func (r ClaimRequest) Validate() error {
	if err := CheckKey(r.Tenant, r.Key); err != nil {
		return err
	}
	if r.Holder == "" {
		return fmt.Errorf("%w: empty holder", ErrInvalid)
	}
	return CheckLeaseDuration(r.Lease)
}

// ValidateTakeOver returns an error wrapping [ErrInvalid] unless seen names a
// valid key, r passes [ClaimRequest.Validate] and r names seen's key: the
// checks [Store.TakeOver] makes.
func (r ClaimRequest) ValidateTakeOver(seen Record) error {
	if err := CheckKey(seen.Tenant, seen.Key); err != nil {
		return err
	}
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Tenant != seen.Tenant || r.Key != seen.Key {
		return fmt.Errorf("%w: request names %s/%s but the record seen is %s/%s",
			ErrInvalid, r.Tenant, r.Key, seen.Tenant, seen.Key)
	}
	return nil
}

// ValidateWithdraw returns an error wrapping [ErrInvalid] unless seen names a
// valid key, is in StateClaimed and is held by holder (not empty): the checks
// [Withdrawer.Withdraw] makes.
func ValidateWithdraw(seen Record, holder string) error {
	if err := CheckKey(seen.Tenant, seen.Key); err != nil {
		return err
	}
	switch {
	case holder == "":
		return fmt.Errorf("%w: empty holder", ErrInvalid)
	case seen.State != StateClaimed:
		return fmt.Errorf("%w: the record seen is %s, not a claim", ErrInvalid, seen.State)
	case seen.Holder != holder:
		return fmt.Errorf("%w: the claim seen is held by %q, not %q", ErrInvalid, seen.Holder, holder)
	}
	return nil
}

// Validate returns an error wrapping [ErrInvalid] unless l names a valid key
// ([CheckKey]), a holder and a token: the checks every holder-only operation
// (Record, Release, MarkIndeterminate, Renew) makes. Whether the lease is still
// current is the backend's to say ([ErrNotHolder]).
func (l Lease) Validate() error {
	if err := CheckKey(l.Tenant, l.Key); err != nil {
		return err
	}
	if l.Holder == "" {
		return fmt.Errorf("%w: lease without holder", ErrInvalid)
	}
	if l.Token == "" {
		return fmt.Errorf("%w: lease without token", ErrInvalid)
	}
	return nil
}

// Validate returns an error wrapping [ErrInvalid] unless s is one of
// StateClaimed, StateCompleted and StateIndeterminate (see [State.Valid]): the
// state check [Lister.List] makes.
func (s State) Validate() error {
	if !s.Valid() {
		return fmt.Errorf("%w: state %q", ErrInvalid, s)
	}
	return nil
}
