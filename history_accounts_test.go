package toolexec_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore/memstore"
	"github.com/tesserix/toolexec/tool"
)

// TestHistoryAcrossAccounts runs an executor in account TOOLEXEC and tenants
// in accounts acme and globex that import only their own subjects: acme
// attaches to a call after its Call timed out and watches its history, neither
// through JetStream, which acme's account does not have; globex cannot read
// acme's answers through the history service, however it asks.
func TestHistoryAcrossAccounts(t *testing.T) {
	srv := natstest.StartAccounts(t, "acme", "globex")
	release := make(chan struct{})
	slow, err := tool.Typed(tool.Spec{
		Name:        "slow",
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}},
	}, func(ctx context.Context, tc tool.Context, a bookArgs) (string, error) {
		if a.Flight == "HOLD" {
			select {
			case <-release:
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}
		return tc.Tenant + "-" + a.Flight, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ex, err := toolexec.NewExecutor(ctx, natstest.ConnectAs(t, srv, "executor"), toolexec.ExecutorConfig{
		Tools: []*tool.Tool{slow}, Store: memstore.New(memstore.Config{}), Logger: quiet(), DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	t.Cleanup(func() {
		close(release)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Executor.Run: %v", err)
		}
		ex.Close()
	})

	acmeNC, globexNC := natstest.ConnectAs(t, srv, "acme"), natstest.ConnectAs(t, srv, "globex")
	acme, err := toolexec.NewClient(acmeNC, toolexec.WithLogger(quiet()), toolexec.WithDefaultRunID("run-a"))
	if err != nil {
		t.Fatal(err)
	}
	globex, err := toolexec.NewClient(globexNC, toolexec.WithLogger(quiet()), toolexec.WithDefaultRunID("run-g"))
	if err != nil {
		t.Fatal(err)
	}

	t.Run("acme cannot create a JetStream consumer", func(t *testing.T) {
		js, err := jetstream.New(acmeNC)
		if err != nil {
			t.Fatal(err)
		}
		_, err = js.OrderedConsumer(ctxFor(t, 5*time.Second), wire.EventStream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{wire.TenantEventSubjects("acme")},
		})
		if !errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			t.Fatalf("acme's consumer on TOOLEXEC_EVENTS: %v, want ErrJetStreamNotEnabledForAccount", err)
		}
	})

	// Calls from both tenants, interleaved, so that a leak between tenants would
	// show among acme's own events.
	var acmeCalls []string
	for i := range 3 {
		id := fmt.Sprintf("a-%d", i)
		if _, err := acme.Call(ctxFor(t, 30*time.Second), "acme", "slow", bookArgs{Flight: fmt.Sprint("F", i)}, toolexec.WithCallID(id)); err != nil {
			t.Fatalf("acme call %s: %v", id, err)
		}
		acmeCalls = append(acmeCalls, id)
		if _, err := globex.Call(ctxFor(t, 30*time.Second), "globex", "slow", bookArgs{Flight: fmt.Sprint("F", i)}, toolexec.WithCallID(fmt.Sprintf("g-%d", i))); err != nil {
			t.Fatalf("globex call: %v", err)
		}
	}

	t.Run("a call that timed out is attached to later", func(t *testing.T) {
		short, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		_, err := acme.Call(short, "acme", "slow", bookArgs{Flight: "HOLD"}, toolexec.WithCallID("a-hold"))
		var noAnswer *events.NoAnswerError
		if !errors.As(err, &noAnswer) {
			t.Fatalf("Call of a held tool: %v, want a *NoAnswerError", err)
		}
		// Still running: Attach waits for it, through the history service.
		attached := make(chan error, 1)
		go func() {
			res, err := acme.Attach(ctxFor(t, 30*time.Second), "acme", "slow", "run-a", "a-hold")
			if err == nil && res.Outcome != "acme-HOLD" {
				err = fmt.Errorf("outcome %q", res.Outcome)
			}
			attached <- err
		}()
		release <- struct{}{}
		if err := <-attached; err != nil {
			t.Fatalf("Attach while the call ran: %v", err)
		}
		// Stored by now: Attach finds it at once.
		res, err := acme.Attach(ctxFor(t, 30*time.Second), "acme", "slow", "run-a", "a-hold")
		if err != nil || res.Outcome != "acme-HOLD" || res.Kind != events.KindCompleted {
			t.Fatalf("Attach to the stored answer: %+v, %v", res, err)
		}
		acmeCalls = append(acmeCalls, "a-hold")
	})

	t.Run("acme watches its own events only", func(t *testing.T) {
		wctx, stop := context.WithCancel(ctxFor(t, 30*time.Second))
		defer stop()
		ch, err := acme.Watch(wctx, wire.TenantEventSubjects("acme"), toolexec.WatchFromStart())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := acme.Call(ctxFor(t, 30*time.Second), "acme", "slow", bookArgs{Flight: "LIVE"}, toolexec.WithCallID("a-live")); err != nil {
			t.Fatal(err)
		}
		want := append(acmeCalls, "a-live")
		for i, id := range want {
			a, ok := <-ch
			if !ok {
				t.Fatalf("the watch ended after %d events", i)
			}
			if a.Tenant != "acme" || a.CallID != id {
				t.Fatalf("event %d: %s's call %s, want acme's %s", i, a.Tenant, a.CallID, id)
			}
		}
	})

	t.Run("acme's watch of another tenant is refused", func(t *testing.T) {
		// Every tenant's history is the operators' (toolexec.admin.history),
		// which acme's account does not import.
		if _, err := acme.Watch(ctxFor(t, 5*time.Second), "toolexec.event.*.>", toolexec.WatchFromStart()); !errors.Is(err, toolexec.ErrNoHistoryService) {
			t.Errorf("watch of every tenant: %v, want ErrNoHistoryService", err)
		}
		_, err := acme.Watch(ctxFor(t, 5*time.Second), wire.TenantEventSubjects("globex"), toolexec.WatchFromStart())
		if !errors.Is(err, toolexec.ErrNoHistoryService) {
			t.Errorf("watch of globex: %v, want ErrNoHistoryService", err)
		}
	})

	t.Run("globex cannot read acme's answers", func(t *testing.T) {
		_, err := globex.Attach(ctxFor(t, 5*time.Second), "acme", "slow", "run-a", "a-0")
		if !errors.Is(err, toolexec.ErrNoHistoryService) {
			t.Errorf("globex's Attach to acme's call: %v, want ErrNoHistoryService", err)
		}
		// Asking its own history service for acme's subjects.
		bc, err := toolexec.NewClient(globexNC, toolexec.WithLogger(quiet()), toolexec.WithHistoryPath(toolexec.HistoryViaService))
		if err != nil {
			t.Fatal(err)
		}
		for _, filter := range []string{"toolexec.event.acme.>", "toolexec.event.*.>", ">", "toolexec.call.acme.>"} {
			_, err := bc.History(ctxFor(t, 5*time.Second), "globex", bus.HistoryRequest{Filter: filter})
			var he *bus.HistoryError
			if !errors.As(err, &he) || he.Code != bus.HistoryForbidden {
				t.Errorf("globex asking for %q: %v, want %s", filter, err, bus.HistoryForbidden)
			}
		}
		// Its own history holds its own calls only.
		resp, err := bc.History(ctxFor(t, 5*time.Second), "globex", bus.HistoryRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Events) != 3 {
			t.Errorf("globex's history holds %d events, want its 3", len(resp.Events))
		}
		for _, ev := range resp.Events {
			if !strings.HasPrefix(ev.Subject, "toolexec.event.globex.") {
				t.Errorf("globex's history holds %s", ev.Subject)
			}
		}
		// A request published straight to acme's history subject reaches nobody.
		_, err = globexNC.Request(wire.HistorySubject("acme"), []byte(`{}`), 2*time.Second)
		if !errors.Is(err, nats.ErrNoResponders) {
			t.Errorf("globex's request on acme's history subject: %v, want no responders", err)
		}
	})

}
