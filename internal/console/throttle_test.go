package console_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/console"
)

// retryAfter returns a 429's Retry-After, failing the test on another answer.
func retryAfter(t *testing.T, resp *http.Response) time.Duration {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("answer %d, want 429", resp.StatusCode)
	}
	if len(resp.Cookies()) != 0 {
		t.Fatalf("a refused sign-in set %v", resp.Header.Values("Set-Cookie"))
	}
	s, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || s < 1 {
		t.Fatalf("Retry-After %q", resp.Header.Get("Retry-After"))
	}
	return time.Duration(s) * time.Second
}

// wrong reports that a sign-in was refused as a plain wrong token.
func wrong(t *testing.T, resp *http.Response) {
	t.Helper()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?failed" {
		t.Fatalf("a wrong token: %d to %q, want the sign-in page saying so", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// spend sends wrong tokens from remote until its budget is spent, and returns
// the lock-out the last one started.
func (f *fixture) spend(t *testing.T, remote string) time.Duration {
	t.Helper()
	for range console.FailureBudget - 1 {
		wrong(t, f.login(remote, "guess", ""))
	}
	return retryAfter(t, f.login(remote, "guess", ""))
}

// TestLockout: after its budget of wrong tokens an address is locked out, and
// while it is not even the right token is checked; then the right token works
// and clears the address's record.
func TestLockout(t *testing.T) {
	f := newFixture(t)
	if got := f.spend(t, home); got != console.FirstLockout {
		t.Fatalf("the first lock-out: %v, want %v", got, console.FirstLockout)
	}
	resp := f.login(home, token, "alice")
	if got := retryAfter(t, resp); got != console.FirstLockout {
		t.Errorf("the right token while locked out: Retry-After %v, want %v", got, console.FirstLockout)
	}
	f.clock.advance(console.FirstLockout - time.Second)
	retryAfter(t, f.login(home, token, "alice"))
	f.clock.advance(time.Second)
	admitted(t, f.login(home, token, "alice"))
	// Signing in cleared the record: a whole budget again.
	if got := f.spend(t, home); got != console.FirstLockout {
		t.Fatalf("the lock-out after a sign-in: %v, want the first one again", got)
	}
}

// TestLockoutGrows: each wrong token after the budget doubles the lock-out,
// up to MaxLockout; a quiet period clears the record.
func TestLockoutGrows(t *testing.T) {
	f := newFixture(t)
	want := f.spend(t, home)
	for range 12 {
		f.clock.advance(want)
		want = min(2*want, console.MaxLockout)
		if got := retryAfter(t, f.login(home, "guess", "")); got != want {
			t.Fatalf("lock-out %v, want %v", got, want)
		}
	}
	if want != console.MaxLockout {
		t.Fatalf("the lock-out stopped growing at %v before the cap %v", want, console.MaxLockout)
	}
	f.clock.advance(console.QuietPeriod)
	for range console.FailureBudget - 1 {
		wrong(t, f.login(home, "guess", ""))
	}
	admitted(t, f.login(home, token, "alice"))
}

// TestLockoutIsPerAddress: an address's lock-out holds for its IP whatever
// the port or the headers it sends (an IPv6 /64 counts as one), and for no
// other address.
func TestLockoutIsPerAddress(t *testing.T) {
	for _, tt := range []struct {
		locked, other string
		shared        bool
	}{
		{"192.0.2.1:5000", "192.0.2.2:5000", false},
		{"192.0.2.1:5000", "192.0.2.1:6000", true},
		{"192.0.2.1:5000", "[::ffff:192.0.2.1]:6000", true},
		{"[2001:db8::1]:5000", "[2001:db8::2]:5000", true},
		{"[2001:db8::1]:5000", "[2001:db8:0:1::1]:5000", false},
		{"[2001:db8::1]:5000", "192.0.2.1:5000", false},
	} {
		t.Run(tt.locked+" "+tt.other, func(t *testing.T) {
			f := newFixture(t)
			f.spend(t, tt.locked)
			resp := f.login(tt.other, token, "alice")
			if tt.shared {
				retryAfter(t, resp)
			} else {
				admitted(t, resp)
			}
		})
	}
}

// TestForwardedForIsIgnored: a locked-out address cannot pass for another by
// naming it in X-Forwarded-For or X-Real-IP.
func TestForwardedForIsIgnored(t *testing.T) {
	f := newFixture(t)
	f.spend(t, home)
	r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("token="+token))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	r.Header.Set("X-Real-IP", "198.51.100.7")
	retryAfter(t, f.send(home, r))
}

// TestGlobalBudget: many addresses guessing together spend a budget they
// share; while it is spent, the right token from a fresh address is refused
// too; it refills with time.
func TestGlobalBudget(t *testing.T) {
	f := newFixture(t)
	for i := range console.GlobalBurst {
		wrong(t, f.login(fmt.Sprintf("198.51.100.%d:1", i), "guess", ""))
	}
	resp := f.login("203.0.113.1:1", token, "alice")
	wait := retryAfter(t, resp)
	if want := time.Duration(float64(time.Second) / console.GlobalRate); wait > want+time.Second {
		t.Errorf("Retry-After %v, want about %v", wait, want)
	}
	retryAfter(t, f.login("203.0.113.2:1", "guess", ""))
	if n := f.c.ThrottledAddresses(); n != console.GlobalBurst {
		t.Errorf("%d addresses remembered, want %d: tokens refused unchecked are not counted", n, console.GlobalBurst)
	}
	f.clock.advance(wait)
	admitted(t, f.login("203.0.113.1:1", token, "alice"))
}

// TestThrottleIsBounded: the addresses remembered stay within the cap however
// many send wrong tokens, and are forgotten after the quiet period.
func TestThrottleIsBounded(t *testing.T) {
	f := newFixture(t)
	const most = 16
	f.c.LimitAddresses(most)
	for i := range 1000 {
		f.clock.advance(time.Second) // refills the global budget
		wrong(t, f.login(fmt.Sprintf("10.%d.%d.1:1", i/256, i%256), "guess", ""))
		if n := f.c.ThrottledAddresses(); n > most {
			t.Fatalf("%d addresses remembered after %d, want at most %d", n, i+1, most)
		}
	}
	// The latest address is still counted: its budget is partly spent.
	latest := "10.3.231.1:1"
	for range console.FailureBudget - 2 {
		wrong(t, f.login(latest, "guess", ""))
	}
	retryAfter(t, f.login(latest, "guess", ""))
	f.clock.advance(console.QuietPeriod)
	wrong(t, f.login("10.200.0.1:1", "guess", ""))
	if n := f.c.ThrottledAddresses(); n != 1 {
		t.Fatalf("%d addresses remembered after the quiet period, want 1", n)
	}
}

// bearer sends GET /?tenant=acme with a bearer token from remote.
func (f *fixture) bearer(remote, tok string) *http.Response {
	r := httptest.NewRequest(http.MethodGet, "/?tenant=acme", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return f.send(remote, r)
}

// TestBearerIsThrottled: wrong bearer tokens spend the same budget as
// sign-ins, so that a script cannot guess where a browser may not; a session
// already open is not locked out with its address.
func TestBearerIsThrottled(t *testing.T) {
	f := newFixture(t)
	id := f.signedIn(t, "alice")
	for range console.FailureBudget - 1 {
		if resp := f.bearer(home, "guess"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("a wrong bearer token: %d", resp.StatusCode)
		}
	}
	lock := retryAfter(t, f.bearer(home, "guess"))
	retryAfter(t, f.bearer(home, token))
	retryAfter(t, f.login(home, token, "alice"))
	if !f.opens(t, id) {
		t.Fatal("the open session was locked out with its address")
	}
	f.clock.advance(lock)
	if resp := f.bearer(home, token); resp.StatusCode != http.StatusOK {
		t.Fatalf("the right bearer token after the lock-out: %d", resp.StatusCode)
	}
}

// syncBuffer is a log destination the console may write from any goroutine.
type syncBuffer struct {
	mu  sync.Mutex // protects buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

// TestRefusalsAreLoggedSparingly: a flood of wrong tokens from an address
// logs its first one and its lock-outs, at WARN with the address; a flood from
// everywhere logs the spent global budget once.
func TestRefusalsAreLoggedSparingly(t *testing.T) {
	var logs syncBuffer
	f := newFixture(t, func(c *console.Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	for range 100 {
		f.login(home, "guess", "")
	}
	f.clock.advance(console.FirstLockout)
	for range 100 {
		f.login(home, "guess", "")
	}
	for i := range 2 * console.GlobalBurst {
		f.login(fmt.Sprintf("198.51.100.%d:1", i), "guess", "")
	}
	var first, locked, global int
	for _, line := range logs.lines() {
		if !strings.Contains(line, "level=WARN") {
			t.Errorf("log line not at WARN: %s", line)
		}
		switch {
		case strings.Contains(line, "a wrong token"):
			first++
		case strings.Contains(line, "locked out") && strings.Contains(line, "remote="+home):
			locked++
		case strings.Contains(line, "all addresses"):
			global++
		default:
			t.Errorf("unexpected log line: %s", line)
		}
	}
	// The other addresses find the budget one short of full: home's sixth
	// wrong token, after the refill, spent one.
	if wantFirst := 1 + console.GlobalBurst - 1; first != wantFirst || locked != 2 || global != 1 {
		t.Errorf("%d first-wrong, %d lock-out and %d global lines; want %d, 2 and 1:\n%s",
			first, locked, global, wantFirst, strings.Join(logs.lines(), "\n"))
	}
}
