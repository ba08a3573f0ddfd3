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

	"github.com/tesserix/toolexec/internal/app/console"
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

// TestLockout: after its budget of wrong tokens an address's wrong tokens are
// refused 429 until its lock-out ends, and the next one doubles it; the right
// token still gets in from the address meanwhile, and leaves its record alone.
func TestLockout(t *testing.T) {
	f := newFixture(t)
	if got := f.spend(t, home); got != console.FirstLockout {
		t.Fatalf("the first lock-out: %v, want %v", got, console.FirstLockout)
	}
	f.clock.advance(time.Second)
	if got := retryAfter(t, f.login(home, "guess", "")); got != console.FirstLockout-time.Second {
		t.Errorf("a wrong token while locked out: Retry-After %v, want the rest of the lock-out", got)
	}
	admitted(t, f.login(home, token, "alice"))
	f.clock.advance(console.FirstLockout - time.Second)
	if got := retryAfter(t, f.login(home, "guess", "")); got != 2*console.FirstLockout {
		t.Fatalf("the wrong token after the lock-out: Retry-After %v, want %v", got, 2*console.FirstLockout)
	}
	admitted(t, f.login(home, token, "alice"))
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

// TestLockoutIsPerAddress: an address's lock-out holds for the wrong tokens
// of its IP whatever the port (an IPv6 /64 counts as one), and for no other
// address; the right token gets in from all of them.
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
			resp := f.login(tt.other, "guess", "")
			if tt.shared {
				retryAfter(t, resp)
			} else {
				wrong(t, resp)
			}
			admitted(t, f.login(tt.other, token, "alice"))
		})
	}
}

// TestForwardedForIsIgnored: a locked-out address cannot pass for another by
// naming it in X-Forwarded-For or X-Real-IP.
func TestForwardedForIsIgnored(t *testing.T) {
	f := newFixture(t)
	f.spend(t, home)
	r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("token=guess"))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set("X-Forwarded-For", "198.51.100.7")
	r.Header.Set("X-Real-IP", "198.51.100.7")
	retryAfter(t, f.send(home, r))
}

// TestGlobalBudget: wrong tokens from many addresses together spend a budget
// they share; while it is spent, an address's first wrong token locks it out
// as if its own budget were spent, and the right token still gets in from
// anywhere; the budget refills with time.
func TestGlobalBudget(t *testing.T) {
	f := newFixture(t)
	for i := range console.GlobalBurst {
		wrong(t, f.login(fmt.Sprintf("198.51.100.%d:1", i), "guess", ""))
	}
	for i := range 10 {
		remote := fmt.Sprintf("203.0.113.%d:1", i)
		if got := retryAfter(t, f.login(remote, "guess", "")); got != console.FirstLockout {
			t.Fatalf("the first wrong token of %s with the global budget spent: Retry-After %v, want the lock-out %v", remote, got, console.FirstLockout)
		}
		retryAfter(t, f.bearer(remote, "guess"))
	}
	admitted(t, f.login("203.0.113.100:1", token, "alice"))
	admitted(t, f.login("198.51.100.0:1", token, "alice"))
	f.clock.advance(time.Duration(float64(time.Second) / console.GlobalRate))
	wrong(t, f.login("203.0.113.200:1", "guess", ""))
	if n, want := f.c.ThrottledAddresses(), console.GlobalBurst+10+1; n != want {
		t.Errorf("%d addresses remembered, want %d: every wrong token is counted", n, want)
	}
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
// already open, the right bearer token and the right sign-in still get in
// from the locked-out address.
func TestBearerIsThrottled(t *testing.T) {
	f := newFixture(t)
	id := f.signedIn(t, "alice")
	for range console.FailureBudget - 1 {
		if resp := f.bearer(home, "guess"); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("a wrong bearer token: %d", resp.StatusCode)
		}
	}
	lock := retryAfter(t, f.bearer(home, "guess"))
	if resp := f.bearer(home, token); resp.StatusCode != http.StatusOK {
		t.Fatalf("the right bearer token from the locked-out address: %d", resp.StatusCode)
	}
	admitted(t, f.login(home, token, "alice"))
	if !f.opens(t, id) {
		t.Fatal("the open session was locked out with its address")
	}
	retryAfter(t, f.bearer(home, "guess"))
	f.clock.advance(lock)
	if got := retryAfter(t, f.bearer(home, "guess")); got != 2*lock {
		t.Fatalf("the wrong bearer token after the lock-out: Retry-After %v, want %v", got, 2*lock)
	}
}

// rightTokens are the ways a right token is presented, each with the check
// that it got in: a sign-in with the shared token or an operator's, and a
// bearer token of either.
var rightTokens = []struct {
	name  string
	send  func(f *fixture, remote string) *http.Response
	letIn func(t *testing.T, resp *http.Response)
}{
	{"sign-in, shared token", func(f *fixture, remote string) *http.Response { return f.login(remote, token, "alice") }, admitted},
	{"sign-in, operator", func(f *fixture, remote string) *http.Response { return f.login(remote, adaToken, "") }, admitted},
	{"bearer, shared token", func(f *fixture, remote string) *http.Response { return f.bearer(remote, token) }, served},
	{"bearer, operator", func(f *fixture, remote string) *http.Response { return f.bearer(remote, adaToken) }, served},
}

// served reports that a bearer token was let in.
func served(t *testing.T, resp *http.Response) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the right bearer token: %d, want 200", resp.StatusCode)
	}
}

// flooder returns the remote address of the flood's i-th guesser: a distinct
// IPv4 address for each of the first 2^24, with a port of its own.
func flooder(i int) string {
	return fmt.Sprintf("10.%d.%d.%d:%d", i>>16&0xff, i>>8&0xff, i&0xff, 1024+i%50000)
}

// flood sends tries wrong tokens from each of n addresses, signing in and as
// bearer tokens in turn, all at the same instant, and fails the test if one
// gets in.
func (f *fixture) flood(t *testing.T, n, tries int) {
	t.Helper()
	for i := range n {
		for j := range tries {
			var resp *http.Response
			if j%2 == 0 {
				resp = f.login(flooder(i), "guess", "")
			} else {
				resp = f.bearer(flooder(i), "guess")
			}
			if resp.StatusCode == http.StatusOK || len(resp.Cookies()) != 0 {
				t.Fatalf("a wrong token from %s got in: %d", flooder(i), resp.StatusCode)
			}
		}
	}
}

// TestRightTokenThroughAFlood: wrong tokens from many addresses at once lock
// each of them out and spend the global budget, and the right token still
// gets in, from fresh addresses (IPv4 and IPv6) and from the flood's own.
func TestRightTokenThroughAFlood(t *testing.T) {
	for _, rt := range rightTokens {
		t.Run(rt.name, func(t *testing.T) {
			f := newFixture(t, withOperators(t))
			f.flood(t, 60, console.FailureBudget+1)
			retryAfter(t, f.login("203.0.113.1:1", "guess", ""))
			for _, remote := range []string{"203.0.113.2:1", "[2001:db8:ffff::1]:1", flooder(7)} {
				rt.letIn(t, rt.send(f, remote))
			}
		})
	}
}

// TestRightTokenFromALockedOutAddress: an address locked out by its own wrong
// tokens still gets in with the right one, which is not counted: its next
// wrong token is refused as before.
func TestRightTokenFromALockedOutAddress(t *testing.T) {
	for _, rt := range rightTokens {
		t.Run(rt.name, func(t *testing.T) {
			f := newFixture(t, withOperators(t))
			lock := f.spend(t, home)
			rt.letIn(t, rt.send(f, home))
			if got := retryAfter(t, f.bearer(home, "guess")); got != lock {
				t.Errorf("a wrong token after the right one: Retry-After %v, want the lock-out %v", got, lock)
			}
		})
	}
}

// TestFloodIsBounded: wrong tokens from 100k addresses at once are all
// counted, yet the throttle remembers no more addresses than its cap; the
// latest are still locked out and the right token still gets in.
func TestFloodIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("100k requests")
	}
	f := newFixture(t)
	const n = 100_000
	for i := range n {
		if resp := f.bearer(flooder(i), "guess"); resp.StatusCode == http.StatusOK {
			t.Fatalf("a wrong token from %s got in", flooder(i))
		}
		if i%1000 == 999 {
			if got := f.c.ThrottledAddresses(); got > console.MaxAddresses {
				t.Fatalf("%d addresses remembered after %d, want at most %d", got, i+1, console.MaxAddresses)
			}
		}
	}
	if got := f.c.ThrottledAddresses(); got != console.MaxAddresses {
		t.Errorf("%d addresses remembered after the flood, want the cap %d", got, console.MaxAddresses)
	}
	retryAfter(t, f.bearer(flooder(n-1), "guess"))
	admitted(t, f.login("203.0.113.1:1", token, "alice"))
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
