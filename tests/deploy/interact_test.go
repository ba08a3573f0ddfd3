package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/tool"
)

// askTool is a tool whose body asks its caller to confirm, as an upstream
// MCP server's elicitation does, reports progress on the way, and answers
// what the caller said.
func askTool(t *testing.T) *tool.Tool {
	t.Helper()
	tl, err := tool.New(tool.Spec{Name: "confirm", Timeout: 20 * time.Second},
		func(ctx context.Context, tc tool.Context, _ json.RawMessage) (string, error) {
			c := tool.CallerFrom(ctx)
			c.Notify("notifications/progress", json.RawMessage(`{"progress":1,"total":2,"message":"asking"}`))
			res, err := c.Ask(ctx, wire.MethodElicit, json.RawMessage(`{"message":"secret of `+tc.Tenant+`","requestedSchema":{"type":"object"}}`))
			if err != nil {
				return "", tool.NoEffect(err)
			}
			return string(res), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

func withTools(tools ...*tool.Tool) envOption {
	return func(e *env) { e.extra = append(e.extra, tools...) }
}

// TestInteractionsStayWithTheirTenant: the request the body of acme's call
// makes of its caller reaches acme alone, and only acme can take or answer
// it. globex, subscribed to everything its account can hear, hears neither
// the request nor the call's notes; knowing the call and interaction ids
// (leaked to it), it can take or answer nothing: acme's respond subject is
// not in its account, and its own respond subject with acme's call id
// reaches no executor. globex's own call with the same tool and call id is
// asked of globex, not of acme. acme and the operators (ADMIN) hear the
// call's notes; globex does not.
func TestInteractionsStayWithTheirTenant(t *testing.T) {
	e := newEnv(t, accountsLayout, withTools(askTool(t)))
	acme, globex := e.as(t, "acme"), e.as(t, "globex")
	ctx := ctxT(t, waitLong)

	var spied []string
	var mu sync.Mutex
	spy, err := globex.nc.Subscribe(">", func(m *nats.Msg) {
		mu.Lock()
		spied = append(spied, m.Subject+" "+string(m.Data))
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Unsubscribe()
	if err := globex.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	// The operators see every tenant's notes.
	adm := e.as(t, "admin")
	admNotes, err := adm.nc.SubscribeSync(wire.EventPrefix + "*.*.*.*.*.*")
	if err != nil {
		t.Fatal(err)
	}
	if err := adm.nc.Flush(); err != nil {
		t.Fatal(err)
	}

	const callID = "call_shared_0001"
	ix, err := acme.client.Interactions("acme", "confirm", callID)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	gix, err := globex.client.Interactions("globex", "confirm", callID)
	if err != nil {
		t.Fatal(err)
	}
	defer gix.Close()
	type answer struct {
		a   events.Answer
		err error
	}
	answers := make(chan answer, 2)
	call := func(c *conn, tenant string) {
		a, err := c.client.Call(ctx, events.Call{Tenant: tenant, Tool: "confirm", RunID: "run_1", CallID: callID,
			Source: "/test", Arguments: json.RawMessage(`{}`), Interactions: []string{wire.CanElicit}})
		answers <- answer{a, err}
	}
	go call(acme, "acme")
	var in toolexec.Interaction
	select {
	case in = <-ix.Asks():
	case <-ctx.Done():
		t.Fatal("acme was not asked")
	}
	if in.Method != wire.MethodElicit || !strings.Contains(string(in.Params), "secret of acme") {
		t.Fatalf("acme was asked %+v", in)
	}

	// acme, and the operators, hear the call's progress note.
	select {
	case n := <-ix.Notes():
		if n.Kind != wire.NoteProgress || n.Tenant != "acme" || n.Message != "asking" {
			t.Errorf("acme's note: %+v", n)
		}
	case <-ctx.Done():
		t.Fatal("acme heard no note")
	}
	if m, err := admNotes.NextMsg(waitLong); err != nil || !strings.HasPrefix(m.Subject, wire.EventPrefix+"acme.progress.confirm.") {
		t.Errorf("the operators' note: %v, %v", m, err)
	}

	// globex, with the ids in hand, tries to take and answer acme's request.
	forged, _ := json.Marshal(wire.Respond{ID: in.ID, Take: true})
	for _, subject := range []string{
		wire.RespondSubject("acme", "confirm", callID),   // acme's: not in globex's account
		wire.RespondSubject("globex", "confirm", callID), // globex's own, with acme's call id: no such call of globex's
	} {
		_, err := globex.nc.Request(subject, forged, settle)
		if !errors.Is(err, nats.ErrNoResponders) && !errors.Is(err, nats.ErrTimeout) {
			t.Errorf("globex's take on %s: %v; want no responders or no reply", subject, err)
		}
	}
	// acme takes it: nobody took it before.
	if err := ix.Take(ctx, in.ID); err != nil {
		t.Fatalf("acme's take: %v", err)
	}
	if err := ix.Take(ctx, in.ID); !errors.Is(err, toolexec.ErrInteractionTaken) {
		t.Errorf("a second take: %v; want ErrTaken", err)
	}

	// globex's own call of the same tool and call id is asked of globex.
	go call(globex, "globex")
	select {
	case g := <-gix.Asks():
		if !strings.Contains(string(g.Params), "secret of globex") {
			t.Errorf("globex was asked %s", g.Params)
		}
		if err := gix.Answer(ctx, g.ID, nil, &wire.RPCError{Code: -1, Message: "no"}); err != nil {
			t.Errorf("globex's refusal: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("globex was not asked about its own call")
	}
	select {
	case extra := <-ix.Asks():
		t.Errorf("acme heard another request: %+v", extra)
	case <-time.After(settle):
	}

	if err := ix.Answer(ctx, in.ID, json.RawMessage(`{"action":"accept","content":{"ok":true}}`), nil); err != nil {
		t.Fatalf("acme's answer: %v", err)
	}
	for range 2 {
		a := <-answers
		switch a.a.Tenant {
		case "acme":
			if a.err != nil || a.a.Kind != events.KindCompleted || a.a.Outcome != `{"action":"accept","content":{"ok":true}}` {
				t.Errorf("acme's call: %+v, %v", a.a, a.err)
			}
		case "globex":
			if a.a.Kind != events.KindFailed || a.a.Code != events.CodeNoEffect {
				t.Errorf("globex's refused call: %+v, %v", a.a, a.err)
			}
		default:
			t.Errorf("an answer: %+v, %v", a.a, a.err)
		}
	}
	if err := globex.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(settle)
	mu.Lock()
	defer mu.Unlock()
	for _, s := range spied {
		// (globex hears its own forged takes in its own account.)
		if strings.Contains(s, "acme") && !strings.HasSuffix(s, " "+string(forged)) {
			t.Errorf("globex heard %s", s)
		}
	}
}

// TestForeignInteractionImportsAreRefused: a tenant account that imports
// another's interaction or respond subjects, or every tenant's, makes the
// server refuse the whole configuration.
func TestForeignInteractionImportsAreRefused(t *testing.T) {
	setPasswords(t)
	const anchor = `{service: {account: TOOLEXEC, subject: "toolexec.history.acme"}}`
	for _, imp := range []string{
		`{stream: {account: TOOLEXEC, subject: "toolexec.interact.globex.>"}}`,
		`{stream: {account: TOOLEXEC, subject: "toolexec.interact.>"}}`,
		`{stream: {account: TOOLEXEC, subject: "toolexec.interact.*.>"}}`,
		`{service: {account: TOOLEXEC, subject: "toolexec.respond.globex.>"}}`,
		`{service: {account: TOOLEXEC, subject: "toolexec.respond.>"}}`,
		`{service: {account: TOOLEXEC, subject: "toolexec.interact.acme.>"}}`,
		`{stream: {account: TOOLEXEC, subject: "toolexec.respond.acme.>"}}`,
		`{stream: {account: TOOLEXEC, subject: "toolexec.event.*.*.*.*.*.*"}}`,
	} {
		conf := mutate(t, func(s string) string { return strings.Replace(s, anchor, anchor+"\n      "+imp, 1) })
		_, err := server.ProcessConfigFile(conf)
		if err == nil || !strings.Contains(err.Error(), "not authorized") {
			t.Errorf("acme importing %s: %v; want the configuration refused, import not authorized", imp, err)
		}
	}
}
