package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/kvstore"
)

// accountOf is the account each user of accounts.conf belongs to.
var accountOf = map[string]string{"executor": "TOOLEXEC", "admin": "ADMIN", "acme": "acme", "globex": "globex", "worker": "WORKERS"}

// TestAccountsConfFile checks the file itself: every user in its account, no
// user fenced by allow lists (the accounts are the fences), JetStream for the
// executors' account alone, writes synced before they are acknowledged,
// monitoring on the loopback interface, and a start only with every password
// set.
func TestAccountsConfFile(t *testing.T) {
	conf := accountsLayout.conf
	setPasswords(t)
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatalf("loading %s: %v", conf, err)
	}
	if !opts.JetStream || !opts.SyncAlways {
		t.Errorf("JetStream %v, sync_interval always %v; want both", opts.JetStream, opts.SyncAlways)
	}
	if opts.HTTPHost != "127.0.0.1" {
		t.Errorf("monitoring listens on %q, want the loopback interface only", opts.HTTPHost)
	}
	if len(opts.Users) != len(accountOf) {
		t.Errorf("%d users, want %d", len(opts.Users), len(accountOf))
	}
	for _, u := range opts.Users {
		if u.Account == nil || u.Account.Name != accountOf[u.Username] {
			t.Errorf("user %s is in account %v, want %s", u.Username, u.Account, accountOf[u.Username])
		}
		if u.Permissions != nil {
			t.Errorf("user %s has permissions %+v; accounts.conf fences with accounts, not allow lists", u.Username, u.Permissions)
		}
	}

	srv := startServer(t, conf)
	for _, name := range []string{"TOOLEXEC", "ADMIN", "acme", "globex", "WORKERS"} {
		acc, err := srv.LookupAccount(name)
		if err != nil {
			t.Fatalf("account %s: %v", name, err)
		}
		if got, want := acc.JetStreamEnabled(), name == "TOOLEXEC"; got != want {
			t.Errorf("account %s: JetStream enabled %v, want %v", name, got, want)
		}
	}

	// The hazard the file warns of: a variable set empty is an empty password.
	t.Setenv("TOOLEXEC_GLOBEX_PASSWORD", "")
	if opts, err = server.ProcessConfigFile(conf); err != nil {
		t.Fatalf("loading %s with an empty password: %v", conf, err)
	}
	for _, u := range opts.Users {
		if u.Username == "globex" && u.Password != "" {
			t.Errorf("an empty variable gave globex the password %q: the warning in %s is out of date", u.Password, conf)
		}
	}
	// One password missing: the server must not start.
	if err := os.Unsetenv("TOOLEXEC_GLOBEX_PASSWORD"); err != nil { // t.Setenv restores it
		t.Fatal(err)
	}
	if _, err := server.ProcessConfigFile(conf); err == nil {
		t.Error("the configuration loaded without TOOLEXEC_GLOBEX_PASSWORD")
	}
}

// loads is how often a configuration is loaded to catch a refusal that comes
// at random: with the overlap TestAdminEventExportHasSevenTokens shows, one
// load in four or so fails, so that all of these succeed by chance has odds
// below 10^-20.
const loads = 200

// loadFails loads conf loads times and returns the first error, if any.
func loadFails(conf string) error {
	for range loads {
		if _, err := server.ProcessConfigFile(conf); err != nil {
			return err
		}
	}
	return nil
}

// TestAccountsConfLoadsEveryTime: every import of the file is authorised
// whatever order the server looks at the exports in.
func TestAccountsConfLoadsEveryTime(t *testing.T) {
	setPasswords(t)
	if err := loadFails(accountsLayout.conf); err != nil {
		t.Fatalf("accounts.conf refused: %v", err)
	}
}

// TestAdminEventExportHasSevenTokens shows why accounts.conf exports every
// tenant's events to ADMIN as toolexec.event.*.*.*.*.* rather than
// toolexec.event.>: nats-server checks a stream import against the first
// export it finds that contains it, in no set order, so a tenant's import of
// toolexec.event.<t>.>, which toolexec.event.> contains, is refused at random
// when that export is for ADMIN alone. If this test fails, the server has
// stopped doing that, and accounts.conf may say toolexec.event.> again.
func TestAdminEventExportHasSevenTokens(t *testing.T) {
	setPasswords(t)
	conf := mutate(t, func(s string) string { return strings.ReplaceAll(s, "toolexec.event.*.*.*.*.*", "toolexec.event.>") })
	err := loadFails(conf)
	if err == nil {
		t.Fatalf("with toolexec.event.> exported to ADMIN, %d loads all succeeded", loads)
	}
	if !strings.Contains(err.Error(), `stream import "toolexec.event.`) || !strings.Contains(err.Error(), "not authorized") {
		t.Errorf("the load failed, but not for the import expected: %v", err)
	}
}

// mutate writes accounts.conf, changed by edit, to a file of the test's and
// returns its name.
func mutate(t *testing.T, edit func(string) string) string {
	t.Helper()
	raw, err := os.ReadFile(accountsLayout.conf)
	if err != nil {
		t.Fatal(err)
	}
	changed := edit(string(raw))
	if changed == string(raw) {
		t.Fatal("the edit changed nothing: accounts.conf no longer reads as the test expects")
	}
	name := filepath.Join(t.TempDir(), "accounts.conf")
	if err := os.WriteFile(name, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestForeignImportsAreRefused: a tenant account that imports anything but
// its own four subjects makes the server refuse the whole configuration, so
// that an operator's slip cannot give acme globex's calls, answers or history,
// the auditors' feed, the admin service or the JetStream API.
func TestForeignImportsAreRefused(t *testing.T) {
	setPasswords(t)
	const anchor = `{service: {account: TOOLEXEC, subject: "toolexec.history.acme"}}`
	tests := []struct{ name, imp string }{
		{"globex's calls", `{service: {account: TOOLEXEC, subject: "toolexec.call.globex.>"}}`},
		{"globex's calls under a name of acme's", `{service: {account: TOOLEXEC, subject: "toolexec.call.globex.>"}, to: "toolexec.call.acme.globex.>"}`},
		{"every tenant's calls", `{service: {account: TOOLEXEC, subject: "toolexec.call.>"}}`},
		{"the calls export itself", `{service: {account: TOOLEXEC, subject: "toolexec.call.*.>"}}`},
		{"the calls as a stream", `{stream: {account: TOOLEXEC, subject: "toolexec.call.acme.>"}}`},
		{"globex's answers", `{stream: {account: TOOLEXEC, subject: "toolexec.event.globex.>"}}`},
		{"globex's answers under a prefix", `{stream: {account: TOOLEXEC, subject: "toolexec.event.globex.>"}, prefix: "spy"}`},
		{"every answer", `{stream: {account: TOOLEXEC, subject: "toolexec.event.>"}}`},
		{"the auditors' feed", `{stream: {account: TOOLEXEC, subject: "toolexec.event.*.*.*.*.*"}}`},
		{"the answers as a service", `{service: {account: TOOLEXEC, subject: "toolexec.event.acme.>"}}`},
		{"globex's history", `{service: {account: TOOLEXEC, subject: "toolexec.history.globex"}}`},
		{"every history", `{service: {account: TOOLEXEC, subject: "toolexec.history.*"}}`},
		{"globex's catalog", `{service: {account: TOOLEXEC, subject: "toolexec.tools.globex"}}`},
		{"every catalog", `{service: {account: TOOLEXEC, subject: "toolexec.tools.*"}}`},
		{"the admin service", `{service: {account: TOOLEXEC, subject: "toolexec.admin.>"}}`},
		{"forget", `{service: {account: TOOLEXEC, subject: "toolexec.admin.forget"}}`},
		{"the JetStream API", `{service: {account: TOOLEXEC, subject: "$JS.API.>"}}`},
		{"a consumer create", `{service: {account: TOOLEXEC, subject: "$JS.API.CONSUMER.CREATE.TOOLEXEC_EVENTS.*.toolexec.event.acme.>"}}`},
		{"the bucket", `{service: {account: TOOLEXEC, subject: "$KV.toolexec_idempotency.>"}}`},
		{"acknowledgements", `{service: {account: TOOLEXEC, subject: "$JS.ACK.>"}}`},
		{"the executors' inboxes", `{stream: {account: TOOLEXEC, subject: "_INBOX.>"}}`},
		{"JetStream advisories", `{stream: {account: TOOLEXEC, subject: "$JS.EVENT.>"}}`},
		{"the tool bodies", `{service: {account: WORKERS, subject: "toolexec.body.>"}}`},
		{"one tool's body", `{service: {account: WORKERS, subject: "toolexec.body.rebook"}}`},
		{"the workers' declarations", `{service: {account: WORKERS, subject: "$SRV.INFO.toolexec-worker"}}`},
		{"the workers' service API", `{service: {account: WORKERS, subject: "$SRV.>"}}`},
		{"the workers' pings", `{service: {account: WORKERS, subject: "$SRV.PING.toolexec-worker"}}`},
		{"the bodies as a stream", `{stream: {account: WORKERS, subject: "toolexec.body.>"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf := mutate(t, func(s string) string { return strings.Replace(s, anchor, anchor+"\n      "+tt.imp, 1) })
			_, err := server.ProcessConfigFile(conf)
			if err == nil || !strings.Contains(err.Error(), "not authorized") {
				t.Fatalf("acme importing %s: %v; want the configuration refused, import not authorized", tt.imp, err)
			}
		})
	}
}

// TestAccountsNeedCredentials: connections without a user, or with another
// user's password, are turned away.
func TestAccountsNeedCredentials(t *testing.T) {
	pw := setPasswords(t)
	srv := startServer(t, accountsLayout.conf)
	if nc, err := nats.Connect(srv.ClientURL()); err == nil {
		nc.Close()
		t.Error("a connection without credentials was accepted")
	}
	if nc, err := nats.Connect(srv.ClientURL(), nats.UserInfo("acme", pw["globex"])); err == nil {
		nc.Close()
		t.Error("acme was let in with globex's password")
	}
}

// TestTenantCallsItsOwnTools: a tenant calls, calls again, and publishes on its
// own subjects, through toolexec.Client (with calls given whole, and by name),
// and receives its answers live; neither it nor the executors meet a single
// refusal, and each effect happens once.
func TestTenantCallsItsOwnTools(t *testing.T) {
	e := newEnv(t, accountsLayout)
	acme := e.as(t, "acme")
	ctx := ctxT(t, waitLong)
	live := acme.subscribe(t, wire.TenantEventSubjects("acme"))

	first := mustCall(t, acme, call("acme", "echo", "run-1", "call-1", `{"say":"hi"}`), events.KindCompleted)
	if first.Outcome != `{"say":"hi"}` {
		t.Errorf("echo outcome %q", first.Outcome)
	}
	booked := mustCall(t, acme, call("acme", "book", "run-1", "call-2", `{"flight":"BA117"}`), events.KindCompleted)
	if booked.Outcome != "PNR-BA117" || booked.Key == "" {
		t.Errorf("book answered %+v", booked)
	}
	// The same booking under another call id: answered from the record.
	again := mustCall(t, acme, call("acme", "book", "run-1", "call-3", `{"flight":"BA117"}`), events.KindDeduplicated)
	if again.Outcome != booked.Outcome || again.Key != booked.Key {
		t.Errorf("the booking again answered %+v, want %q under %s", again, booked.Outcome, booked.Key)
	}

	// The root package's client, with a generated call id.
	c, err := toolexec.NewClient(acme.nc, toolexec.WithDefaultRunID("run-2"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(ctx, "acme", "book", map[string]any{"flight": "AF1"})
	if err != nil || res.Kind != events.KindCompleted || res.Outcome != "PNR-AF1" {
		t.Fatalf("toolexec.Client.Call = %+v, %v", res, err)
	}

	// Publish, and take the answer from the subscription.
	answer := acme.subscribe(t, wire.AnswerFilter("acme", "echo", "run-3", "call-4"))
	ack, err := acme.client.Publish(ctx, call("acme", "echo", "run-3", "call-4", `{}`))
	if err != nil || ack.Stream != wire.CallStream || ack.Duplicate {
		t.Fatalf("acme: Publish = %+v, %v; want a receipt of %s", ack, err, wire.CallStream)
	}
	if _, err := answer.NextMsg(waitLong); err != nil {
		t.Fatalf("acme: no answer to its published call: %v", err)
	}

	for i, want := range []string{"call-1", "call-2", "call-3", res.CallID, "call-4"} {
		m, err := live.NextMsg(waitLong)
		if err != nil {
			t.Fatalf("acme: live event %d: %v", i, err)
		}
		a, err := wire.DecodeAnswer(m.Header, m.Data)
		if err != nil || a.CallID != want || a.Tenant != "acme" {
			t.Errorf("live event %d: %+v, %v; want %s of acme", i, a, err, want)
		}
	}
	e.down.onePerKey(t)
	if n := e.down.count("echo/acme"); n != 2 {
		t.Errorf("echo ran %d times for acme, want 2", n)
	}
	acme.noErrors(t)
	e.noErrors(t)
}

// TestTenantReachesNoJetStream: every JetStream API request a tenant can name,
// and the bucket's and the acknowledgements' subjects, are answered "JetStream
// not enabled for account" or reach no one; none is ever acted on. The client
// methods that read stored events (Attach, Watch) find JetStream refused and
// read through the history service instead: the tenant's own events only.
func TestTenantReachesNoJetStream(t *testing.T) {
	e := newEnv(t, accountsLayout)
	acme, globex := e.as(t, "acme"), e.as(t, "globex")
	b := e.book(t, acme, globex)
	spy := e.view.subscribe(t, admin.Subjects)
	// The callers heard their answers as they were published; the stream may
	// store them a moment later.
	wait.Until(waitLong, func() bool { return e.lastSeq(t, wire.EventStream) >= 2 })
	before := e.lastSeq(t, wire.EventStream)

	push := `{"stream_name":"TOOLEXEC_EVENTS","config":{"name":"x1","deliver_subject":"toolexec.admin.forget","deliver_group":"toolexec-admin","filter_subject":"toolexec.event.acme.>","deliver_policy":"all","ack_policy":"none"}}`
	tests := []struct{ subject, body string }{
		{"$JS.API.INFO", ``},
		{"$JS.API.STREAM.NAMES", `{}`},
		{"$JS.API.STREAM.LIST", `{}`},
		{"$JS.API.STREAM.INFO.TOOLEXEC_EVENTS", `{"subjects_filter":">"}`},
		{"$JS.API.STREAM.INFO.TOOLEXEC_CALLS", `{"subjects_filter":">"}`},
		{"$JS.API.STREAM.CREATE.SPY", `{"name":"SPY","subjects":["toolexec.event.globex.>"]}`},
		{"$JS.API.STREAM.UPDATE.TOOLEXEC_EVENTS", `{"name":"TOOLEXEC_EVENTS","subjects":["toolexec.event.>"],"max_age":1}`},
		{"$JS.API.STREAM.PURGE.TOOLEXEC_EVENTS", `{}`},
		{"$JS.API.STREAM.DELETE.TOOLEXEC_CALLS", ``},
		{"$JS.API.STREAM.MSG.GET.TOOLEXEC_EVENTS", `{"seq":1}`},
		{"$JS.API.STREAM.MSG.DELETE.TOOLEXEC_EVENTS", `{"seq":1}`},
		{"$JS.API.STREAM.MSG.GET.KV_toolexec_idempotency", `{"last_by_subj":"$KV.toolexec_idempotency.globex.` + b.globex.Key + `"}`},
		{"$JS.API.DIRECT.GET.TOOLEXEC_EVENTS", `{"seq":1}`},
		{"$JS.API.DIRECT.GET.KV_toolexec_idempotency.$KV.toolexec_idempotency.globex." + b.globex.Key, ``},
		{"$JS.API.STREAM.SNAPSHOT.TOOLEXEC_EVENTS", `{"deliver_subject":"snap"}`},
		{"$JS.API.CONSUMER.CREATE.TOOLEXEC_EVENTS.x1.toolexec.event.acme.>", push},
		{"$JS.API.CONSUMER.CREATE.TOOLEXEC_EVENTS.x2.toolexec.event.globex.>", `{"stream_name":"TOOLEXEC_EVENTS","config":{"name":"x2","filter_subject":"toolexec.event.globex.>"}}`},
		{"$JS.API.CONSUMER.CREATE.TOOLEXEC_EVENTS", `{"stream_name":"TOOLEXEC_EVENTS","config":{"deliver_subject":"_INBOX.spy"}}`},
		{"$JS.API.CONSUMER.DURABLE.CREATE.TOOLEXEC_EVENTS.x3", `{"stream_name":"TOOLEXEC_EVENTS","config":{"durable_name":"x3"}}`},
		{"$JS.API.CONSUMER.CREATE.TOOLEXEC_CALLS.toolexec-executor", `{"stream_name":"TOOLEXEC_CALLS","config":{"durable_name":"toolexec-executor"}}`},
		{"$JS.API.CONSUMER.INFO.TOOLEXEC_CALLS.toolexec-executor", ``},
		{"$JS.API.CONSUMER.NAMES.TOOLEXEC_EVENTS", `{}`},
		{"$JS.API.CONSUMER.LIST.TOOLEXEC_CALLS", `{}`},
		{"$JS.API.CONSUMER.DELETE.TOOLEXEC_CALLS.toolexec-executor", ``},
		{"$JS.API.CONSUMER.MSG.NEXT.TOOLEXEC_CALLS.toolexec-executor", `{"batch":1,"no_wait":true}`},
		{"$JS.API.CONSUMER.MSG.NEXT.TOOLEXEC_EVENTS.x1", `{"batch":1,"no_wait":true}`},
		{"$JS.API.ACCOUNT.PURGE.TOOLEXEC", ``},
		{"$JS.API.META.LEADER.STEPDOWN", ``},
		{"$KV.toolexec_idempotency.globex." + b.globex.Key, `{}`},
		{"$JS.ACK.TOOLEXEC_CALLS.toolexec-executor.1.1.1.1.1", `+TERM`},
		{"$JS.FC.KV_toolexec_idempotency.x.y", ``},
	}
	for _, tt := range tests {
		t.Run(tt.subject, func(t *testing.T) {
			reply, err := acme.nc.Request(tt.subject, []byte(tt.body), settle)
			switch {
			case errors.Is(err, nats.ErrNoResponders), errors.Is(err, nats.ErrTimeout):
				return
			case err != nil:
				t.Fatalf("request: %v", err)
			}
			if e := apiReply(t, reply.Data); e == nil || e.ErrCode != 10039 {
				t.Errorf("answered %s; want JetStream not enabled for account (10039)", reply.Data)
			}
		})
	}

	ctx := ctxT(t, waitLong)
	if a, err := acme.client.Attach(ctx, "acme", "book", "run-1", "a-book-1"); err != nil || a.Key != b.acme.Key {
		t.Errorf("acme: Attach = %+v, %v; want its booking's answer, through the history service", a, err)
	}
	if _, err := acme.client.Attach(ctx, "globex", "book", "run-1", "g-book-1"); err == nil {
		t.Error("acme: Attach to globex's call found an answer")
	}
	wctx, stop := context.WithCancel(ctx)
	ch, err := acme.client.Watch(wctx, wire.TenantEventSubjects("acme"), toolexec.WatchFromStart())
	if err != nil {
		t.Fatalf("acme: Watch: %v", err)
	}
	if a := <-ch; a.Tenant != "acme" || a.Key != b.acme.Key {
		t.Errorf("acme: Watch from the start delivered %+v first, want its booking's answer", a)
	}
	stop()

	// Nothing was acted on: the streams, their consumers and the bucket are as
	// the executors left them, and nothing reached the admin subjects.
	for stream, want := range map[string][]string{wire.CallStream: {bus.DefaultDurable}, wire.EventStream: nil} {
		s, err := e.view.js.Stream(ctx, stream)
		if err != nil {
			t.Fatalf("executor: %s is gone: %v", stream, err)
		}
		var names []string
		for n := range s.ConsumerNames(ctx).Name() {
			names = append(names, n)
		}
		if fmt.Sprint(names) != fmt.Sprint(want) {
			t.Errorf("%s has consumers %v, want %v", stream, names, want)
		}
	}
	if _, err := e.view.js.Stream(ctx, "SPY"); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream SPY: %v, want not found", err)
	}
	if after := e.lastSeq(t, wire.EventStream); after != before {
		t.Errorf("TOOLEXEC_EVENTS went from %d to %d", before, after)
	}
	for _, tenant := range []string{"acme", "globex"} {
		if n := e.stored(t, wire.EventStream, wire.TenantEventSubjects(tenant)); n != 1 {
			t.Errorf("%s has %d events stored, want its one answer", tenant, n)
		}
	}
	nothingOn(t, map[string]*nats.Subscription{"the admin subjects": spy})
	e.rebook(t, acme, globex, b, 1)
	acme.noErrors(t)
	e.noErrors(t)
}

// TestTenantSnoopsNothing: a tenant may subscribe to anything in its own
// account, and sees nothing of the others: not globex's calls, answers or
// replies, not the executors' inboxes, acknowledgements, JetStream advisories
// or bucket, not the admin requests, whatever globex, the executors and the
// admin do meanwhile.
func TestTenantSnoopsNothing(t *testing.T) {
	e := newEnv(t, accountsLayout)
	acme, globex, ops := e.as(t, "acme"), e.as(t, "globex"), e.as(t, "admin")
	spies := map[string]*nats.Subscription{}
	for _, subject := range []string{
		">", "_INBOX.>", "_R_.>", "$JS.>", "$JS.EVENT.>", "$JS.ACK.>", "$JS.API.>", "$KV.>", "$SYS.>",
		"toolexec.>", "toolexec.call.>", "toolexec.event.globex.>", "toolexec.event.*.*.*.*.*",
		"toolexec.admin.>", "toolexec.history.>",
	} {
		spies[subject] = acme.subscribe(t, subject)
	}

	ctx := ctxT(t, waitLong)
	feed, err := e.view.client.Watch(ctx, wire.EventSubjects)
	if err != nil {
		t.Fatalf("executor: the console's watch: %v", err)
	}
	lost := mustCall(t, globex, call("globex", "book", "run-1", "g-1", `{"flight":"LH400","fail":true}`), events.KindIndeterminate)
	mustCall(t, globex, call("globex", "echo", "run-1", "g-2", `{"secret":"LH400"}`), events.KindCompleted)
	again := call("globex", "echo", "run-1", "g-2", `{"secret":"LH400"}`)
	again.Repeat = true // answered from the stored answer
	mustCall(t, globex, again, events.KindCompleted)
	next(t, "console feed", feed)
	if _, err := ops.admin.List(ctx, admin.ListRequest{Tenant: "globex"}); err != nil {
		t.Fatalf("admin: List: %v", err)
	}
	if _, err := ops.admin.Resolve(ctx, admin.ResolveRequest{Tenant: "globex", Key: lost.Key, Action: events.ActionRelease}); err != nil {
		t.Fatalf("admin: Resolve: %v", err)
	}
	if _, err := ops.admin.Forget(ctx, "globex"); err != nil {
		t.Fatalf("admin: Forget: %v", err)
	}
	nothingOn(t, spies)
	// The spies are live: acme's own call shows on ">".
	mustCall(t, acme, call("acme", "echo", "run-1", "a-1", `{}`), events.KindCompleted)
	for {
		m, err := spies[">"].NextMsg(waitLong)
		if err != nil {
			t.Fatalf("acme's spy on > missed acme's own answer: %v", err)
		}
		if strings.HasPrefix(m.Subject, wire.EventPrefix+"acme.") {
			break
		}
	}
	acme.noErrors(t)
	e.noErrors(t)
}

// TestTenantCannotCallAsAnother: acme's calls on globex's subjects reach no
// one, and a call on its own subject that claims globex in its tenant member
// is rejected on acme's subjects.
func TestTenantCannotCallAsAnother(t *testing.T) {
	e := newEnv(t, accountsLayout)
	acme, globex := e.as(t, "acme"), e.as(t, "globex")
	before := e.lastSeq(t, wire.CallStream)

	if err := acme.nc.Publish("toolexec.call.globex.book.a-0", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := acme.nc.Request("toolexec.call.globex.book.a-0", []byte(`{}`), waitLong); !errors.Is(err, nats.ErrNoResponders) {
		t.Errorf("acme: a request on globex's call subject: %v, want no responders", err)
	}
	// Through the client: no stream answers, and the call fails at once.
	if _, err := acme.client.Call(ctxT(t, waitLong), call("globex", "book", "run-1", "a-1", `{"flight":"BA117"}`)); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("acme: Call as globex = %v, want no response from the stream", err)
	}
	if after := e.lastSeq(t, wire.CallStream); after != before {
		t.Errorf("TOOLEXEC_CALLS grew from %d to %d", before, after)
	}

	// On its own subject, claiming globex in the tenant member: rejected on
	// acme's subjects, as the contract says.
	cl := call("globex", "book", "run-1", "a-2", `{"flight":"BA117"}`)
	ev, err := wire.CallEvent(cl)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := wire.NewMsg(wire.CallSubject("acme", "book", cl.CallID), ev, wire.Structured)
	if err != nil {
		t.Fatal(err)
	}
	answer := acme.subscribe(t, wire.AnswerFilter("acme", "book", cl.RunID, cl.CallID))
	if _, err := acme.js.PublishMsg(ctxT(t, waitLong), msg); err != nil {
		t.Fatalf("acme: publishing on its own subject: %v", err)
	}
	m, err := answer.NextMsg(waitLong)
	if err != nil {
		t.Fatalf("acme: no answer to the call claiming globex: %v", err)
	}
	if a, err := wire.DecodeAnswer(m.Header, m.Data); err != nil || a.Kind != events.KindRejected || a.Code != events.CodeTenantMismatch {
		t.Errorf("the call claiming globex was answered %+v, %v; want rejected, tenant_mismatch", a, err)
	}
	if n := e.down.count("echo/globex"); n != 0 {
		t.Errorf("globex's tools ran %d times; globex called nothing", n)
	}
	e.down.onePerKey(t)
	globex.noErrors(t)
	e.noErrors(t)
}

// requestAccount returns the account a Nats-Request-Info header names.
func requestAccount(t *testing.T, h nats.Header) string {
	t.Helper()
	var info struct {
		Account string `json:"acc"`
	}
	if v := h.Get("Nats-Request-Info"); v != "" {
		if err := json.Unmarshal([]byte(v), &info); err != nil {
			t.Fatalf("Nats-Request-Info %q: %v", v, err)
		}
	}
	return info.Account
}

// TestAdminOnlyFromADMIN: admin requests are served from the admin account
// only. A tenant has no admin subjects at all, forged header or not; a request
// from inside the executors' account carries no header and is refused; the
// server writes the header itself where a request crosses an import, over
// whatever the client set.
func TestAdminOnlyFromADMIN(t *testing.T) {
	e := newEnv(t, accountsLayout)
	acme, globex, ops := e.as(t, "acme"), e.as(t, "globex"), e.as(t, "admin")
	b := e.book(t, acme, globex)
	ctx := ctxT(t, waitLong)
	forgetGlobex := func(info string) *nats.Msg {
		m := nats.NewMsg(admin.ForgetSubject)
		m.Data = []byte(`{"tenant":"globex"}`)
		if info != "" {
			m.Header.Set("Nats-Request-Info", info)
		}
		return m
	}

	t.Run("from a tenant", func(t *testing.T) {
		if _, err := acme.admin.Forget(ctx, "globex"); !errors.Is(err, admin.ErrNoResponder) {
			t.Errorf("Forget: %v, want ErrNoResponder", err)
		}
		if _, err := acme.admin.List(ctx, admin.ListRequest{Tenant: "globex"}); !errors.Is(err, admin.ErrNoResponder) {
			t.Errorf("List: %v, want ErrNoResponder", err)
		}
		if _, err := acme.admin.Inspect(ctx, "globex", b.globex.Key); !errors.Is(err, admin.ErrNoResponder) {
			t.Errorf("Inspect: %v, want ErrNoResponder", err)
		}
		if _, err := acme.admin.Resolve(ctx, admin.ResolveRequest{Tenant: "globex", Key: b.globex.Key, Action: events.ActionRelease}); !errors.Is(err, admin.ErrNoResponder) {
			t.Errorf("Resolve: %v, want ErrNoResponder", err)
		}
		if _, err := acme.nc.RequestMsg(forgetGlobex(`{"acc":"ADMIN"}`), waitLong); !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("a forget with a forged header: %v, want no responders", err)
		}
	})

	t.Run("a tenant's header replaced at its import", func(t *testing.T) {
		seen := e.view.subscribe(t, wire.TenantCallSubjects("acme"))
		cl := call("acme", "echo", "run-1", "a-forged", `{}`)
		data, err := wire.CallJSON(cl)
		if err != nil {
			t.Fatal(err)
		}
		msg := wire.StructuredMsg(wire.CallSubject("acme", "echo", cl.CallID), data)
		msg.Header.Set("Nats-Request-Info", `{"acc":"ADMIN"}`)
		ack, err := acme.js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatalf("acme: publish: %v", err)
		}
		m, err := seen.NextMsg(waitLong)
		if err != nil {
			t.Fatal(err)
		}
		if got := requestAccount(t, m.Header); got != "acme" {
			t.Errorf("acme's call arrived in TOOLEXEC saying it came from %q, want acme", got)
		}
		// And JetStream stores the call without it.
		stored, err := e.view.js.Stream(ctx, wire.CallStream)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := stored.GetMsg(ctx, ack.Sequence)
		if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) { // an executor may have taken it already
			t.Fatal(err)
		}
		if err == nil && raw.Header.Get("Nats-Request-Info") != "" {
			t.Errorf("the stored call keeps Nats-Request-Info %q", raw.Header.Get("Nats-Request-Info"))
		}
	})

	t.Run("from ADMIN, with a header naming acme", func(t *testing.T) {
		m := nats.NewMsg(admin.InspectSubject)
		m.Data = []byte(`{"tenant":"globex","key":"` + b.globex.Key + `"}`)
		m.Header.Set("Nats-Request-Info", `{"acc":"acme"}`)
		reply, err := ops.nc.RequestMsg(m, waitLong)
		if err != nil {
			t.Fatal(err)
		}
		var resp admin.InspectResponse
		if err := json.Unmarshal(reply.Data, &resp); err != nil || resp.Error != nil || resp.Record == nil || resp.Record.Outcome != "PNR-LH400" {
			t.Errorf("inspect from ADMIN answered %s; want globex's record (the server says ADMIN, whatever the client wrote)", reply.Data)
		}
	})

	t.Run("from inside TOOLEXEC", func(t *testing.T) {
		if _, err := e.view.admin.Forget(ctx, "globex"); !errors.Is(err, admin.ErrForbidden) {
			t.Errorf("Forget: %v, want ErrForbidden", err)
		}
		if _, err := e.view.admin.Inspect(ctx, "globex", b.globex.Key); !errors.Is(err, admin.ErrForbidden) {
			t.Errorf("Inspect: %v, want ErrForbidden", err)
		}
		reply, err := e.view.nc.RequestMsg(forgetGlobex(`{"acc":"acme"}`), waitLong)
		if err != nil {
			t.Fatal(err)
		}
		var resp admin.ForgetResponse
		if err := json.Unmarshal(reply.Data, &resp); err != nil || resp.Error == nil || resp.Error.Code != admin.CodeForbidden {
			t.Errorf("a forget naming acme answered %s, want forbidden", reply.Data)
		}
	})

	// The limit accounts.conf names: TOOLEXEC is trusted, and a header written
	// inside it is believed. Only the executors may hold its credentials.
	t.Run("inside TOOLEXEC, a forged header is believed", func(t *testing.T) {
		m := nats.NewMsg(admin.InspectSubject)
		m.Data = []byte(`{"tenant":"globex","key":"` + b.globex.Key + `"}`)
		m.Header.Set("Nats-Request-Info", `{"acc":"ADMIN"}`)
		reply, err := e.view.nc.RequestMsg(m, waitLong)
		if err != nil {
			t.Fatal(err)
		}
		var resp admin.InspectResponse
		if err := json.Unmarshal(reply.Data, &resp); err != nil || resp.Error != nil {
			t.Errorf("inspect with a header forged inside TOOLEXEC answered %s; if it is refused now, update accounts.conf's comments", reply.Data)
		}
	})

	e.rebook(t, acme, globex, b, 1)
	for _, c := range []*conn{acme, globex, ops} {
		c.noErrors(t)
	}
	e.noErrors(t)
}

// TestAdminForgetsATenant: the admin audits indeterminate answers live,
// lists, inspects and resolves a tenant's keys, and forgets the tenant: its
// records are erased and its subjects purged from both streams, while
// another tenant's stay. Neither the executors nor the admin meet a refusal.
func TestAdminForgetsATenant(t *testing.T) {
	e := newEnv(t, accountsLayout)
	acme, globex, ops := e.as(t, "acme"), e.as(t, "globex"), e.as(t, "admin")
	ctx := ctxT(t, waitLong)

	audit := ops.subscribe(t, wire.KindSubjects(events.KindIndeterminate))
	lost := mustCall(t, acme, call("acme", "book", "run-1", "call-1", `{"flight":"BA117","fail":true}`), events.KindIndeterminate)
	booked := mustCall(t, acme, call("acme", "book", "run-1", "call-2", `{"flight":"AF1"}`), events.KindCompleted)
	theirs := mustCall(t, globex, call("globex", "book", "run-1", "g-call-1", `{"flight":"LH400"}`), events.KindCompleted)
	m, err := audit.NextMsg(waitLong)
	if err != nil {
		t.Fatalf("admin: no indeterminate event: %v", err)
	}
	if a, err := wire.DecodeAnswer(m.Header, m.Data); err != nil || a.Tenant != "acme" || a.Key != lost.Key {
		t.Errorf("admin audit saw %+v, %v; want acme's indeterminate key %s", a, err, lost.Key)
	}

	// The console's feed: an executor watches every tenant's events of a kind.
	feed, err := e.view.client.Watch(ctx, wire.KindSubjects(events.KindIndeterminate), toolexec.WatchSince(time.Now().Add(-time.Hour)))
	if err != nil {
		t.Fatalf("executor: Watch for the console: %v", err)
	}
	if a := next(t, "console feed", feed); a.Key != lost.Key {
		t.Errorf("the console feed saw %+v, want acme's indeterminate key %s", a, lost.Key)
	}

	list, err := ops.admin.List(ctx, admin.ListRequest{Tenant: "acme"})
	if err != nil || len(list.Records) != 1 || list.Records[0].Key != lost.Key {
		t.Fatalf("admin: List = %+v, %v; want acme's one indeterminate key", list, err)
	}
	rec, err := ops.admin.Inspect(ctx, "acme", lost.Key)
	if err != nil || rec.State != kvstore.StateIndeterminate {
		t.Fatalf("admin: Inspect = %+v, %v; want indeterminate", rec, err)
	}
	resolved := ops.subscribe(t, wire.KindSubjects(events.KindResolved))
	rec, err = ops.admin.Resolve(ctx, admin.ResolveRequest{Tenant: "acme", Key: lost.Key, Action: events.ActionComplete, Outcome: "PNR-BA117", Operator: "ops"})
	if err != nil || rec.State != kvstore.StateCompleted || rec.Outcome != "PNR-BA117" {
		t.Fatalf("admin: Resolve = %+v, %v; want completed", rec, err)
	}
	if _, err := resolved.NextMsg(waitLong); err != nil {
		t.Errorf("admin: no resolved event: %v", err)
	}

	// Calls that wait in TOOLEXEC_CALLS while no executor runs, for both
	// tenants; one executor's admin responder alone stays up.
	e.stopExecutors()
	responder := e.as(t, "executor")
	adm, err := admin.Serve(responder.js, e.store, admin.Config{Account: e.adminAccount, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	if _, err := acme.client.Publish(ctx, call("acme", "book", "run-2", "call-3", `{"flight":"BA117"}`)); err != nil {
		t.Fatal(err)
	}
	waiting := globex.subscribe(t, wire.AnswerFilter("globex", "book", "run-1", "g-call-2"))
	if _, err := globex.client.Publish(ctx, call("globex", "book", "run-1", "g-call-2", `{"flight":"LH400"}`)); err != nil {
		t.Fatal(err)
	}

	stored := func(stream, tenant string) uint64 {
		sub := wire.TenantEventSubjects(tenant)
		if stream == wire.CallStream {
			sub = wire.TenantCallSubjects(tenant)
		}
		return e.stored(t, stream, sub)
	}
	for _, tenant := range []string{"acme", "globex"} {
		if stored(wire.CallStream, tenant) == 0 || stored(wire.EventStream, tenant) == 0 || len(e.records(t, tenant)) == 0 {
			t.Fatalf("%s has nothing stored before forget", tenant)
		}
	}
	globexEvents, globexRecords := stored(wire.EventStream, "globex"), len(e.records(t, "globex"))

	n, err := ops.admin.Forget(ctx, "acme")
	if err != nil {
		t.Fatalf("admin: Forget acme: %v", err)
	}
	if n != -1 {
		t.Errorf("Forget = %d; the JetStream store cannot count and says -1", n)
	}
	if recs := e.records(t, "acme"); len(recs) != 0 {
		t.Errorf("acme keeps %d records after forget", len(recs))
	}
	for _, stream := range []string{wire.CallStream, wire.EventStream} {
		if n := stored(stream, "acme"); n != 0 {
			t.Errorf("%s keeps %d messages of acme after forget", stream, n)
		}
	}
	for _, key := range []string{lost.Key, booked.Key} {
		if _, err := ops.admin.Inspect(ctx, "acme", key); !errors.Is(err, kvstore.ErrNotFound) {
			t.Errorf("admin: Inspect of a forgotten key: %v, want ErrNotFound", err)
		}
	}
	if got := stored(wire.CallStream, "globex"); got != 1 {
		t.Errorf("globex's waiting calls: %d after acme's forget, want 1", got)
	}
	if got := stored(wire.EventStream, "globex"); got != globexEvents {
		t.Errorf("globex's events: %d after acme's forget, want %d", got, globexEvents)
	}
	if got := len(e.records(t, "globex")); got != globexRecords {
		t.Errorf("globex's records: %d after acme's forget, want %d", got, globexRecords)
	}
	if rec, err := ops.admin.Inspect(ctx, "globex", theirs.Key); err != nil || rec.Outcome != "PNR-LH400" {
		t.Errorf("admin: Inspect of globex's key after acme's forget = %+v, %v", rec, err)
	}

	// globex's waiting call is served once an executor runs again.
	e.execs = append(e.execs, e.startExecutors(t, 1)...)
	m, err = waiting.NextMsg(waitLong)
	if err != nil {
		t.Fatalf("globex: no answer to its waiting call: %v", err)
	}
	if a, err := wire.DecodeAnswer(m.Header, m.Data); err != nil || a.Kind != events.KindDeduplicated || a.Outcome != "PNR-LH400" {
		t.Errorf("globex's waiting call answered %+v, %v; want deduplicated PNR-LH400", a, err)
	}
	e.down.onePerKey(t)
	for _, c := range []*conn{acme, globex, ops, responder} {
		c.noErrors(t)
	}
	e.noErrors(t)
}

// TestCallIDsAreTheTenantsOwn: a call id is its tenant's alone. acme holds an
// id with a call that waits (no executor runs), publishing it as a hostile
// caller would, with the id as Nats-Msg-Id and expectations about globex's
// subjects; globex then uses the same id over raw NATS, with toolexec.Client
// by name (first try and a retry) and with a call given whole: each
// publication is stored
// with no word of acme's (no duplicate, a sequence of its own), each call
// runs and is answered as globex's, and acme's call, once executors run, is
// answered as acme's. Within acme, a second publication of the waiting call
// is refused (a call of that tenant, tool and id waits), and nothing of acme's
// is dropped or delayed by globex's.
func TestCallIDsAreTheTenantsOwn(t *testing.T) {
	e := newEnv(t, accountsLayout)
	acme, globex := e.as(t, "acme"), e.as(t, "globex")
	ctx := ctxT(t, waitLong)
	e.stopExecutors()

	const id = "shared-id"
	acmeCall := call("acme", "book", "run-1", id, `{"flight":"BA117"}`)
	data, err := wire.CallJSON(acmeCall)
	if err != nil {
		t.Fatal(err)
	}
	hostile := wire.StructuredMsg(wire.CallSubject("acme", "book", id), data)
	hostile.Header.Set(jetstream.MsgIDHeader, id)
	ack, err := acme.js.PublishMsg(ctx, hostile)
	if err != nil || ack.Duplicate {
		t.Fatalf("acme: publishing its call: %+v, %v", ack, err)
	}
	// acme again: refused, its own call waits.
	if again, err := acme.js.PublishMsg(ctx, hostile); err == nil && !again.Duplicate {
		t.Errorf("acme publishing its waiting call again: stored again (%+v)", again)
	}
	if _, err := acme.client.Publish(ctx, acmeCall); !errors.Is(err, events.ErrCallIDTaken) {
		t.Errorf("acme's client publishing its waiting call again: %v, want ErrCallIDTaken", err)
	}
	// globex, raw: the subject names its tenant and the call; no message id.
	globexCall := call("globex", "book", "run-1", id, `{"flight":"LH400"}`)
	gdata, err := wire.CallJSON(globexCall)
	if err != nil {
		t.Fatal(err)
	}
	raw := wire.StructuredMsg(wire.CallSubject("globex", "book", id), gdata)
	answer := globex.subscribe(t, wire.AnswerFilter("globex", "book", "*", id))
	gack, err := globex.js.PublishMsg(ctx, raw)
	if err != nil || gack.Duplicate || gack.Sequence == ack.Sequence {
		t.Fatalf("globex: publishing with acme's call id: %+v, %v; want a call of its own (acme's is sequence %d)", gack, err, ack.Sequence)
	}
	// Through toolexec.Client, twice (the second a retry by the same client),
	// and with a call given whole, with the ids of calls of tools that acme's
	// waiting calls hold too.
	c, err := toolexec.NewClient(globex.nc, toolexec.WithDefaultRunID("run-1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acme.client.Publish(ctx, call("acme", "echo", "run-1", "shared-2", `{}`)); err != nil {
		t.Fatal(err)
	}
	results := make(chan error, 3)
	for range 2 {
		go func() {
			res, err := c.Call(ctx, "globex", "echo", map[string]any{"n": 1}, toolexec.WithCallID("shared-2"))
			if err == nil && (res.Kind != events.KindCompleted || res.Tenant != "globex") {
				err = fmt.Errorf("answered %+v", res)
			}
			results <- err
		}()
	}
	go func() {
		a, err := globex.client.Call(ctx, call("globex", "echo", "run-2", "shared-3", `{}`))
		if err == nil && a.Kind != events.KindCompleted {
			err = fmt.Errorf("answered %+v", a)
		}
		results <- err
	}()
	if _, err := acme.client.Publish(ctx, call("acme", "echo", "run-2", "shared-3", `{}`)); err != nil {
		t.Fatal(err)
	}

	e.execs = e.startExecutors(t, executors)
	m, err := answer.NextMsg(waitLong)
	if err != nil {
		t.Fatalf("globex: no answer to its raw call: %v", err)
	}
	if a, err := wire.DecodeAnswer(m.Header, m.Data); err != nil || a.Kind != events.KindCompleted || a.Tenant != "globex" || a.Outcome != "PNR-LH400" {
		t.Errorf("globex's raw call answered %+v, %v; want its own booking", a, err)
	}
	for range 3 {
		if err := <-results; err != nil {
			t.Errorf("globex's call with an id acme's waiting calls hold: %v", err)
		}
	}
	if a := mustCall(t, acme, func() events.Call { c := acmeCall; c.Repeat = true; return c }(), events.KindCompleted); a.Outcome != "PNR-BA117" {
		t.Errorf("acme's call answered %+v, want its own booking", a)
	}
	for _, who := range []string{"echo/acme", "echo/globex"} {
		if n := e.down.count(who); n != 2 {
			t.Errorf("%s ran %d times, want 2 (shared-2 and shared-3 once each)", who, n)
		}
	}
	e.down.onePerKey(t)
	globex.noErrors(t)
	e.noErrors(t)
}

// TestExpectationProbe pins what the calls stream, shared by every tenant,
// still tells a tenant that sets JetStream's expectation headers on its own
// publication, as the accounts.conf comments and docs/PROTOCOL.md §4 say:
// whether a message is stored under a subject it names exactly, or under a
// wildcard, of another tenant's, so whether a call whose tenant, tool and id
// it knows (or guesses) waits right now. It learns nothing of a call
// answered, changes nothing of globex's, and cannot name a call id it does
// not know: the clients' are 128 random bits.
func TestExpectationProbe(t *testing.T) {
	e := newEnv(t, accountsLayout)
	acme, globex := e.as(t, "acme"), e.as(t, "globex")
	ctx := ctxT(t, waitLong)
	probe := func(n int, subject string) error {
		data, err := wire.CallJSON(call("acme", "echo", "run-1", fmt.Sprint("probe-", n), `{}`))
		if err != nil {
			t.Fatal(err)
		}
		msg := wire.StructuredMsg(wire.CallSubject("acme", "echo", fmt.Sprint("probe-", n)), data)
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
		msg.Header.Set("Nats-Expected-Last-Subject-Sequence-Subject", subject)
		_, err = acme.js.PublishMsg(ctx, msg)
		return err
	}
	e.stopExecutors()
	waiting := call("globex", "book", "run-1", "booking-42", `{"flight":"LH400"}`)
	if _, err := globex.client.Publish(ctx, waiting); err != nil {
		t.Fatal(err)
	}
	if err := probe(1, wire.CallSubject("globex", "book", "booking-42")); err == nil {
		t.Error("a probe naming globex's waiting call was accepted: update the docs, the stream no longer tells")
	}
	if err := probe(2, wire.CallSubject("globex", "book", "booking-43")); err != nil {
		t.Errorf("a probe naming a call globex never made: %v", err)
	}
	e.execs = e.startExecutors(t, executors)
	if a, err := globex.client.Attach(ctx, waiting.Tenant, waiting.Tool, waiting.RunID, waiting.CallID); err != nil || a.Kind != events.KindCompleted {
		t.Fatalf("globex's call: %+v, %v", a, err)
	}
	wait.EventuallyNoError(t, waitLong, "a probe naming globex's answered call to be accepted", func() error {
		return probe(3, wire.CallSubject("globex", "book", "booking-42"))
	})
	e.down.onePerKey(t)
	globex.noErrors(t)
}

// TestAdminReadsEveryTenantsHistory: the operators' account has no JetStream
// and imports no tenant's history subject, yet its client watches every
// tenant's completed answers with history (from the start, and since an hour
// ago, as `emitter watch --since 1h` asks) and attaches to globex's stored
// answer by its ids, through toolexec.admin.history, which the executors
// (--admin-account ADMIN) serve to ADMIN only. acme reaches no
// toolexec.admin.history, with a forged Nats-Request-Info or without.
func TestAdminReadsEveryTenantsHistory(t *testing.T) {
	e := newEnv(t, accountsLayout)
	acme, globex, ops := e.as(t, "acme"), e.as(t, "globex"), e.as(t, "admin")
	b := e.book(t, acme, globex)
	const completedAll = "toolexec.event.*.completed.>"
	// The callers heard their answers as they were published; the stream may
	// store them a moment later.
	if !wait.Until(waitLong, func() bool { return e.stored(t, wire.EventStream, completedAll) == 2 }) {
		t.Fatal("the two bookings' answers were not stored")
	}

	for name, start := range map[string]toolexec.WatchOption{
		"from the start": toolexec.WatchFromStart(),
		"since 1h":       toolexec.WatchSince(time.Now().Add(-time.Hour)),
	} {
		t.Run("watch "+name, func(t *testing.T) {
			ctx, stop := context.WithCancel(ctxT(t, waitLong))
			defer stop()
			ch, err := ops.client.Watch(ctx, completedAll, start)
			if err != nil {
				t.Fatalf("admin: Watch: %v", err)
			}
			for _, want := range []events.Answer{b.acme, b.globex} {
				if a := next(t, "admin's watch", ch); a.Tenant != want.Tenant || a.Key != want.Key || a.Outcome != want.Outcome {
					t.Errorf("admin's watch delivered %s's %s %q, want %s's %s %q", a.Tenant, a.CallID, a.Outcome, want.Tenant, want.CallID, want.Outcome)
				}
			}
		})
	}

	t.Run("attach to globex's answer", func(t *testing.T) {
		a, err := ops.client.Attach(ctxT(t, waitLong), "globex", "book", "run-1", b.globex.CallID)
		if err != nil || a.Tenant != "globex" || a.Key != b.globex.Key || a.Outcome != b.globex.Outcome {
			t.Errorf("admin: Attach to globex's booking = %+v, %v; want its stored answer", a, err)
		}
	})

	t.Run("acme reaches no operators' history", func(t *testing.T) {
		ctx := ctxT(t, waitLong)
		if _, err := acme.client.AdminHistory(ctx, bus.HistoryRequest{Filter: completedAll}); !errors.Is(err, toolexec.ErrNoHistoryService) {
			t.Errorf("acme: AdminHistory = %v, want ErrNoHistoryService", err)
		}
		if _, err := acme.client.Watch(ctx, completedAll, toolexec.WatchFromStart()); !errors.Is(err, toolexec.ErrNoHistoryService) {
			t.Errorf("acme: Watch of every tenant = %v, want ErrNoHistoryService", err)
		}
		if _, err := acme.client.Attach(ctx, "globex", "book", "run-1", b.globex.CallID); !errors.Is(err, toolexec.ErrNoHistoryService) {
			t.Errorf("acme: Attach to globex's booking = %v, want ErrNoHistoryService", err)
		}
		for _, info := range []string{"", `{"acc":"ADMIN"}`} {
			m := nats.NewMsg(wire.AdminHistorySubject)
			m.Data = []byte(`{"filter":"toolexec.event.globex.>"}`)
			if info != "" {
				m.Header.Set("Nats-Request-Info", info)
			}
			if _, err := acme.nc.RequestMsg(m, waitLong); !errors.Is(err, nats.ErrNoResponders) {
				t.Errorf("acme: a request on %s with header %q: %v, want no responders", wire.AdminHistorySubject, info, err)
			}
		}
	})

	// Inside TOOLEXEC a request crosses no import and carries no header: the
	// executors refuse it, as they refuse admin requests from there.
	_, err := e.view.client.AdminHistory(ctxT(t, waitLong), bus.HistoryRequest{})
	var he *bus.HistoryError
	if !errors.As(err, &he) || he.Code != bus.HistoryForbidden {
		t.Errorf("executor: AdminHistory without the header = %v, want %s", err, bus.HistoryForbidden)
	}

	for _, c := range []*conn{acme, globex, ops} {
		c.noErrors(t)
	}
	e.noErrors(t)
}

// TestTenantListsTools: a tenant reads the executors' tool catalog on its own
// subject, toolexec.tools.<tenant>, through its import; another tenant's
// catalog subject reaches no one from its account.
func TestTenantListsTools(t *testing.T) {
	e := newEnv(t, accountsLayout)
	acme := e.as(t, "acme")
	ctx := ctxT(t, waitLong)
	decls, err := acme.client.Tools(ctx, "acme")
	if err != nil {
		t.Fatalf("acme: Tools: %v", err)
	}
	var names []string
	for _, d := range decls {
		names = append(names, d.Name)
	}
	if !slices.Contains(names, "book") || !slices.Contains(names, "echo") {
		t.Errorf("acme: Tools = %v, want the executors' tools (book, echo)", names)
	}
	if _, err := acme.client.Tools(ctx, "globex"); !errors.Is(err, toolexec.ErrNoCatalogService) {
		t.Errorf("acme: Tools on globex's subject: %v; want no responders (ErrNoCatalogService)", err)
	}
}
