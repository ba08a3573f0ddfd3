package kvstore

import (
	"context"
	"strings"
	"time"
)

// State is the state of an idempotency record.
type State string

// The states a record moves through. A record that is gone (released, expired or
// forgotten) has no state: operations report [ErrNotFound].
const (
	// StateClaimed: a holder owns the key and is running the tool (or about to).
	StateClaimed State = "claimed"
	// StateCompleted: the tool ran and its outcome is recorded. Terminal.
	StateCompleted State = "completed"
	// StateIndeterminate: nobody can say whether the effect landed. Only an explicit
	// [Store.Resolve] moves it on.
	StateIndeterminate State = "indeterminate"
)

// Record is what a store keeps for one key. It never holds the call's arguments.
type Record struct {
	Tenant string // the tenant the key belongs to
	Key    string // the idempotency key: 64 lower-case hex digits

	State State

	// Outcome is the recorded result; set when State is StateCompleted.
	Outcome string
	// Reason says why the record is indeterminate (e.g. "body_failed",
	// "holder_lost"); set when State is StateIndeterminate.
	Reason string
	// BodyEntered reports, for an indeterminate record, whether the tool's body was
	// entered before the outcome became unknown.
	BodyEntered bool

	// CheckDigest is the digest of the call's check arguments (empty if the tool
	// declares none). Duplicates whose digest differs are refused by the dispatcher.
	CheckDigest string

	// Tool, RunID and CallID identify the call that created the claim, for operators.
	Tool   string
	RunID  string
	CallID string

	// Holder names the worker holding the claim (StateClaimed), or the one that last
	// held it.
	Holder string
	// Lease is the lease duration the holder was granted; LeaseUntil its deadline as
	// last written. Whether a lease has run out is judged by the backend's clock, not
	// by comparing LeaseUntil with a local clock: see LeaseExpired.
	Lease      time.Duration
	LeaseUntil time.Time
	// LeaseExpired reports, for a claimed record, that the backend judged the lease
	// run out when the record was read. Wait sets it when it returns for that reason;
	// Claim and Get set it where the backend can tell cheaply.
	LeaseExpired bool

	// Revision changes on every write to the record. Together with Holder it is what
	// TakeOver compares against.
	Revision uint64

	CreatedAt time.Time // when the key was first claimed
	UpdatedAt time.Time // the last write
	ExpiresAt time.Time // when the record leaves the store (retention), if known
}

// ClaimRequest asks for a key.
type ClaimRequest struct {
	Tenant string
	Key    string
	// Holder identifies the claiming worker; it is stored in the record so that an
	// ambiguous write can be recognised as one's own.
	Holder string
	// Lease is how long the claim lasts unless renewed. Must be positive.
	Lease time.Duration
	// CheckDigest, Tool, RunID and CallID are stored with the record.
	CheckDigest string
	Tool        string
	RunID       string
	CallID      string
}

// Lease is the holder's proof of a claim. It fences every holder-only operation:
// once the claim is taken over, released, recorded or marked, the lease is refused
// with [ErrNotHolder]. Renew returns the lease to use from then on; earlier copies
// may be refused.
type Lease struct {
	Tenant string
	Key    string
	Holder string
	// Token is the backend's fencing token (a revision, a random claim id): opaque
	// to callers.
	Token string
}

// ClaimResult is the answer to Claim: either this caller now holds the key
// (Claimed, with Lease), or Record is the existing record's state.
type ClaimResult struct {
	Claimed bool
	Lease   Lease
	Record  Record
}

// Resolution is an operator's decision about an indeterminate record: complete it
// with Outcome, or (Release) drop it so that the key is free again.
type Resolution struct {
	Release bool
	Outcome string
}

// Store keeps idempotency records. Every method is safe for concurrent use by many
// goroutines and, for shared backends, by many processes. A method that cannot reach
// its backend returns an error wrapping [ErrUnavailable].
//
// Beyond each method's own contract, every store keeps these rules (the
// conformance suite in kvstoretest checks them):
//   - a refused Claim writes nothing;
//   - revisions never repeat for a key, even after it is released, expires or is
//     forgotten and then claimed again, so that a stale seen record can never
//     match a new claim;
//   - retention counts from a record's last write;
//   - a store reads back its own writes: Get after a granted Claim sees the claim;
//   - a holder whose lease ran out may still act until somebody takes the claim
//     over (the lease is a promise to others, not a deadline on the holder).
type Store interface {
	// Claim creates the record in StateClaimed if no live record exists, in a single
	// server-side operation. It returns Claimed and a Lease when this caller got the
	// key, and otherwise the existing record. It never takes over a claim, however
	// stale; see TakeOver.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)

	// Get returns the live record for the key, or ErrNotFound.
	Get(ctx context.Context, tenant, key string) (Record, error)

	// Record stores the outcome and moves the claim to StateCompleted. It returns
	// ErrNotHolder if the lease is no longer current, ErrTooLarge if the outcome
	// does not fit.
	Record(ctx context.Context, lease Lease, outcome string) error

	// Release drops the claim; the key is free again. ErrNotHolder if the lease is
	// no longer current.
	Release(ctx context.Context, lease Lease) error

	// MarkIndeterminate parks the claim in StateIndeterminate with a reason.
	// ErrNotHolder if the lease is no longer current.
	MarkIndeterminate(ctx context.Context, lease Lease, reason string, bodyEntered bool) error

	// Renew extends the lease by d from now (the backend's now) and returns the lease
	// to use from then on. ErrNotHolder if the lease is no longer current.
	Renew(ctx context.Context, lease Lease, d time.Duration) (Lease, error)

	// TakeOver atomically replaces the claim seen in seen, whose lease has run out,
	// with a new claim for req.Holder (compare-and-swap on seen.Revision). It returns
	// ErrLeaseHeld if the lease has not run out by the backend's clock or the record
	// changed since seen was read, ErrNotFound if the record is gone, and
	// ErrInvalid unless req names seen's key (see [ClaimRequest.ValidateTakeOver]).
	TakeOver(ctx context.Context, seen Record, req ClaimRequest) (Lease, error)

	// Wait blocks until the record differs from seen: another revision or state, gone
	// (ErrNotFound), or — for a claimed record — its lease run out (the returned
	// record has LeaseExpired set). It returns ctx.Err() when ctx ends first. A
	// missed notification must not make Wait block past the lease: backends that
	// rely on notifications also re-read.
	Wait(ctx context.Context, seen Record) (Record, error)

	// Forget erases every record of the tenant, in as few server-side operations as
	// the backend allows, and returns how many were removed (-1 if the backend
	// cannot tell). Other tenants' records are untouched.
	Forget(ctx context.Context, tenant string) (int64, error)

	// Resolve applies an operator's decision to an indeterminate record and returns
	// the record as it now is (for a release, the record as it was). It returns
	// ErrNotIndeterminate for a record in another state and ErrNotFound if none.
	Resolve(ctx context.Context, tenant, key string, res Resolution) (Record, error)

	// Close releases the store's resources. It does not close clients it was given.
	Close() error
}

// Lister is an optional capability of a [Store]: listing a tenant's records in
// one state, for operators (the approval path lists the indeterminate records
// that wait for a human). Callers probe for it with a type assertion. The stores
// in this module all implement it.
type Lister interface {
	// List returns up to limit live records of tenant in state, oldest first by
	// UpdatedAt (ties broken by Key); limit ≤ 0 means no limit. Records are
	// as Get returns them, except that LeaseExpired may be left unset. It returns
	// ErrInvalid for a malformed tenant or a state that is not one of
	// StateClaimed, StateCompleted and StateIndeterminate. Listing is a read for
	// people, not part of the guarantee: it may be served from a replica, and its
	// cost may grow with the number of the tenant's records.
	List(ctx context.Context, tenant string, state State, limit int) ([]Record, error)
}

// Withdrawer is an optional capability of a [Store]: taking back a claim whose
// grant its holder never heard of. A Claim whose reply is lost (a timeout, a
// connection reset while the server was writing) may have written a claim that
// nobody will run: the caller saw an error and did not enter the body. Left
// alone, that claim runs out and the key's next call is told its holder was
// lost, although nothing ran. A holder that reads such a claim back — its own
// name and call, at a revision none of its leases was granted for — withdraws
// it and the key is free at once. Callers probe for it with a type assertion;
// the stores in this module all implement it.
type Withdrawer interface {
	// Withdraw deletes the claim seen, as Release would, if the record is still
	// exactly that claim: in StateClaimed, at seen.Revision, held by holder.
	// Whether its lease has run out does not matter, so the caller must know
	// that no body runs under it. It returns ErrNotHolder if the record changed
	// since seen was read (another revision or state, another holder),
	// ErrNotFound if it is gone, and ErrInvalid for a malformed seen or a seen
	// that is not a claim held by holder (see [ValidateWithdraw]).
	Withdraw(ctx context.Context, seen Record, holder string) error
}

// Valid reports whether s is one of StateClaimed, StateCompleted and
// StateIndeterminate.
func (s State) Valid() bool {
	switch s {
	case StateClaimed, StateCompleted, StateIndeterminate:
		return true
	}
	return false
}

// CompareAge orders records as [Lister.List] returns them: by UpdatedAt, oldest
// first, then by Key. It suits slices.SortFunc.
func CompareAge(a, b Record) int {
	if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}
