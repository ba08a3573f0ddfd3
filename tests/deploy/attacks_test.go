package deploy_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

// An attack is one way tenant acme went, or tried to go, past the fences of a
// server configuration. It starts that configuration (l) with three executors,
// books one flight for acme and one for globex, plays the attack, and reports
// whether it landed: whether the server let through what the fence is there
// to stop. Whatever the answer, no booking may have run twice and both
// bookings' records must have survived (acme and globex book again and are
// answered from them), and the executors must have met no refusal (on
// accounts.conf; see layout.calm).
type attack func(t *testing.T, l layout) (landed bool)

// attacks are the holes found in the single-account file, each played against
// deploy/accounts.conf, where it must not land, and against that old file
// (testdata/tenants.conf), where it must: the scenario shows the hole, and the
// new file closes it.
//
// The other fences tried in this package (snooping on _INBOX.> or $JS.>,
// publishing on another tenant's call subject, the JetStream API requests that
// read streams whole, admin requests from a tenant) are not attacks on the old
// file: its allow lists refused each of them too, as its own test showed, so
// they are played against accounts.conf only; so are those around the
// workers (workers_test.go), which the old file had none of. A forged Nats-Request-Info
// header cannot be played against the old file either: nothing crosses an
// import in one account, and its executors check no header.
var attacks = []struct {
	name string
	run  attack
}{
	{"push consumer delivering into the admin queue", pushIntoAdmin},
	{"pull whose reply is the admin service", pullIntoAdmin},
	{"call whose reply is another tenant's answer", callReplyOnAnswer},
	{"consumer create whose reply is another tenant's answer", apiReplyOnAnswer},
	{"call whose reply is another tenant's call", callReplyOnCall},
	{"pull from another's consumer", pullFromLeakedConsumer},
}

func TestAttacks(t *testing.T) {
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			t.Run("accounts.conf", func(t *testing.T) {
				if a.run(t, accountsLayout) {
					t.Error("the attack landed")
				}
			})
			t.Run("old tenants.conf", func(t *testing.T) {
				if !a.run(t, allowListLayout) {
					t.Error("the attack did not land on the old file: the scenario no longer shows the hole it is about")
				}
			})
		})
	}
}

// stage starts l and makes the bookings an attack is played around.
func stage(t *testing.T, l layout) (e *env, acme, globex *conn, b bookings) {
	t.Helper()
	e = newEnv(t, l)
	acme, globex = e.as(t, "acme"), e.as(t, "globex")
	return e, acme, globex, e.book(t, acme, globex)
}

// aftermath checks what every attack leaves behind: no booking twice, both
// records alive, no refusal met by an executor where the layout is calm.
func aftermath(t *testing.T, e *env, acme, globex *conn, b bookings) {
	t.Helper()
	e.rebook(t, acme, globex, b, 1)
	if e.calm {
		e.noErrors(t)
	}
}

// consumerCreate is acme's request for a consumer named name on
// TOOLEXEC_EVENTS, filtered on acme's own events (the old file let acme
// publish exactly this subject), with extra members in its config.
func consumerCreate(name, extra string) (subject string, body []byte) {
	subject = "$JS.API.CONSUMER.CREATE.TOOLEXEC_EVENTS." + name + ".toolexec.event.acme.>"
	body = []byte(`{"stream_name":"TOOLEXEC_EVENTS","config":{"name":"` + name +
		`","filter_subject":"toolexec.event.acme.>","deliver_policy":"all","ack_policy":"none"` + extra + `}}`)
	return subject, body
}

// deliveredToAdmin reports whether a message reached the admin subjects, as the
// executors' spy subscription sees them. What arrives is one of acme's stored
// answers: a CloudEvent whose tenant member a lax reading (encoding/json
// without DisallowUnknownFields, the admin service's before it was made
// strict) takes for a forget request's, which is how the executors came to
// forget acme.
func deliveredToAdmin(t *testing.T, spy *nats.Subscription) bool {
	t.Helper()
	m, err := spy.NextMsg(settle)
	if errors.Is(err, nats.ErrTimeout) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	var lax admin.ForgetRequest
	if err := json.Unmarshal(m.Data, &lax); err != nil || lax.Tenant != "acme" {
		t.Errorf("a lax reading of what reached %s gives %+v, %v; want a forget of acme", m.Subject, lax, err)
	}
	t.Logf("on %s: %.120s...; read laxly, a forget of %q", m.Subject, m.Data, lax.Tenant)
	return true
}

// pushIntoAdmin: acme creates a push consumer of its own answers whose deliver
// subject is the executors' admin queue.
func pushIntoAdmin(t *testing.T, l layout) bool {
	e, acme, globex, b := stage(t, l)
	spy := e.view.subscribe(t, admin.Subjects)
	subject, body := consumerCreate("x1", `,"deliver_subject":"`+admin.ForgetSubject+`","deliver_group":"`+admin.DefaultQueue+`"`)
	reply, err := acme.nc.Request(subject, body, waitLong)
	if err != nil {
		t.Fatalf("acme: consumer create: %v", err)
	}
	t.Logf("acme's consumer create was answered %s", reply.Data)
	landed := deliveredToAdmin(t, spy)
	aftermath(t, e, acme, globex, b)
	return landed
}

// pullIntoAdmin: acme creates a pull consumer of its own answers and pulls
// from it with the admin service as the reply subject: the one-shot variant.
func pullIntoAdmin(t *testing.T, l layout) bool {
	e, acme, globex, b := stage(t, l)
	spy := e.view.subscribe(t, admin.Subjects)
	subject, body := consumerCreate("x2", "")
	reply, err := acme.nc.Request(subject, body, waitLong)
	if err != nil {
		t.Fatalf("acme: consumer create: %v", err)
	}
	t.Logf("acme's consumer create was answered %s", reply.Data)
	pull := &nats.Msg{Subject: "$JS.API.CONSUMER.MSG.NEXT.TOOLEXEC_EVENTS.x2", Reply: admin.ForgetSubject, Data: []byte(`{"batch":1}`)}
	if err := acme.nc.PublishMsg(pull); err != nil {
		t.Fatal(err)
	}
	landed := deliveredToAdmin(t, spy)
	aftermath(t, e, acme, globex, b)
	return landed
}

// publishCall publishes acme's echo call callID with reply as its reply
// subject, and waits for its answer: by then the PubAck has been sent.
func publishCall(t *testing.T, acme *conn, callID, reply string) {
	t.Helper()
	cl := call("acme", "echo", "run-1", callID, `{}`)
	answer := acme.subscribe(t, wire.AnswerFilter(cl.Tenant, cl.Tool, cl.RunID, cl.CallID))
	data, err := wire.CallJSON(cl)
	if err != nil {
		t.Fatal(err)
	}
	msg := wire.StructuredMsg(wire.CallSubject(cl.Tenant, cl.Tool, cl.CallID), data)
	msg.Reply = reply
	if err := acme.nc.PublishMsg(msg); err != nil {
		t.Fatal(err)
	}
	if _, err := answer.NextMsg(waitLong); err != nil {
		t.Fatalf("acme: no answer to its call %s: %v", callID, err)
	}
}

// callReplyOnAnswer: acme publishes a call of its own whose reply subject is
// an answer subject of globex's. JetStream sends its PubAck there.
func callReplyOnAnswer(t *testing.T, l layout) bool {
	return replyOnAnswer(t, l, func(t *testing.T, acme *conn, target string) {
		publishCall(t, acme, "a-echo-r", target)
	})
}

// apiReplyOnAnswer: acme sends a consumer create (a subject it may publish in
// the old file) whose reply subject is an answer subject of globex's. The
// JetStream API sends its reply there.
func apiReplyOnAnswer(t *testing.T, l layout) bool {
	return replyOnAnswer(t, l, func(t *testing.T, acme *conn, target string) {
		subject, body := consumerCreate("x4", "")
		if err := acme.nc.PublishMsg(&nats.Msg{Subject: subject, Reply: target, Data: body}); err != nil {
			t.Fatal(err)
		}
		// The same request with a reply of its own: once it is answered, the
		// first has been handled.
		subject, body = consumerCreate("x5", "")
		if _, err := acme.nc.Request(subject, body, waitLong); err != nil {
			t.Fatalf("acme: consumer create: %v", err)
		}
	})
}

// replyOnAnswer plays an attack that aims a reply at globex's answer subject
// for a call globex has not made yet (send does it), then has globex make that
// call. Where the attack lands, the reply is stored in TOOLEXEC_EVENTS first,
// and every later read of the stream for that call (an Attach, a caller that
// restarted) finds it instead of the answer: "malformed answer:
// not_cloudevent".
func replyOnAnswer(t *testing.T, l layout, send func(t *testing.T, acme *conn, target string)) bool {
	e, acme, globex, b := stage(t, l)
	cl := call("globex", "book", "run-2", "g-book-2", `{"flight":"LH401"}`)
	target := wire.EventSubject(cl.Tenant, events.KindCompleted, cl.Tool, cl.RunID, cl.CallID)
	send(t, acme, target)
	landed := wait.Until(settle, func() bool { return e.stored(t, wire.EventStream, target) > 0 })

	// globex's call is answered all the same: Call subscribes before it
	// publishes and takes the live answer.
	answer := mustCall(t, globex, cl, events.KindCompleted)
	if answer.Outcome != "PNR-LH401" {
		t.Errorf("globex's call answered %+v", answer)
	}
	if landed {
		// The first event stored for globex's call is the attacker's reply: every
		// later read of the stream for that call (an Attach, a caller that
		// restarted) finds it instead of the answer.
		first, err := e.firstStored(t, target)
		t.Logf("the stream holds first for globex's call: %+v, %v", first, err)
		if err == nil {
			t.Errorf("the first event stored for globex's call decodes as an answer (%+v); want the stray reply", first)
		}
		// globex's own Attach, where it has JetStream (the old file), finds no
		// answer either: its permissions let it make consumers, not get messages.
		short, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if a, err := globex.client.Attach(short, cl.Tenant, cl.Tool, cl.RunID, cl.CallID); err == nil {
			t.Errorf("globex: Attach = %+v, want an error", a)
		}
	} else {
		// Reading the stored answer, as the executors do for an attach.
		stored, err := e.view.client.Attach(ctxT(t, waitLong), cl.Tenant, cl.Tool, cl.RunID, cl.CallID)
		if err != nil || stored.Kind != events.KindCompleted || stored.Outcome != answer.Outcome {
			t.Errorf("reading globex's call from the stream: %+v, %v; want its answer", stored, err)
		}
	}
	aftermath(t, e, acme, globex, b)
	return landed
}

// callReplyOnCall: acme publishes a call of its own whose reply subject is
// globex's call subject. JetStream's PubAck lands in TOOLEXEC_CALLS as a call
// of globex's, which the executors answer rejected on globex's subjects, under
// the call id of that subject: globex is sent an answer to a call it never
// made.
func callReplyOnCall(t *testing.T, l layout) bool {
	e, acme, globex, b := stage(t, l)
	rejected := globex.subscribe(t, wire.EventPrefix+"globex.rejected.>")
	before := e.lastSeq(t, wire.CallStream)
	publishCall(t, acme, "a-echo-c", wire.CallSubject("globex", "book", "pub-ack"))
	landed := wait.Until(settle, func() bool { return e.lastSeq(t, wire.CallStream) > before+1 })
	if landed {
		m, err := rejected.NextMsg(waitLong)
		if err != nil {
			t.Fatalf("globex: no answer to the PubAck filed as its call: %v", err)
		}
		a, err := wire.DecodeAnswer(m.Header, m.Data)
		t.Logf("globex was sent %+v, %v", a, err)
		if err != nil || a.Kind != events.KindRejected || a.CallID != "pub-ack" {
			t.Errorf("the PubAck filed as globex's call was answered %+v, %v; want a rejection under the call id of its subject", a, err)
		}
	} else {
		nothingOn(t, map[string]*nats.Subscription{"globex's rejections": rejected})
	}
	if n := e.down.count("echo/globex"); n != 0 {
		t.Errorf("globex's echo ran %d times; globex called none", n)
	}
	aftermath(t, e, acme, globex, b)
	return landed
}

// pullFromLeakedConsumer: an operator's consumer reads every event of
// TOOLEXEC_EVENTS (an export to an audit system, say), and acme learnt its
// name (from the monitoring page, a log line, a guess). acme pulls from it and
// reads globex's answers, call ids included. (Knowing another tenant's call
// ids gives no hold on its calls: see TestCallIDsAreTheTenantsOwn.)
func pullFromLeakedConsumer(t *testing.T, l layout) bool {
	e, acme, globex, b := stage(t, l)
	ctx := ctxT(t, waitLong)
	stream, err := e.view.js.Stream(ctx, wire.EventStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable: "audit-export", FilterSubject: wire.EventSubjects, AckPolicy: jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	}); err != nil {
		t.Fatalf("executor: the operators' consumer: %v", err)
	}
	inbox := acme.nc.NewInbox()
	got := acme.subscribe(t, inbox)
	if err := acme.nc.PublishRequest("$JS.API.CONSUMER.MSG.NEXT.TOOLEXEC_EVENTS.audit-export", inbox, []byte(`{"batch":10,"no_wait":true}`)); err != nil {
		t.Fatal(err)
	}
	landed := false
	for {
		m, err := got.NextMsg(settle)
		if err != nil {
			break
		}
		if strings.HasPrefix(m.Subject, wire.EventPrefix+"globex.") {
			t.Logf("acme read globex's %s", m.Subject)
			landed = true
			continue
		}
		t.Logf("acme was answered %s: %s", m.Subject, m.Data)
	}
	aftermath(t, e, acme, globex, b)
	return landed
}
