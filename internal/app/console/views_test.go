package console_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/app/console"
	"github.com/tesserix/toolexec/internal/app/tokenfile"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
)

// The operators of the operators file the fixtures below use: ada is an
// admin, bob sees globex only.
const (
	adaToken = "ada-0123456789abcdef0123456789abcdef"
	bobToken = "bob-0123456789abcdef0123456789abcdef"
)

func operatorsFile() string {
	return "# operators\nada " + tokenfile.Hash(adaToken) + " admin\nbob " + tokenfile.Hash(bobToken) + " tenants=globex,initech\n"
}

// withOperators gives the console the operators file above, and keeps the
// shared token.
func withOperators(t *testing.T) func(*console.Config) {
	ops, err := console.ParseOperators(strings.NewReader(operatorsFile()), "operators")
	if err != nil {
		t.Fatal(err)
	}
	return func(c *console.Config) { c.Operators = ops }
}

var key2 = strings.Repeat("cd", 32)

// addGlobex gives the fixture's operator a record of globex too.
func (f *fixture) addGlobex() {
	f.op.mu.Lock()
	defer f.op.mu.Unlock()
	updated := time.Now().Add(-time.Minute)
	f.op.records = append(f.op.records, &admin.RecordInfo{
		Tenant: "globex", Key: key2, State: kvstore.StateIndeterminate, Reason: "timeout", BodyEntered: true,
		Tool: "pay", RunID: "run_g", CallID: "call_g", UpdatedAt: &updated,
	})
}

func body(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseOperators: the operators file's own rules on top of the token
// file's: hashed tokens only, a scope of admin or tenants, a name once.
func TestParseOperators(t *testing.T) {
	h := tokenfile.Hash
	for _, tc := range []struct{ name, file, err string }{
		{"ok", operatorsFile(), ""},
		{"a plain token", "ada " + adaToken + " admin\n", "must be written hashed"},
		{"no scope", "ada " + h("a") + "\n", "want"},
		{"an unknown scope", "ada " + h("a") + " root\n", `scope "root"`},
		{"a bad tenant", "ada " + h("a") + " tenants=acme,a.b\n", "tenant"},
		{"an empty tenant list", "ada " + h("a") + " tenants=\n", "tenant"},
		{"a name twice", "ada " + h("a") + " admin\nada " + h("b") + " admin\n", "on line 1 already"},
		{"a name with a space's place taken", "a/b " + h("a") + " admin\n", "operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := console.ParseOperators(strings.NewReader(tc.file), "ops")
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, console.ErrBadOperators) {
				t.Fatalf("ParseOperators: %v, want ErrBadOperators with %q", err, tc.err)
			}
		})
	}
	line, err := console.OperatorLine("carol", "carol-token", false, []string{"acme"})
	if err != nil || line != "carol "+h("carol-token")+" tenants=acme" {
		t.Fatalf("OperatorLine = %q, %v", line, err)
	}
	if _, err := console.OperatorLine("carol", "t", false, nil); err == nil {
		t.Error("OperatorLine made a line for an operator who sees nothing")
	}
	if _, err := console.OperatorLine("carol", "t", true, []string{"acme"}); err == nil {
		t.Error("OperatorLine made an admin line with tenants")
	}
}

// TestOperatorsSignIn: an operator's own token signs in as that operator,
// whatever name is typed, and the audit event names them, verified; the
// digest of a token is not the token; the shared token still signs in, its
// typed name marked unverified.
func TestOperatorsSignIn(t *testing.T) {
	f := newFixture(t, withOperators(t))
	cl := browser(t)
	if resp := f.signIn(t, cl, tokenfile.Hash(bobToken), "bob"); !strings.Contains(resp.Header.Get("Location"), "failed") {
		t.Fatalf("the digest signed in: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	f.signIn(t, cl, adaToken, "mallory")
	resp, err := cl.PostForm(f.srv.URL+"/resolve", url.Values{"tenant": {"acme"}, "key": {key1}, "action": {"complete"}, "outcome": {"X1"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := f.op.resolutions(); len(got) != 1 || got[0].Operator != "ada" {
		t.Fatalf("resolutions %+v: want one by ada", got)
	}
	shared := browser(t)
	f.signIn(t, shared, token, "carol")
	if _, page := get(t, shared, f.srv.URL+"/"); !strings.Contains(page, "carol"+console.Unverified) {
		t.Error("the shared token's name is not marked unverified")
	}
	// A script sends an operator's token as a bearer token: the same identity.
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/resolve",
		strings.NewReader(url.Values{"tenant": {"globex"}, "key": {key2}, "action": {"complete"}, "outcome": {"Y"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+bobToken)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := f.op.resolutions(); len(got) != 2 || got[1].Operator != "bob" {
		t.Fatalf("resolutions %+v: want the second by bob", got)
	}
}

// TestTenantFence: an operator who sees globex only cannot see or resolve
// acme's records, see acme's events in the page or the stream, nor open the
// view across tenants — by session or by bearer token.
func TestTenantFence(t *testing.T) {
	f := newFixture(t, withOperators(t))
	f.addGlobex()
	cl := browser(t)
	f.signIn(t, cl, bobToken, "")
	f.w.send(t, events.Answer{Kind: events.KindIndeterminate, Tenant: "acme", Tool: "book", RunID: "run_1", CallID: "call_acme", Key: key1, Reason: events.ReasonBodyFailed})
	f.w.send(t, events.Answer{Kind: events.KindIndeterminate, Tenant: "globex", Tool: "pay", RunID: "run_g", CallID: "call_g", Key: key2, Reason: events.ReasonTimeout})
	stream := openStream(t, f, cl, "0")
	if _, data := stream.next(t); !strings.Contains(data, "call_g") {
		t.Fatalf("bob's stream starts with %s, want globex's event (acme's left out)", data)
	}
	wait.Eventually(t, 10*time.Second, "globex's call on the overview", func() bool { _, b := get(t, cl, f.srv.URL+"/"); return strings.Contains(b, "call_g") })
	_, page := get(t, cl, f.srv.URL+"/")
	if strings.Contains(page, "call_acme") || strings.Contains(page, `href="/?tenant=acme"`) {
		t.Error("bob's page shows acme")
	}
	if _, page := get(t, cl, f.srv.URL+"/?tenant=acme"); strings.Contains(page, key1) || !strings.Contains(page, "you may not see tenant acme") {
		t.Error("bob's page lists acme's records, or does not say why not")
	}
	if _, page := get(t, cl, f.srv.URL+"/?tenant=globex"); !strings.Contains(page, key2) {
		t.Error("bob's page does not list globex's records")
	}
	for _, path := range []string{"/records?tenant=acme", "/records?all=", "/all", "/all?by=key&q=" + key1} {
		if resp, b := get(t, cl, f.srv.URL+path); resp.StatusCode != http.StatusForbidden || strings.Contains(b, key1) {
			t.Errorf("bob's GET %s: %d", path, resp.StatusCode)
		}
	}
	for _, form := range []url.Values{
		{"tenant": {"acme"}, "key": {key1}, "action": {"complete"}, "outcome": {"X"}},
		{"tenant": {"acme"}, "key": {key1}, "action": {"release"}, "confirm": {"release"}},
		{"tenant": {"acme"}, "key": {key1}, "action": {"release"}},
	} {
		resp, err := cl.PostForm(f.srv.URL+"/resolve", form)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("bob resolving acme's key (%v): %d", form, resp.StatusCode)
		}
	}
	req := httptest.NewRequest(http.MethodGet, "/all", nil)
	req.Header.Set("Authorization", "Bearer "+bobToken)
	if resp := f.send(home, req); resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob's bearer GET /all: %d", resp.StatusCode)
	}
	if got := f.op.resolutions(); len(got) != 0 {
		t.Fatalf("bob resolved %+v", got)
	}
}

// TestReleaseAsksFirst: a release without the confirmation changes nothing
// and answers a page that says what releasing allows; confirmed, it releases;
// cancelled, it says nothing was changed.
func TestReleaseAsksFirst(t *testing.T) {
	f := newFixture(t)
	cl := browser(t)
	f.signIn(t, cl, token, "alice")
	resp, err := cl.PostForm(f.srv.URL+"/resolve", url.Values{"tenant": {"acme"}, "key": {key1}, "action": {"release"}})
	if err != nil {
		t.Fatal(err)
	}
	page := body(t, resp)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(f.op.resolutions()) != 0 {
		t.Fatalf("an unconfirmed release: %d, resolutions %v", resp.StatusCode, f.op.resolutions())
	}
	for _, want := range []string{"Release this key?", "run again", "second effect", "call_9", "its body was entered", `name="confirm" value="release"`, "kept"} {
		if !strings.Contains(page, want) {
			t.Errorf("the confirmation page lacks %q", want)
		}
	}
	resp, err = cl.PostForm(f.srv.URL+"/resolve", url.Values{"tenant": {"acme"}, "key": {key1}, "action": {"release"}, "confirm": {"yes"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(f.op.resolutions()) != 0 {
		t.Fatal("a release confirmed with another word released")
	}
	if _, b := get(t, cl, f.srv.URL+"/?tenant=acme&key="+key1+"&kept"); !strings.Contains(b, "Not released") {
		t.Error("cancelling does not say nothing was changed")
	}
	resp, err = cl.PostForm(f.srv.URL+"/resolve", url.Values{"tenant": {"acme"}, "key": {key1}, "action": {"release"}, "confirm": {"release"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := f.op.resolutions(); len(got) != 1 || got[0].Action != events.ActionRelease || !strings.Contains(resp.Header.Get("Location"), "done=release") {
		t.Fatalf("a confirmed release: %+v to %q", got, resp.Header.Get("Location"))
	}
}

// TestFeedKinds: every kind reaches the stream and the page; ?show= filters
// the page; an indeterminate item whose key a later event resolved shows the
// resolution instead of its "resolve…" link.
func TestFeedKinds(t *testing.T) {
	f := newFixture(t)
	cl := browser(t)
	f.signIn(t, cl, token, "alice")
	stream := openStream(t, f, cl, "0")
	sent := []events.Answer{
		{Kind: events.KindCompleted, Tenant: "acme", Tool: "book", RunID: "r", CallID: "call_done", Key: key2, Outcome: "PNR1"},
		{Kind: events.KindDeduplicated, Tenant: "acme", Tool: "book", RunID: "r", CallID: "call_dup", Key: key2, Outcome: "PNR1"},
		{Kind: events.KindFailed, Tenant: "acme", Tool: "book", RunID: "r", CallID: "call_fail", Code: "tool_error", Error: "no seats"},
		{Kind: events.KindRejected, Tenant: "acme", Tool: "book", RunID: "r", CallID: "call_rej", Code: "schema_violation", Error: "missing seats"},
		{Kind: events.KindIndeterminate, Tenant: "acme", Tool: "book", RunID: "r", CallID: "call_ind", Key: key1, Reason: events.ReasonBodyFailed},
		{Kind: events.KindResolved, Tenant: "acme", Tool: "book", RunID: "r", CallID: "call_ind", Key: key1, Action: events.ActionRelease, Operator: "ada"},
	}
	for _, a := range sent {
		f.w.send(t, a)
		if _, data := stream.next(t); !strings.Contains(data, `"kind":"`+string(a.Kind)+`"`) {
			t.Fatalf("sent %s, streamed %s", a.Kind, data)
		}
	}
	// A resolution that reaches the feed before the answer it settles (each
	// kind is watched on its own) settles it all the same, by the events' times.
	key3, at := strings.Repeat("ef", 32), time.Now().UTC()
	f.w.send(t, events.Answer{Kind: events.KindResolved, Tenant: "acme", Tool: "book", RunID: "r", CallID: "call_late", Key: key3, Action: events.ActionComplete, Operator: "cy", Time: at.Add(time.Second)})
	stream.next(t) // the resolution is in the feed first
	f.w.send(t, events.Answer{Kind: events.KindIndeterminate, Tenant: "acme", Tool: "book", RunID: "r", CallID: "call_late", Key: key3, Reason: events.ReasonTimeout, Time: at})
	stream.next(t)
	_, page := get(t, cl, f.srv.URL+"/")
	for _, want := range []string{"resolved: complete by cy", "call_done", "call_dup", "tool_error: no seats", "schema_violation: missing seats", "call_ind", "resolved: release by ada"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if strings.Contains(page, `class="resolve"`) {
		t.Error("a resolved key's item still offers resolve…")
	}
	_, failed := get(t, cl, f.srv.URL+"/?show=failed&show=rejected")
	if !strings.Contains(failed, "call_fail") || !strings.Contains(failed, "call_rej") || strings.Contains(failed, `data-call="call_done"`) {
		t.Error("?show=failed&show=rejected does not show just those")
	}
}

// TestAllTenants: an admin's view lists the records of every tenant with an
// indeterminate event, and searches by key, run and call id; a malformed
// search says what is wrong.
func TestAllTenants(t *testing.T) {
	f := newFixture(t, withOperators(t))
	f.addGlobex()
	cl := browser(t)
	f.signIn(t, cl, adaToken, "")
	f.w.send(t, events.Answer{Kind: events.KindIndeterminate, Tenant: "acme", Tool: "book", RunID: "run_1", CallID: "call_9", Key: key1, Reason: events.ReasonBodyFailed})
	f.w.send(t, events.Answer{Kind: events.KindIndeterminate, Tenant: "globex", Tool: "pay", RunID: "run_g", CallID: "call_g", Key: key2, Reason: events.ReasonTimeout})
	wait.Eventually(t, 10*time.Second, "both tenants' calls on /all", func() bool {
		_, b := get(t, cl, f.srv.URL+"/all")
		return strings.Contains(b, key1) && strings.Contains(b, key2)
	})
	if _, page := get(t, cl, f.srv.URL+"/"); !strings.Contains(page, `href="/all"`) {
		t.Error("an admin's page has no link to the view across tenants")
	}
	for _, tc := range []struct{ by, q, want, not string }{
		{"key", key2, key2, key1},
		{"run", "run_1", key1, key2},
		{"call", "call_g", key2, key1},
	} {
		_, page := get(t, cl, f.srv.URL+"/all?"+url.Values{"by": {tc.by}, "q": {tc.q}}.Encode())
		if !strings.Contains(page, `id="found"`) || !strings.Contains(page, `id="rec-`+tc.want) || strings.Contains(page, `id="rec-`+tc.not) {
			t.Errorf("search by %s %s: want %s's record and not %s's", tc.by, tc.q, tc.want[:6], tc.not[:6])
		}
	}
	if _, page := get(t, cl, f.srv.URL+"/all?by=key&q=nothex"); !strings.Contains(page, "64 lowercase hex") {
		t.Error("a malformed key is not explained")
	}
	if _, frag := get(t, cl, f.srv.URL+"/records?all=&by=call&q=call_g"); !strings.Contains(frag, key2) || strings.Contains(frag, key1) {
		t.Error("the view's table, reloaded, is not narrowed to its search")
	}
}

// TestFeedKeepsWhatWaits: when the feed keeps no more items, routine answers
// go first: a stream of completed answers does not push out the indeterminate
// one that waits for an operator, nor its resolution.
func TestFeedKeepsWhatWaits(t *testing.T) {
	f := newFixture(t, func(c *console.Config) { c.History = 4 })
	cl := browser(t)
	f.signIn(t, cl, token, "alice")
	stream := openStream(t, f, cl, "0")
	f.w.send(t, events.Answer{Kind: events.KindIndeterminate, Tenant: "acme", Tool: "book", RunID: "r", CallID: "call_waits", Key: key1, Reason: events.ReasonBodyFailed})
	stream.next(t)
	for i := range 6 {
		f.w.send(t, events.Answer{Kind: events.KindCompleted, Tenant: "acme", Tool: "book", RunID: "r", CallID: fmt.Sprintf("call_ok%d", i), Key: key2, Outcome: "PNR"})
		stream.next(t)
	}
	_, page := get(t, cl, f.srv.URL+"/")
	for _, want := range []string{`data-call="call_waits"`, `data-call="call_ok5"`, `data-call="call_ok3"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the feed lost %s", want)
		}
	}
	if strings.Contains(page, `data-call="call_ok2"`) {
		t.Error("the feed keeps more than History items")
	}
}
