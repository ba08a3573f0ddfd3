package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/clienttest"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

// answerOf is tenant's answer of kind to its call callID of tool book in run-1.
func answerOf(tenant string, kind events.Kind, callID string) events.Answer {
	a := completed(callID, tenant+"-"+callID)
	a.Tenant, a.Kind = tenant, kind
	if kind == events.KindIndeterminate {
		a.Outcome, a.Reason = "", events.ReasonTimeout
	}
	return a
}

// storeTenants stores, through js, a completed answer of acme (a-1) and of
// globex (g-1), and an indeterminate one of globex (g-2).
func storeTenants(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	storeAnswer(t, js, answerOf("acme", events.KindCompleted, "a-1"), wire.Structured)
	storeAnswer(t, js, answerOf("globex", events.KindCompleted, "g-1"), wire.Binary)
	storeAnswer(t, js, answerOf("globex", events.KindIndeterminate, "g-2"), wire.Structured)
}

// pageIDs returns the tenant/call of each event of a history page, by subject.
func pageIDs(t *testing.T, resp *bus.HistoryResponse) []string {
	t.Helper()
	var ids []string
	for _, ev := range resp.Events {
		tokens := strings.Split(ev.Subject, ".")
		if len(tokens) != 7 {
			t.Fatalf("event subject %q", ev.Subject)
		}
		ids = append(ids, tokens[2]+"/"+tokens[6])
	}
	return ids
}

// adminRequest returns a request on toolexec.admin.history for filter, with a
// Nats-Request-Info header info (none when empty).
func adminRequest(t *testing.T, filter, info string) *nats.Msg {
	t.Helper()
	data, err := json.Marshal(map[string]string{"filter": filter})
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(wire.AdminHistorySubject)
	m.Data = data
	if info != "" {
		m.Header.Set("Nats-Request-Info", info)
	}
	return m
}

// TestAdminHistoryOneAccount: with no admin account configured (one account,
// the embedded server's), toolexec.admin.history serves a filter over any
// tenant's events, and refuses what lies outside toolexec.event. or is not
// well formed.
func TestAdminHistoryOneAccount(t *testing.T) {
	h := newHarness(t)
	h.serveHistory(t)
	c := h.serviceClient(t)
	storeTenants(t, h.js)
	tests := []struct {
		give     string
		wantIDs  []string
		wantCode string
	}{
		{"", []string{"acme/a-1", "globex/g-1", "globex/g-2"}, ""},
		{"toolexec.event.>", []string{"acme/a-1", "globex/g-1", "globex/g-2"}, ""},
		{"toolexec.event.*.completed.>", []string{"acme/a-1", "globex/g-1"}, ""},
		{"toolexec.event.*.indeterminate.>", []string{"globex/g-2"}, ""},
		{"toolexec.event.globex.>", []string{"globex/g-1", "globex/g-2"}, ""},
		{wire.AnswerFilter("globex", "book", "run-1", "g-1"), []string{"globex/g-1"}, ""},
		{"toolexec.event.*.*.*.*.a-1", []string{"acme/a-1"}, ""},
		{"toolexec.event.initech.>", nil, ""},
		{">", nil, bus.HistoryForbidden},
		{"toolexec.>", nil, bus.HistoryForbidden},
		{"toolexec.call.acme.>", nil, bus.HistoryForbidden},
		{"toolexec.history.acme", nil, bus.HistoryForbidden},
		{"toolexec.admin.history", nil, bus.HistoryForbidden},
		{"$JS.API.STREAM.MSG.GET.TOOLEXEC_EVENTS", nil, bus.HistoryForbidden},
		{"*.event.acme.>", nil, bus.HistoryForbidden},
		{"toolexec.event.*", nil, bus.HistoryBadRequest},
		{"toolexec.event.>.completed", nil, bus.HistoryBadRequest},
		{"toolexec.event.ac$me.>", nil, bus.HistoryBadRequest},
		{"toolexec.event.ac*.>", nil, bus.HistoryBadRequest},
		{"toolexec.event.*.completed.book.run-1.a-1.more", nil, bus.HistoryBadRequest},
		{"toolexec.event..>", nil, bus.HistoryBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			resp, err := c.AdminHistory(ctxT(t), bus.HistoryRequest{Filter: tt.give})
			if code := historyCode(err); code != tt.wantCode {
				t.Fatalf("AdminHistory: %v, want code %q", err, tt.wantCode)
			}
			if tt.wantCode == "" && !slices.Equal(pageIDs(t, resp), tt.wantIDs) {
				t.Errorf("page %v, want %v", pageIDs(t, resp), tt.wantIDs)
			}
		})
	}
	// No admin account configured: a header naming a tenant's account changes
	// nothing, as on the admin subjects.
	reply, err := h.nc.RequestMsg(adminRequest(t, "toolexec.event.*.completed.>", `{"acc":"acme"}`), natsWait)
	if err != nil {
		t.Fatal(err)
	}
	if code := replyCode(reply.Data); code != "" || !strings.Contains(string(reply.Data), "globex") {
		t.Errorf("a request naming acme, with no admin account configured: %s", reply.Data)
	}
}

// natsWait bounds a raw request in these tests.
const natsWait = 30 * time.Second

// TestAdminHistoryWatchAttach: in one account, a client reading through the
// service watches every tenant's completed answers from the start (through
// toolexec.admin.history), then live, and attaches to another tenant's answer.
func TestAdminHistoryWatchAttach(t *testing.T) {
	h := newHarness(t)
	h.serveHistory(t)
	c := h.serviceClient(t)
	storeTenants(t, h.js)
	ctx, stop := context.WithCancel(ctxT(t))
	defer stop()
	ch, err := c.Watch(ctx, "toolexec.event.*.completed.>", toolexec.WatchFromStart())
	if err != nil {
		t.Fatal(err)
	}
	storeAnswer(t, h.js, answerOf("initech", events.KindCompleted, "i-1"), wire.Structured)
	var got []string
	for _, a := range collect(t, ch, 3) {
		got = append(got, a.Tenant+"/"+a.CallID)
	}
	if want := []string{"acme/a-1", "globex/g-1", "initech/i-1"}; !slices.Equal(got, want) {
		t.Errorf("watch of every tenant delivered %v, want %v", got, want)
	}
	a, err := c.Attach(ctxT(t), "globex", "book", "run-1", "g-1")
	if err != nil || a.Tenant != "globex" || a.Outcome != "globex-g-1" {
		t.Errorf("Attach to globex's answer: %+v, %v", a, err)
	}
}

// TestAdminHistoryAccount: with an admin account configured, a request on
// toolexec.admin.history is served only when its Nats-Request-Info header
// names that account. In one account, as here, the header reaches the service
// as the client wrote it, which lets the test play the server's part
// (TestAdminHistoryAcrossAccounts has the server write it). Tenants' own
// history subjects are not checked.
func TestAdminHistoryAccount(t *testing.T) {
	h := newHarness(t)
	serveHistory(t, natstest.JetStream(t, natstest.Connect(t, h.srv)), bus.HistoryConfig{AdminAccount: "ADMIN"})
	c := h.serviceClient(t)
	storeTenants(t, h.js)
	refused := []struct{ name, info string }{
		{"no header", ""},
		{"another account", `{"acc":"acme","rtt":1000}`},
		{"no account named", `{"user":"admin"}`},
		{"the account in another case", `{"acc":"admin"}`},
		{"not JSON", `ADMIN`},
		{"the name elsewhere", `{"svc":"ADMIN","acc":"TOOLEXEC"}`},
		{"two accounts", `{"acc":"acme","acc":"ADMIN"}`},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			reply, err := h.nc.RequestMsg(adminRequest(t, "toolexec.event.>", tt.info), natsWait)
			if err != nil {
				t.Fatal(err)
			}
			if code := replyCode(reply.Data); code != bus.HistoryForbidden || strings.Contains(string(reply.Data), "toolexec.event.") {
				t.Errorf("reply %s, want %s and no event", reply.Data, bus.HistoryForbidden)
			}
		})
	}
	// The client sends no header: refused too, with a code to branch on, for
	// AdminHistory and for a Watch of every tenant; a tenant's own subject
	// still answers.
	if _, err := c.AdminHistory(ctxT(t), bus.HistoryRequest{}); historyCode(err) != bus.HistoryForbidden {
		t.Errorf("AdminHistory without the header: %v, want %s", err, bus.HistoryForbidden)
	}
	if _, err := c.Watch(ctxT(t), "toolexec.event.*.>", toolexec.WatchFromStart()); historyCode(err) != bus.HistoryForbidden {
		t.Errorf("Watch of every tenant without the header: %v, want %s", err, bus.HistoryForbidden)
	}
	if resp, err := c.History(ctxT(t), "globex", bus.HistoryRequest{}); err != nil || len(resp.Events) != 2 {
		t.Errorf("globex's own history: %v, %v; want its 2 events", resp, err)
	}

	reply, err := h.nc.RequestMsg(adminRequest(t, "toolexec.event.*.completed.>", `{"acc":"ADMIN","rtt":1000}`), natsWait)
	if err != nil {
		t.Fatal(err)
	}
	var resp bus.HistoryResponse
	if err := json.Unmarshal(reply.Data, &resp); err != nil || resp.Error != nil {
		t.Fatalf("a request from ADMIN: %s", reply.Data)
	}
	if got := pageIDs(t, &resp); !slices.Equal(got, []string{"acme/a-1", "globex/g-1"}) {
		t.Errorf("a request from ADMIN read %v", got)
	}
}

// TestAdminHistoryAcrossAccounts runs the history service in the executors'
// account of natstest.StartAccounts, where the server writes
// Nats-Request-Info: the operators (account ADMIN, no JetStream) watch every
// tenant's completed answers from the start and attach to globex's answer by
// its ids, through toolexec.admin.history without being told to; a tenant
// reaches no toolexec.admin.history, forged header or not; and a service
// configured for another admin account refuses ADMIN's requests.
func TestAdminHistoryAcrossAccounts(t *testing.T) {
	srv := natstest.StartAccounts(t, "acme", "globex")
	execJS := natstest.JetStream(t, natstest.ConnectAs(t, srv, "executor"))
	if err := bus.EnsureStreams(ctxT(t), execJS, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	serveHistory(t, execJS, bus.HistoryConfig{AdminAccount: natstest.AdminAccount})
	storeTenants(t, execJS)
	client := func(user string) (clienttest.Client, *nats.Conn) {
		nc := natstest.ConnectAs(t, srv, user)
		c := clienttest.New(t, nc)
		return c, nc
	}
	ops, _ := client("admin")
	acme, acmeNC := client("acme")

	t.Run("the operators watch every tenant", func(t *testing.T) {
		ctx, stop := context.WithCancel(ctxT(t))
		defer stop()
		ch, err := ops.Watch(ctx, "toolexec.event.*.completed.>", toolexec.WatchFromStart())
		if err != nil {
			t.Fatal(err)
		}
		storeAnswer(t, execJS, answerOf("acme", events.KindCompleted, "a-live"), wire.Structured)
		var got []string
		for _, a := range collect(t, ch, 3) {
			got = append(got, a.Tenant+"/"+a.CallID)
		}
		if want := []string{"acme/a-1", "globex/g-1", "acme/a-live"}; !slices.Equal(got, want) {
			t.Errorf("ADMIN's watch delivered %v, want %v", got, want)
		}
	})

	t.Run("the operators attach to a tenant's answer", func(t *testing.T) {
		a, err := ops.Attach(ctxT(t), "globex", "book", "run-1", "g-1")
		if err != nil || a.Tenant != "globex" || a.Outcome != "globex-g-1" {
			t.Errorf("ADMIN's Attach to globex's answer: %+v, %v", a, err)
		}
	})

	t.Run("a tenant reaches no operators' history", func(t *testing.T) {
		if _, err := acme.AdminHistory(ctxT(t), bus.HistoryRequest{}); !errors.Is(err, toolexec.ErrNoHistoryService) {
			t.Errorf("acme's AdminHistory: %v, want ErrNoHistoryService", err)
		}
		if _, err := acme.Watch(ctxT(t), "toolexec.event.*.>", toolexec.WatchFromStart()); !errors.Is(err, toolexec.ErrNoHistoryService) {
			t.Errorf("acme's watch of every tenant: %v, want ErrNoHistoryService", err)
		}
		if _, err := acme.Attach(ctxT(t), "globex", "book", "run-1", "g-1"); !errors.Is(err, toolexec.ErrNoHistoryService) {
			t.Errorf("acme's Attach to globex's answer: %v, want ErrNoHistoryService", err)
		}
		_, err := acmeNC.RequestMsg(adminRequest(t, "toolexec.event.globex.>", `{"acc":"ADMIN"}`), natsWait)
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("acme's request with a forged header: %v, want no responders", err)
		}
		// Its own history still works, and holds its own events only.
		resp, err := acme.History(ctxT(t), "acme", bus.HistoryRequest{})
		if err != nil || !slices.Equal(pageIDs(t, resp), []string{"acme/a-1", "acme/a-live"}) {
			t.Errorf("acme's own history: %v, %v", resp, err)
		}
	})
}

// TestAdminHistoryAnotherAdminAccount: across accounts, where the server
// writes Nats-Request-Info, a service configured for another admin account
// refuses ADMIN's requests, and one from inside the executors' account
// (no header) is refused too.
func TestAdminHistoryAnotherAdminAccount(t *testing.T) {
	srv := natstest.StartAccounts(t, "acme")
	execJS := natstest.JetStream(t, natstest.ConnectAs(t, srv, "executor"))
	if err := bus.EnsureStreams(ctxT(t), execJS, bus.StreamsConfig{}); err != nil {
		t.Fatal(err)
	}
	serveHistory(t, execJS, bus.HistoryConfig{AdminAccount: "OPS"})
	storeTenants(t, execJS)
	for _, user := range []string{"admin", "executor"} {
		c := clienttest.New(t, natstest.ConnectAs(t, srv, user))
		resp, err := c.AdminHistory(ctxT(t), bus.HistoryRequest{})
		if historyCode(err) != bus.HistoryForbidden || resp != nil {
			t.Errorf("%s's request to a service for OPS: %v, %v; want %s", user, resp, err, bus.HistoryForbidden)
		}
	}
}
