package console

import (
	"container/list"
	"log/slog"
	"math"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// limits are how hard guessing the token is made.
type limits struct {
	budget     int           // wrong tokens an address may send before it is locked out
	firstLock  time.Duration // the lock-out the budget's last wrong token starts; each further one doubles it
	maxLock    time.Duration // the longest lock-out
	quiet      time.Duration // an address with no wrong token for this long starts afresh; longer than maxLock
	maxAddrs   int           // addresses remembered; beyond, the least recently wrong is forgotten
	globalRate rate.Limit    // wrong tokens a second from all addresses together
	globalMax  int           // and how many of them may come at once
}

// defaultLimits: five tries, then 2 s, 4 s, 8 s … up to 15 min between tries
// for an address; about five wrong tokens a second from everywhere together.
// doc.go and the README quote them.
var defaultLimits = limits{
	budget:     5,
	firstLock:  2 * time.Second,
	maxLock:    15 * time.Minute,
	quiet:      time.Hour,
	maxAddrs:   4096,
	globalRate: 5,
	globalMax:  25,
}

// globalWarnEvery is how often a spent global budget is logged, at most.
const globalWarnEvery = time.Minute

// throttle slows down guessing the token. Each address (an IPv4 address, or
// an IPv6 /64) has a budget of wrong tokens; once spent, the address is locked
// out for a while that doubles with each further wrong token, up to a cap, and
// while locked out no token it sends is checked, not even the right one. A
// right token, or a quiet period without wrong ones, clears the address's
// record. All addresses together also share a budget of wrong tokens a second
// (a token bucket): while it is spent no token is checked at all, so that many
// addresses cannot guess together much faster than one.
//
// Checks are serialised: a token is compared under the lock that guards the
// records, so that concurrent requests cannot all be checked before the first
// wrong one is counted. The records are bounded: beyond maxAddrs addresses the
// least recently wrong is forgotten, lock-out and all, which the global budget
// still covers.
type throttle struct {
	lim    limits
	log    *slog.Logger
	global *rate.Limiter

	mu     sync.Mutex               // protects addrs, byAge and warned, and serialises checks
	addrs  map[string]*list.Element // the *strikes element of each address in byAge
	byAge  *list.List               // *strikes, the most recent wrong token first
	warned time.Time                // when a spent global budget was last logged
}

// strikes are an address's wrong tokens.
type strikes struct {
	addr   string
	wrong  int       // since the address's record was last cleared
	last   time.Time // the latest wrong token
	locked time.Time // no token is checked before
}

func newThrottle(lim limits, log *slog.Logger) *throttle {
	return &throttle{
		lim: lim, log: log, global: rate.NewLimiter(lim.globalRate, lim.globalMax),
		addrs: map[string]*list.Element{}, byAge: list.New(),
	}
}

// addrKey is who a request's remote address is to the throttle: its IP
// address, or for IPv6 its /64, which one host commonly holds whole. A remote
// address that is not host:port is taken whole.
func addrKey(remote string) string {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return remote
	}
	a := ap.Addr().Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64) // cannot fail: 64 bits of an IPv6 address
	return p.String()
}

// verdict is what a check decided, and what to log about it.
type verdict struct {
	right bool          // the token was checked and is right
	retry time.Duration // > 0: the token was not checked, or was wrong and locked the address out; try again after
	note  note
	wrong int // the address's wrong tokens, for the log
}

// note says what a verdict is worth a log line for.
type note int

const (
	noteNone        note = iota
	noteFirstWrong       // an address's first wrong token
	noteLockedOut        // a wrong token locked an address out
	noteGlobalSpent      // the global budget is spent (logged once a globalWarnEvery)
)

// check decides whether a token from remote may be checked at now and, if so,
// checks it with right. It reports whether the token was right and, when it
// was not, how long remote must wait before a token of its is checked again
// (0 when it may try again at once). It logs an address's first wrong token,
// each lock-out, and a spent global budget, at WARN; not each refusal.
func (t *throttle) check(remote string, now time.Time, right func() bool) (bool, time.Duration) {
	v := t.judge(addrKey(remote), now, right)
	switch v.note {
	case noteFirstWrong:
		t.log.Warn("console: a wrong token was refused", "remote", remote)
	case noteLockedOut:
		t.log.Warn("console: an address is locked out after wrong tokens", "remote", remote, "wrong", v.wrong, "for", v.retry)
	case noteGlobalSpent:
		t.log.Warn("console: tokens are not checked: too many wrong ones from all addresses together", "remote", remote, "for", v.retry)
	}
	return v.right, v.retry
}

func (t *throttle) judge(addr string, now time.Time, right func() bool) verdict {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgetQuiet(now)
	var s *strikes
	if e := t.addrs[addr]; e != nil {
		s = e.Value.(*strikes)
		if now.Before(s.locked) {
			return verdict{retry: s.locked.Sub(now)}
		}
	}
	if tokens := t.global.TokensAt(now); tokens < 1 {
		return t.globalSpent(now, tokens)
	}
	if right() {
		if s != nil {
			t.forget(s)
		}
		return verdict{right: true}
	}
	t.global.AllowN(now, 1) // a token is there: checked above, under the lock
	return t.strike(addr, s, now)
}

// globalSpent is the verdict while the global budget is spent: wait until it
// holds a whole token again.
func (t *throttle) globalSpent(now time.Time, tokens float64) verdict {
	wait := time.Duration(math.Ceil((1 - tokens) / float64(t.lim.globalRate) * float64(time.Second)))
	v := verdict{retry: max(wait, time.Nanosecond)}
	if now.Sub(t.warned) >= globalWarnEvery {
		t.warned = now
		v.note = noteGlobalSpent
	}
	return v
}

// strike counts a wrong token from addr (whose strikes are s, or nil) at now,
// locking it out once its budget is spent.
func (t *throttle) strike(addr string, s *strikes, now time.Time) verdict {
	if s == nil {
		if t.byAge.Len() >= t.lim.maxAddrs {
			t.forget(t.byAge.Back().Value.(*strikes))
		}
		s = &strikes{addr: addr}
		t.addrs[addr] = t.byAge.PushFront(s)
	} else {
		t.byAge.MoveToFront(t.addrs[addr])
	}
	s.wrong++
	s.last = now
	v := verdict{wrong: s.wrong}
	if d := t.lockout(s.wrong); d > 0 {
		s.locked = now.Add(d)
		v.retry, v.note = d, noteLockedOut
	} else if s.wrong == 1 {
		v.note = noteFirstWrong
	}
	return v
}

// lockout is how long an address is locked out after its wrong-th wrong
// token: nothing within the budget, then firstLock doubling up to maxLock.
func (t *throttle) lockout(wrong int) time.Duration {
	if wrong < t.lim.budget {
		return 0
	}
	d := t.lim.firstLock
	for i := t.lim.budget; i < wrong && d < t.lim.maxLock; i++ {
		d *= 2
	}
	return min(d, t.lim.maxLock)
}

// forgetQuiet forgets the addresses with no wrong token for the quiet period.
// byAge is ordered by the latest wrong token, so they are at its back.
func (t *throttle) forgetQuiet(now time.Time) {
	for e := t.byAge.Back(); e != nil; e = t.byAge.Back() {
		s := e.Value.(*strikes)
		if now.Sub(s.last) < t.lim.quiet {
			return
		}
		t.forget(s)
	}
}

func (t *throttle) forget(s *strikes) {
	t.byAge.Remove(t.addrs[s.addr])
	delete(t.addrs, s.addr)
}
