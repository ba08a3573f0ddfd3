// Package accountcheck admits NATS requests by the account they come from.
//
// Where a request crosses a service import, nats-server adds a
// Nats-Request-Info header naming the importing account (member "acc"),
// written by the server over any header of that name the client set. A
// service exported to one account alone can so check, request by request,
// that what it serves came through that account's import: the admin service
// (package admin) and the operators' history (package bus,
// toolexec.admin.history) share one [Checker] rule.
//
// A request published inside the serving account itself crosses no import,
// and carries whatever header its publisher wrote: that account is trusted.
package accountcheck

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go"
)

// Header is the header nats-server writes on a request that crosses a service
// import, naming the account it came from.
const Header = "Nats-Request-Info"

// ErrRefused is matched by every [*RefusedError].
var ErrRefused = errors.New("request not from the admin account")

// RefusedError says that a request was refused because it did not come from
// the account a Checker admits. It matches ErrRefused.
type RefusedError struct {
	// From is the account the request's header names, "" when it names none.
	From string
	// Want is the account admitted.
	Want string
}

// Error says where the request came from, for the reply.
func (e *RefusedError) Error() string {
	if e.From == "" {
		return "the request does not say which account it comes from; it is accepted from the admin account only"
	}
	return fmt.Sprintf("the request is accepted from the admin account only, not from %q", e.From)
}

// Is matches ErrRefused.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// From returns the account h's Nats-Request-Info header names, or "" when
// there is no such header, it is not JSON (a member named twice included: the
// server writes each once), or it names none.
func From(h nats.Header) string {
	v := h.Get(Header)
	if v == "" {
		return ""
	}
	var info struct {
		Account string `json:"acc"`
	}
	if err := json.Unmarshal([]byte(v), &info); err != nil {
		return ""
	}
	return info.Account
}

// Checker admits the requests of one account, and logs the others. It is safe
// for concurrent use.
type Checker struct {
	account string
	service string
	log     *slog.Logger
	refused refusals
}

// New returns a Checker admitting requests from account only, or every request
// when account is empty (a server with one account, where no request crosses
// an import). service names what it guards in log lines ("admin",
// "history"); log receives the refusals, slog.Default() when nil.
func New(account, service string, log *slog.Logger) *Checker {
	if log == nil {
		log = slog.Default()
	}
	return &Checker{account: account, service: service, log: log}
}

// Check returns nil when a request with header h may be served: the Checker
// has no account, or h names it, exactly (names are case-sensitive).
// Otherwise it returns a *RefusedError and logs the refusal at WARN, with the
// subject the request came on: the first at once, then at most one line per
// LogEvery, counting those left unlogged.
func (c *Checker) Check(subject string, h nats.Header) error {
	if c.account == "" {
		return nil
	}
	from := From(h)
	if from == c.account {
		return nil
	}
	c.refused.log(c.log, time.Now(), c.service, subject, from, c.account)
	return &RefusedError{From: from, Want: c.account}
}

// LogEvery is the least time between two log lines about refused requests: a
// sender that keeps trying gets one line a minute, not one per request.
const LogEvery = time.Minute

// refusals logs refused requests at WARN without flooding the log: the first
// at once, then at most one line per LogEvery, with the number refused since
// the previous line.
type refusals struct {
	mu     sync.Mutex // protects last and unsaid
	last   time.Time  // when the last line was written
	unsaid int        // refusals since then not written
}

// log records one refusal at now, and writes a line if one is due.
func (r *refusals) log(log *slog.Logger, now time.Time, service, subject, from, want string) {
	r.mu.Lock()
	if !r.last.IsZero() && now.Sub(r.last) < LogEvery {
		r.unsaid++
		r.mu.Unlock()
		return
	}
	unsaid := r.unsaid
	r.last, r.unsaid = now, 0
	r.mu.Unlock()
	if from == "" {
		from = "(none)"
	}
	log.Warn(service+": request refused: not from the admin account", "subject", subject, "account", from,
		"admin_account", want, "refused_unlogged", unsaid)
}
