package console

import (
	"container/list"
	"log/slog"
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

// throttle slows down wrong tokens; it is told of them after they were
// compared, and never sees a right one. Each address (an IPv4 address, or an
// IPv6 /64) has a budget of wrong tokens; once spent, the address is locked
// out for a while that doubles with each further wrong token, up to a cap,
// and until the lock-out ends its wrong tokens are refused and not counted.
// All addresses together also share a budget of wrong tokens a second (a
// token bucket): while it is spent, an address's first wrong token locks it
// out as if its own budget were spent, so that many addresses cannot each
// spend a whole budget. A quiet period without wrong tokens clears an
// address.
//
// A right token gets in whatever the throttle holds, even from a locked-out
// address: where it comes from cannot tell its owner from a guesser (behind
// one proxy or NAT, or flooding from elsewhere), and refusing it would let any
// guesser shut the console for everyone. So a guesser who ignores the 429s has
// every guess compared, which is safe because the tokens are long (emitter
// console-token draws 256 bits) and no rate of guessing finds one; the
// lock-outs slow the wrong tokens, not the one right one.
//
// The records are bounded: beyond maxAddrs addresses the least recently
// wrong is forgotten, lock-out and all.
type throttle struct {
	lim    limits
	log    *slog.Logger
	global *rate.Limiter

	mu     sync.Mutex               // protects addrs, byAge and warned
	addrs  map[string]*list.Element // the *strikes element of each address in byAge
	byAge  *list.List               // *strikes, the most recent wrong token first
	warned time.Time                // when a spent global budget was last logged
}

// strikes are an address's wrong tokens.
type strikes struct {
	addr    string
	wrong   int       // counted since the address's record began
	charged int       // what its lock-outs go by: wrong, plus the budget it lost while the global one was spent
	last    time.Time // the latest wrong token counted
	locked  time.Time // its wrong tokens are refused before
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

// verdict is what the throttle made of a wrong token, and what to log about
// it.
type verdict struct {
	retry time.Duration // > 0: the address is locked out; its next wrong token is refused before this
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

// wrong counts a wrong token from remote at now, unless remote is locked out
// already, and returns how long remote must wait before a wrong token of its
// is counted again (0 when it may try again at once): while it waits its
// wrong tokens are refused, 429. It logs an address's first wrong token, each
// lock-out, and a spent global budget, at WARN; not each refusal.
func (t *throttle) wrong(remote string, now time.Time) time.Duration {
	v := t.judge(addrKey(remote), now)
	switch v.note {
	case noteFirstWrong:
		t.log.Warn("console: a wrong token was refused", "remote", remote)
	case noteLockedOut:
		t.log.Warn("console: an address is locked out after wrong tokens", "remote", remote, "wrong", v.wrong, "for", v.retry)
	case noteGlobalSpent:
		t.log.Warn("console: too many wrong tokens from all addresses together: each address is locked out at its first", "remote", remote, "for",
			v.retry)
	}
	return v.retry
}

func (t *throttle) judge(addr string, now time.Time) verdict {
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
	return t.strike(addr, s, now, !t.global.AllowN(now, 1))
}

// strike counts a wrong token from addr (whose strikes are s, or nil) at now,
// locking it out once its budget is spent, or at once when the global budget
// is.
func (t *throttle) strike(addr string, s *strikes, now time.Time, globalSpent bool) verdict {
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
	s.charged++
	if globalSpent {
		s.charged = max(s.charged, t.lim.budget)
	}
	s.last = now
	v := verdict{wrong: s.wrong}
	d := t.lockout(s.charged)
	if d > 0 {
		s.locked = now.Add(d)
		v.retry = d
	}
	switch {
	case globalSpent:
		if now.Sub(t.warned) >= globalWarnEvery {
			t.warned = now
			v.note = noteGlobalSpent
		}
	case d > 0:
		v.note = noteLockedOut
	case s.wrong == 1:
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
