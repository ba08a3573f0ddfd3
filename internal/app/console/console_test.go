package console_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/app/console"
	"github.com/tesserix/toolexec/kvstore"
)

const token = "s3cret-console-token-of-a-good-length"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeOperator lists canned records and remembers resolutions.
type fakeOperator struct {
	mu       sync.Mutex // protects the fields below
	records  []*admin.RecordInfo
	resolved []admin.ResolveRequest
	err      error
}

func (f *fakeOperator) List(_ context.Context, req admin.ListRequest) (*admin.ListResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*admin.RecordInfo
	for _, r := range f.records {
		if r.Tenant == req.Tenant {
			out = append(out, r)
		}
	}
	return &admin.ListResponse{Records: out, Now: time.Now()}, nil
}

func (f *fakeOperator) resolutions() []admin.ResolveRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]admin.ResolveRequest(nil), f.resolved...)
}

func (f *fakeOperator) failWith(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeOperator) Resolve(_ context.Context, req admin.ResolveRequest) (*admin.RecordInfo, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resolved = append(f.resolved, req)
	if f.err != nil {
		return nil, f.err
	}
	return &admin.RecordInfo{Tenant: req.Tenant, Key: req.Key, State: kvstore.StateCompleted, Outcome: req.Outcome}, nil
}

// fakeWatcher hands out one channel per filter.
type fakeWatcher struct {
	mu    sync.Mutex // protects chans
	chans map[string]chan events.Answer
}

func (f *fakeWatcher) Watch(_ context.Context, filter string, _ ...toolexec.WatchOption) (<-chan events.Answer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.chans == nil {
		f.chans = map[string]chan events.Answer{}
	}
	ch := make(chan events.Answer, 16)
	f.chans[filter] = ch
	return ch, nil
}

func (f *fakeWatcher) send(t *testing.T, a events.Answer) {
	t.Helper()
	f.mu.Lock()
	ch := f.chans[wire.KindSubjects(a.Kind)]
	f.mu.Unlock()
	if ch == nil {
		t.Fatalf("nobody watches %s events", a.Kind)
	}
	ch <- a
}

var key1 = strings.Repeat("ab", 32)

// fakeClock is the console's clock in tests: it moves when told to.
type fakeClock struct {
	mu sync.Mutex // protects t
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	op      *fakeOperator
	w       *fakeWatcher
	c       *console.Console
	clock   *fakeClock
	handler http.Handler // c.Handler(), for requests from chosen remote addresses
	srv     *httptest.Server
}

// newFixture starts a console on a fake clock, its Config changed by edits,
// behind a test server.
func newFixture(t *testing.T, edits ...func(*console.Config)) *fixture {
	t.Helper()
	updated := time.Now().Add(-3*time.Minute - 12*time.Second)
	op := &fakeOperator{records: []*admin.RecordInfo{{
		Tenant: "acme", Key: key1, State: kvstore.StateIndeterminate, Reason: "body_failed", BodyEntered: true,
		Tool: "book", RunID: "run_1", CallID: "call_9", UpdatedAt: &updated,
	}}}
	w := &fakeWatcher{}
	cfg := console.Config{Token: token, Operator: op, Watcher: w, Logger: quiet}
	for _, edit := range edits {
		edit(&cfg)
	}
	c, err := console.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	c.SetClock(clock.now)
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h := c.Handler()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		cancel()
		c.Wait()
	})
	return &fixture{op: op, w: w, c: c, clock: clock, handler: h, srv: srv}
}

// home is the remote address of requests sent with send.
const home = "192.0.2.10:40000"

// send serves r as if it came from remote, and returns the response.
func (f *fixture) send(remote string, r *http.Request) *http.Response {
	r.RemoteAddr = remote
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, r)
	return rec.Result()
}

// browser returns a client that keeps cookies and does not follow redirects.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (f *fixture) signIn(t *testing.T, cl *http.Client, tok, operator string) *http.Response {
	t.Helper()
	resp, err := cl.PostForm(f.srv.URL+"/login", url.Values{"token": {tok}, "operator": {operator}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func get(t *testing.T, cl *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestNewNeedsAToken(t *testing.T) {
	if _, err := console.New(console.Config{Operator: &fakeOperator{}, Watcher: &fakeWatcher{}}); !errors.Is(err, console.ErrNoToken) {
		t.Fatalf("New without a token = %v, want ErrNoToken", err)
	}
	if _, err := console.New(console.Config{Token: token}); err == nil {
		t.Fatal("New without an operator and a watcher succeeded")
	}
	short := strings.Repeat("x", console.MinTokenLength-1)
	if _, err := console.New(console.Config{Token: short, Operator: &fakeOperator{}, Watcher: &fakeWatcher{}}); err == nil ||
		!strings.Contains(err.Error(), "at least 24") {
		t.Fatalf("New with a %d-character token = %v, want a refusal", len(short), err)
	}
}

// TestSignIn: nothing but the sign-in page and the assets is served without
// the token; a wrong token is refused; the right one opens the console.
func TestSignIn(t *testing.T) {
	f := newFixture(t)
	cl := browser(t)
	if resp, _ := get(t, cl, f.srv.URL+"/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("GET / before signing in: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, path := range []string{"/events", "/?tenant=acme"} {
		resp, body := get(t, cl, f.srv.URL+path)
		if resp.StatusCode == http.StatusOK || strings.Contains(body, key1) {
			t.Errorf("GET %s before signing in: %d", path, resp.StatusCode)
		}
	}
	resp, err := cl.PostForm(f.srv.URL+"/resolve", url.Values{"tenant": {"acme"}, "key": {key1}, "action": {"release"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(f.op.resolutions()) != 0 {
		t.Fatalf("POST /resolve before signing in: %d, resolutions %v", resp.StatusCode, f.op.resolutions())
	}
	if resp, body := get(t, cl, f.srv.URL+"/static/console.js"); resp.StatusCode != http.StatusOK || !strings.Contains(body, "EventSource") {
		t.Errorf("the script is not served before signing in: %d", resp.StatusCode)
	}
	if resp := f.signIn(t, cl, "wrong", "mallory"); !strings.Contains(resp.Header.Get("Location"), "failed") {
		t.Fatalf("wrong token: redirected to %q", resp.Header.Get("Location"))
	}
	if resp, _ := get(t, cl, f.srv.URL+"/"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET / after a wrong token: %d", resp.StatusCode)
	}
	resp = f.signIn(t, cl, token, "alice")
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "toolexec_console" {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || strings.Contains(session.Value, token) {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, not the token itself", session)
	}
	resp, body := get(t, cl, f.srv.URL+"/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "alice") {
		t.Fatalf("GET / signed in: %d", resp.StatusCode)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q", csp)
	}

	// A script sends the token as a bearer token.
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/?tenant=acme", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), key1) {
		t.Errorf("bearer token: %d", resp.StatusCode)
	}
}

// TestRecordsAndResolve: a tenant's indeterminate records are listed with
// their age, tool, run, call and reason; a resolution from the page reaches
// the operator with the signed-in name and comes back as a message.
func TestRecordsAndResolve(t *testing.T) {
	f := newFixture(t)
	cl := browser(t)
	f.signIn(t, cl, token, "alice")
	_, body := get(t, cl, f.srv.URL+"/?tenant=acme")
	for _, want := range []string{`id="rec-` + key1 + `"`, "book", "run_1", "call_9", "body_failed", "3m1", `value="complete"`, `value="release"`} {
		if !strings.Contains(body, want) {
			t.Errorf("records page lacks %q", want)
		}
	}
	if _, body := get(t, cl, f.srv.URL+"/?tenant=globex"); !strings.Contains(body, "nothing of globex waits") {
		t.Error("an empty tenant does not say so")
	}
	if _, body := get(t, cl, f.srv.URL+"/?tenant=%3Cx-evil%3E"); strings.Contains(body, "<x-evil>") {
		t.Error("a tenant from the query reached the page unescaped")
	}

	resp, err := cl.PostForm(f.srv.URL+"/resolve", url.Values{"tenant": {"acme"}, "key": {key1}, "action": {"complete"}, "outcome": {"K7Q2ZD"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(loc, "done=complete") {
		t.Fatalf("POST /resolve: %d to %q", resp.StatusCode, loc)
	}
	want := admin.ResolveRequest{Tenant: "acme", Key: key1, Action: events.ActionComplete, Outcome: "K7Q2ZD", Operator: "alice" + console.Unverified}
	if got := f.op.resolutions(); len(got) != 1 || got[0] != want {
		t.Fatalf("resolutions %+v, want %+v", got, want)
	}
	if _, body := get(t, cl, f.srv.URL+loc); !strings.Contains(body, "Resolved "+key1[:12]) {
		t.Error("the page does not confirm the resolution")
	}

	f.op.failWith(&admin.Error{Code: admin.CodeNotIndeterminate, Message: "completed"})
	resp, err = cl.PostForm(f.srv.URL+"/resolve", url.Values{"tenant": {"acme"}, "key": {key1}, "action": {"release"}, "confirm": {"release"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, body := get(t, cl, f.srv.URL+resp.Header.Get("Location")); !strings.Contains(body, "no longer indeterminate") {
		t.Error("a failed resolution is not explained")
	}
	if got := f.op.resolutions(); len(got) != 2 {
		t.Fatalf("resolutions %+v, want two", got)
	} else if last := got[1]; last.Action != events.ActionRelease || last.Outcome != "" {
		t.Errorf("release sent %+v", last)
	}
}

// TestCrossOrigin: another site cannot make a signed-in browser resolve.
func TestCrossOrigin(t *testing.T) {
	f := newFixture(t)
	cl := browser(t)
	f.signIn(t, cl, token, "alice")
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/resolve",
		strings.NewReader(url.Values{"tenant": {"acme"}, "key": {key1}, "action": {"release"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(f.op.resolutions()) != 0 {
		t.Fatalf("cross-site POST: %d, resolutions %v", resp.StatusCode, f.op.resolutions())
	}
}

// sse reads Server-Sent Events from a stream.
type sse struct {
	r *bufio.Reader
}

// next returns the id and data of the next event.
func (s *sse) next(t *testing.T) (id, data string) {
	t.Helper()
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "id: "):
			id = line[4:]
		case strings.HasPrefix(line, "data: "):
			data = line[6:]
		case line == "" && data != "":
			return id, data
		}
	}
}

func openStream(t *testing.T, f *fixture, cl *http.Client, after string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/events?after="+after, nil)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /events: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sse{r: bufio.NewReader(resp.Body)}
}

// TestFeed: events from the watches reach open streams as they come, a stream
// opened later gets the ones it missed, and the page renders them escaped.
func TestFeed(t *testing.T) {
	f := newFixture(t)
	cl := browser(t)
	f.signIn(t, cl, token, "alice")
	live := openStream(t, f, cl, "0")
	f.w.send(t, events.Answer{Kind: events.KindIndeterminate, Tenant: "acme", Tool: "book", RunID: "run_1", CallID: "call_9",
		Key: key1, Reason: events.ReasonBodyFailed, BodyEntered: true})
	id, data := live.next(t)
	if id != "1" || !strings.Contains(data, `"kind":"indeterminate"`) || !strings.Contains(data, `"call_id":"call_9"`) {
		t.Fatalf("event %s: %s", id, data)
	}
	f.w.send(t, events.Answer{Kind: events.KindDeduplicated, Tenant: "acme", Tool: "book", RunID: "run_1", CallID: "call_10",
		Key: key1, Outcome: `<img src=x onerror=alert(1)>`})
	if id, data := live.next(t); id != "2" || !strings.Contains(data, "call_10") {
		t.Fatalf("event %s: %s", id, data)
	}

	late := openStream(t, f, cl, "1")
	if id, _ := late.next(t); id != "2" {
		t.Fatalf("a stream opened after event 1 starts at %s, want 2", id)
	}
	_, body := get(t, cl, f.srv.URL+"/")
	if strings.Contains(body, "<img") {
		t.Error("an outcome reached the page unescaped")
	}
	for _, want := range []string{`data-last="2"`, `data-call="call_9"`, `data-call="call_10"`, "resolve…", `href="/?tenant=acme&amp;key=` + key1} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestStreamsEndWithTheConsole: when the console's context ends, open event
// streams end too, so that shutting the server down does not wait on browsers.
func TestStreamsEndWithTheConsole(t *testing.T) {
	c, err := console.New(console.Config{Token: token, Operator: &fakeOperator{}, Watcher: &fakeWatcher{}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()
	cancel()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("stream ended with %v, want a clean end", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the event stream outlived the console")
	}
	c.Wait()
}
