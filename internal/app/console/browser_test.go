package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/app/console"
	"github.com/tesserix/toolexec/internal/app/demo"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/tool"
)

// screenshotEnv names the file the browser test writes a screenshot of the
// console to, when set (the README's docs/console.png; the view across
// tenants goes to console-all.png beside it):
//
//	TOOLEXEC_CONSOLE_SCREENSHOT=$PWD/docs/console.png go test -run 'TestBrowser$' ./internal/app/console
const screenshotEnv = "TOOLEXEC_CONSOLE_SCREENSHOT"

// chromium finds Debian's Chromium. Without it the test skips, naming the
// install command — except under CI=true, where it fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const fix = "install it with: apt-get install -y chromium"
	if testenv.InCI() {
		t.Fatalf("Chromium is not installed and CI=true: %s", fix)
	}
	t.Skipf("Chromium is not installed; %s", fix)
	return ""
}

// system is an executor in miniature: an embedded NATS server, a worker
// serving the demo airline over a memory store, the admin responder, and the
// console over them.
type system struct {
	client *toolexec.Client
	adm    *admin.Service
	js     jetstream.JetStream
	url    string
}

func startSystem(t *testing.T) *system {
	t.Helper()
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := bus.EnsureStreams(ctx, js, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { store.Close() })
	reg, err := tool.NewRegistry(demo.New().Tools()...)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatch.New(dispatch.Config{Tools: reg, Store: store, Lease: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	w, err := bus.NewWorker(js, d, bus.WorkerConfig{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer scancel()
		_ = w.Shutdown(sctx)
		<-done
	})
	adm, err := admin.Serve(js, store, admin.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	client, err := toolexec.NewClient(nc, toolexec.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	ops, err := console.ParseOperators(strings.NewReader(operatorsFile()), "operators")
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(console.Config{Token: token, Operators: ops, Operator: adm, Watcher: client,
		Searcher: console.StreamSearcher{JS: js}, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(c.Handler())
	t.Cleanup(hs.Close)
	return &system{client: client, adm: adm, js: js, url: hs.URL}
}

func (s *system) book(t *testing.T, callID, args string) events.Answer {
	t.Helper()
	return s.call(t, "acme", "run_1", callID, args)
}

// call books on the demo airline for tenant, and returns the answer whatever
// its kind.
func (s *system) call(t *testing.T, tenant, runID, callID, args string) events.Answer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := s.client.Call(ctx, tenant, "book", json.RawMessage(args), toolexec.WithRunID(runID), toolexec.WithFreshCallID(callID))
	if a == nil {
		t.Fatalf("call %s: %v", callID, err)
	}
	return *a
}

// newBrowser starts headless Chromium with a profile of its own and returns a
// context for its first tab.
func newBrowser(t *testing.T) context.Context { return newBrowserSized(t, 1440, 900) }

// newBrowserSized is newBrowser with a window of w×h CSS pixels.
func newBrowserSized(t *testing.T, w, h int) context.Context {
	t.Helper()
	path := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(w, h),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancel)
	// The first Run starts the browser; it lives as long as bctx.
	if err := chromedp.Do(bctx, chromedp.EmulateViewport(int64(w), int64(h))); err != nil {
		t.Fatalf("starting Chromium (%s): %v", path, err)
	}
	return bctx
}

// step runs steps with a deadline, failing the test with what was being done.
func step(t *testing.T, bctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func text(t *testing.T, bctx context.Context, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// TestBrowser drives the console in headless Chromium: an operator signs in,
// an Effectful call ends indeterminate and appears in the live feed, the
// operator follows it to the tenant's records and completes it with an
// outcome, and the next duplicate of the call is answered from that
// resolution — deduplicated, with the operator's outcome — which the feed
// shows too.
func TestBrowser(t *testing.T) {
	s := startSystem(t)
	b := newBrowser(t)

	step(t, b, "signing in",
		chromedp.Navigate(s.url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), token),
		chromedp.SendKeys(chromedp.CSS(`input[name=operator]`), "alice"),
		chromedp.Click(chromedp.CSS(`body.login button`)),
		chromedp.WaitVisible(chromedp.CSS(`#feed`)),
		chromedp.WaitVisible(chromedp.CSS(`#status.live`)),
	)

	// The booking whose answer is lost: the seat was taken, nobody knows.
	lost := s.book(t, "c1", `{"flight":"BA999","seats":1,"request_id":"r-1","fail_after_effect":true}`)
	if lost.Kind != events.KindIndeterminate || lost.Reason != events.ReasonBodyFailed || lost.Key == "" {
		t.Fatalf("the lost booking: %+v", lost)
	}
	item := `#feed li[data-kind=indeterminate][data-call=c1]`
	step(t, b, "waiting for the indeterminate call in the live feed", chromedp.WaitVisible(chromedp.CSS(item)))
	if got := text(t, b, item); !strings.Contains(got, "acme") || !strings.Contains(got, "body_failed") || !strings.Contains(got, "book") {
		t.Errorf("feed item %q: want tenant, tool and reason", got)
	}

	row := fmt.Sprintf(`tr[data-key="%s"]`, lost.Key)
	step(t, b, "following the feed item to the tenant's records",
		chromedp.Click(chromedp.CSS(item+` a.resolve`)),
		chromedp.WaitVisible(chromedp.CSS(row)),
	)
	if got := text(t, b, row); !strings.Contains(got, "c1") || !strings.Contains(got, "body_failed") || !strings.Contains(got, "body entered") {
		t.Errorf("record row %q: want call, reason and body entered", got)
	}
	step(t, b, "completing the key with an outcome",
		chromedp.SendKeys(chromedp.CSS(row+` input[name=outcome]`), "K7Q2ZD"),
		chromedp.Click(chromedp.CSS(row+` form.complete button`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	)
	if got := text(t, b, `#flash`); !strings.Contains(got, "Resolved "+lost.Key[:12]) || !strings.Contains(got, "completed") {
		t.Fatalf("after resolving, the page says %q", got)
	}
	step(t, b, "waiting for the resolution in the feed", chromedp.WaitVisible(chromedp.CSS(`#feed li[data-kind=resolved][data-call=c1]`)))
	if got := text(t, b, `#feed li[data-kind=resolved][data-call=c1]`); !strings.Contains(got, "complete by alice"+console.Unverified) || !strings.Contains(got, "K7Q2ZD") {
		t.Errorf("resolved item %q: want the action, the operator and the outcome", got)
	}

	// The agent retries: the duplicate is answered from the resolution.
	retry := s.book(t, "c2", `{"flight":"BA999","seats":1,"request_id":"r-2"}`)
	if retry.Kind != events.KindDeduplicated || retry.Outcome != "K7Q2ZD" || retry.Key != lost.Key {
		t.Fatalf("the retry: %+v; want deduplicated with the operator's outcome", retry)
	}
	dup := `#feed li[data-kind=deduplicated][data-call=c2]`
	step(t, b, "waiting for the deduplicated retry in the feed", chromedp.WaitVisible(chromedp.CSS(dup)))
	if got := text(t, b, dup); !strings.Contains(got, "K7Q2ZD") {
		t.Errorf("deduplicated item %q: want the outcome", got)
	}
	// The key no longer waits for anyone.
	step(t, b, "reloading the records", chromedp.Navigate(s.url+"/?tenant=acme"), chromedp.WaitVisible(chromedp.CSS(`#records p.empty`)))

	if out := os.Getenv(screenshotEnv); out != "" {
		screenshot(t, out)
	}
}

// screenshot starts a console of its own, fills it with events and records
// of two tenants with real-length ids, and saves PNGs at 1280×800: the
// tenant's records and the feed to out, the admins' view across tenants to
// console-all.png beside it.
func screenshot(t *testing.T, out string) {
	t.Helper()
	s := startSystem(t)
	b := newBrowserSized(t, 1280, 800)
	step(t, b, "signing in as ada, with her own token",
		chromedp.Navigate(s.url+"/login"),
		chromedp.WaitVisible(chromedp.CSS(`input[name=token]`)),
		chromedp.SendKeys(chromedp.CSS(`input[name=token]`), adaToken),
		chromedp.Click(chromedp.CSS(`body.login button`)),
		chromedp.WaitVisible(chromedp.CSS(`#status.live`)),
	)
	run := realRunID(t)
	s.call(t, "acme", run, realCallID(t), `{"flight":"LH400","seats":2,"request_id":"r-lh400"}`)
	s.call(t, "acme", run, realCallID(t), `{"flight":"LH400","seats":2,"request_id":"r-lh400"}`)
	s.call(t, "acme", run, realCallID(t), `{"flight":"LH400","request_id":"r-x"}`) // rejected: no seats
	s.lose(t, "globex", "KL1004")
	settled := s.lose(t, "acme", "BA117")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := s.adm.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: settled.Key, Action: events.ActionComplete, Outcome: "PNR-7XK2LM", Operator: "bob"}); err != nil {
		t.Fatal(err)
	}
	var last events.Answer
	for _, flight := range []string{"AF1280", "UA901"} {
		last = s.lose(t, "acme", flight)
	}
	step(t, b, "opening the records for the screenshot",
		chromedp.Navigate(s.url+"/?tenant=acme"),
		chromedp.WaitVisible(chromedp.CSS(`#status.live`)),
		chromedp.WaitVisible(chromedp.CSS(`#feed li[data-key="`+last.Key+`"]`)),
		chromedp.SendKeys(chromedp.CSS(`#records tbody tr:first-child input[name=outcome]`), "PNR-AF9XK2"),
	)
	capture(t, b, out)
	step(t, b, "searching every tenant by a run id",
		chromedp.Navigate(s.url+"/all?by=run&q="+last.RunID),
		chromedp.WaitVisible(chromedp.CSS(`#found li`)),
		chromedp.WaitVisible(chromedp.CSS(`#records tbody tr`)),
	)
	capture(t, b, filepath.Join(filepath.Dir(out), "console-all.png"))
}

// capture saves a PNG of the window to out.
func capture(t *testing.T, b context.Context, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot written to %s", out)
}
