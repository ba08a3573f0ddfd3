package console_test

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/app/console"
)

const sessionCookie = "toolexec_console"

// login posts a sign-in form from remote.
func (f *fixture) login(remote, tok, operator string) *http.Response {
	r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {tok}, "operator": {operator}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return f.send(remote, r)
}

// sessionOf returns the session cookie a response sets, or fails the test.
func sessionOf(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, ck := range resp.Cookies() {
		if ck.Name == sessionCookie {
			return ck
		}
	}
	t.Fatalf("no session cookie in a %d answer: %v", resp.StatusCode, resp.Header.Values("Set-Cookie"))
	return nil
}

// admitted reports that a sign-in was let in.
func admitted(t *testing.T, resp *http.Response) {
	t.Helper()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("the right token: %d to %q, want the console", resp.StatusCode, resp.Header.Get("Location"))
	}
	sessionOf(t, resp)
}

// signedIn signs in from home as operator and returns the session id.
func (f *fixture) signedIn(t *testing.T, operator string) string {
	t.Helper()
	resp := f.login(home, token, operator)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("sign-in: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return sessionOf(t, resp).Value
}

// with sends method path with the session cookie id (none if empty). The
// request's context is already done, so that the event stream, let in,
// answers and ends at once.
func (f *fixture) with(id, method, path string) *http.Response {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequestWithContext(ctx, method, path, nil)
	if id != "" {
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
	}
	return f.send(home, r)
}

// opens reports whether the session cookie id opens the console: the page,
// the feed and the resolve action. It fails the test if they disagree.
func (f *fixture) opens(t *testing.T, id string) bool {
	t.Helper()
	page := f.with(id, http.MethodGet, "/?tenant=acme")
	feed := f.with(id, http.MethodGet, "/events")
	resolve := f.with(id, http.MethodPost, "/resolve")
	switch {
	case page.StatusCode == http.StatusOK && feed.StatusCode == http.StatusOK && resolve.StatusCode == http.StatusSeeOther:
		return true // the resolve form is empty: let in, then sent back with the operator's refusal
	case page.StatusCode == http.StatusSeeOther && page.Header.Get("Location") == "/login" &&
		feed.StatusCode == http.StatusUnauthorized && resolve.StatusCode == http.StatusUnauthorized:
		return false
	}
	t.Fatalf("cookie %q: page %d, feed %d, resolve %d", id, page.StatusCode, feed.StatusCode, resolve.StatusCode)
	return false
}

// TestSignOutEndsTheSession: a cookie copied before sign-out opens nothing
// after it, and the next sign-in gets another id.
func TestSignOutEndsTheSession(t *testing.T) {
	f := newFixture(t)
	stolen := f.signedIn(t, "alice")
	if !f.opens(t, stolen) {
		t.Fatal("a fresh session does not open the console")
	}
	out := f.with(stolen, http.MethodPost, "/logout")
	if out.StatusCode != http.StatusSeeOther || out.Header.Get("Location") != "/login" {
		t.Fatalf("sign-out: %d to %q", out.StatusCode, out.Header.Get("Location"))
	}
	if ck := sessionOf(t, out); ck.Value != "" || ck.MaxAge >= 0 {
		t.Errorf("sign-out leaves the cookie %+v", ck)
	}
	if f.opens(t, stolen) {
		t.Fatal("the cookie still opens the console after sign-out")
	}
	if f.c.Sessions() != 0 {
		t.Errorf("%d sessions kept after the only one signed out", f.c.Sessions())
	}
	again := f.signedIn(t, "alice")
	if again == stolen {
		t.Fatal("signing in again issued the signed-out id")
	}
	if !f.opens(t, again) || f.opens(t, stolen) {
		t.Fatal("after signing in again: the new id must open the console, the old one not")
	}
}

// TestSignInAgainEndsTheOldSession: a browser that signs in again while
// signed in holds one live session, not two.
func TestSignInAgainEndsTheOldSession(t *testing.T) {
	f := newFixture(t)
	old := f.signedIn(t, "alice")
	r := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader(url.Values{"token": {token}, "operator": {"bob"}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.AddCookie(&http.Cookie{Name: sessionCookie, Value: old})
	resp := f.send(home, r)
	admitted(t, resp)
	if f.opens(t, old) || !f.opens(t, sessionOf(t, resp).Value) || f.c.Sessions() != 1 {
		t.Fatalf("after signing in again: the old session opens %v, %d kept; want only the new one", f.opens(t, old), f.c.Sessions())
	}
}

// oldSession is the cookie value the console used to give every browser: an
// HMAC of the token.
func oldSession() string {
	mac := hmac.New(sha256.New, []byte(token))
	mac.Write([]byte("toolexec console session"))
	return hex.EncodeToString(mac.Sum(nil))
}

var base64url = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// TestSessionIDs: each sign-in gets a random id of its own; nothing but a
// live id opens the console.
func TestSessionIDs(t *testing.T) {
	f := newFixture(t)
	a, b := f.signedIn(t, "alice"), f.signedIn(t, "bob")
	if a == b {
		t.Fatal("two sign-ins share a session id")
	}
	for _, id := range []string{a, b} {
		if len(id) < 22 || !base64url.MatchString(id) {
			t.Fatalf("session id %q: want base64url of at least 128 bits", id)
		}
		if strings.Contains(id, token) {
			t.Fatalf("session id %q holds the token", id)
		}
	}
	other := a[:len(a)-1] + "A" // a different id of the same length and alphabet
	if other == a {
		other = a[:len(a)-1] + "B"
	}
	for _, tt := range []struct {
		name string
		id   string
	}{
		{"never issued", strings.Repeat("A", len(a))},
		{"one character off", other},
		{"empty", ""},
		{"too short", a[:len(a)-1]},
		{"too long", a + "A"},
		{"twice", a + a},
		{"the old HMAC of the token", oldSession()},
		{"the token", token},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if f.opens(t, tt.id) {
				t.Errorf("cookie %q opens the console", tt.id)
			}
		})
	}
	if !f.opens(t, a) || !f.opens(t, b) {
		t.Fatal("the issued ids stopped working")
	}
}

// TestSessionCookie: the cookie is HttpOnly, SameSite=Strict, for the whole
// console, Secure over TLS; no other cookie is set.
func TestSessionCookie(t *testing.T) {
	f := newFixture(t)
	for _, tt := range []struct {
		name       string
		target     string
		wantSecure bool
	}{
		{"plain", "http://console.test/login", false},
		{"TLS", "https://console.test/login", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, tt.target, strings.NewReader(url.Values{"token": {token}, "operator": {"alice"}}.Encode()))
			r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			resp := f.send(home, r)
			if n := len(resp.Cookies()); n != 1 {
				t.Fatalf("sign-in sets %d cookies, want 1: %v", n, resp.Header.Values("Set-Cookie"))
			}
			ck := sessionOf(t, resp)
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/" || ck.Secure != tt.wantSecure {
				t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/, Secure=%v", ck, tt.wantSecure)
			}
		})
	}
}

// TestSessionExpiry: a session ends after SessionIdle without a request, and
// SessionLifetime after its sign-in however busy.
func TestSessionExpiry(t *testing.T) {
	const idle, lifetime = 10 * time.Minute, time.Hour
	edit := func(c *console.Config) { c.SessionIdle, c.SessionLifetime = idle, lifetime }
	t.Run("idle", func(t *testing.T) {
		f := newFixture(t, edit)
		id := f.signedIn(t, "alice")
		f.clock.advance(idle - time.Second)
		if !f.opens(t, id) {
			t.Fatal("the session ended before its idle timeout")
		}
		f.clock.advance(idle - time.Second) // from the last request: still within
		if !f.opens(t, id) {
			t.Fatal("a request did not keep the session alive")
		}
		f.clock.advance(idle)
		if f.opens(t, id) {
			t.Fatal("the session outlived its idle timeout")
		}
	})
	t.Run("lifetime", func(t *testing.T) {
		f := newFixture(t, edit)
		signIn := f.clock.now()
		ck := sessionOf(t, f.login(home, token, "alice"))
		// The browser drops the cookie when the server ends the session: the
		// cookie's own lifetime is the session's.
		if ck.MaxAge != int(lifetime/time.Second) || !ck.Expires.Equal(signIn.Add(lifetime)) {
			t.Fatalf("session cookie Max-Age %d, Expires %v: want %d and %v", ck.MaxAge, ck.Expires, int(lifetime/time.Second), signIn.Add(lifetime))
		}
		id := ck.Value
		for used := time.Duration(0); used+idle/2 < lifetime; used += idle / 2 {
			f.clock.advance(idle / 2)
			if !f.opens(t, id) {
				t.Fatalf("a busy session ended %v after sign-in", used+idle/2)
			}
		}
		f.clock.advance(idle / 2)
		if f.opens(t, id) {
			t.Fatal("a busy session outlived its lifetime")
		}
	})
}

// TestSessionsAreBounded: beyond MaxSessions a sign-in ends the oldest
// session, and ended sessions are swept rather than kept.
func TestSessionsAreBounded(t *testing.T) {
	f := newFixture(t, func(c *console.Config) { c.MaxSessions = 3 })
	var ids []string
	for _, name := range []string{"alice", "bob", "carol", "dave"} {
		ids = append(ids, f.signedIn(t, name))
		f.clock.advance(time.Second)
	}
	if f.opens(t, ids[0]) {
		t.Error("the oldest session survived a sign-in beyond MaxSessions")
	}
	for _, id := range ids[1:] {
		if !f.opens(t, id) {
			t.Errorf("session %q ended, but it was not the oldest", id)
		}
	}
	if n := f.c.Sessions(); n != 3 {
		t.Fatalf("%d sessions kept, want 3", n)
	}
	f.clock.advance(console.DefaultSessionIdle)
	f.signedIn(t, "erin")
	if n := f.c.Sessions(); n != 1 {
		t.Fatalf("%d sessions kept after the others expired and one signed in, want 1", n)
	}
}

// TestOperatorComesFromTheSession: the audit name is the one given at this
// session's sign-in with the shared token, marked unverified; a cookie cannot
// change it.
func TestOperatorComesFromTheSession(t *testing.T) {
	f := newFixture(t)
	alice, nameless := f.signedIn(t, "alice"), f.signedIn(t, "<script>")
	for _, tt := range []struct {
		id   string
		want string
	}{
		{alice, "alice" + console.Unverified},
		{nameless, console.DefaultOperator + console.Unverified},
	} {
		r := httptest.NewRequest(http.MethodPost, "/resolve",
			strings.NewReader(url.Values{"tenant": {"acme"}, "key": {key1}, "action": {"release"}, "confirm": {"release"}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.AddCookie(&http.Cookie{Name: sessionCookie, Value: tt.id})
		r.AddCookie(&http.Cookie{Name: "toolexec_console_operator", Value: "mallory"})
		if resp := f.send(home, r); resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST /resolve: %d", resp.StatusCode)
		}
		got := f.op.resolutions()
		if last := got[len(got)-1]; last.Operator != tt.want || last.Action != events.ActionRelease {
			t.Errorf("resolution %+v: want operator %q", last, tt.want)
		}
	}
}

// TestStreamEndsWithItsSession: a browser's live feed stops when its session
// is signed out, instead of carrying on for whoever holds the connection.
func TestStreamEndsWithItsSession(t *testing.T) {
	f := newFixture(t)
	id := f.signedIn(t, "alice")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/events", nil)
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: id})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %d", resp.StatusCode)
	}
	feed := &sse{r: bufio.NewReader(resp.Body)}
	f.w.send(t, events.Answer{Kind: events.KindDeduplicated, Tenant: "acme", Tool: "book", CallID: "call_1", Key: key1})
	if id, _ := feed.next(t); id != "1" {
		t.Fatalf("first event %s, want 1", id)
	}
	f.with(id, http.MethodPost, "/logout")
	f.w.send(t, events.Answer{Kind: events.KindDeduplicated, Tenant: "acme", Tool: "book", CallID: "call_2", Key: key1})
	ended := make(chan string, 1)
	go func() {
		rest, _ := io.ReadAll(feed.r)
		ended <- string(rest)
	}()
	select {
	case rest := <-ended:
		if strings.Contains(rest, "call_2") {
			t.Fatalf("the stream went on after sign-out: %q", rest)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream outlived its session")
	}
}
