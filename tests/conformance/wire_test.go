package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

// settle is how long a test listens for a second answer that must not come.
const settle = 300 * time.Millisecond

// answersOf checks that TOOLEXEC_EVENTS holds exactly one answer for each of
// tenant's calls and nothing else for tenant, and returns the subject of each.
func answersOf(t *testing.T, tenant string, callIDs ...string) map[string]string {
	t.Helper()
	subjects := streamSubjects(t, eventStream, "toolexec.event."+tenant+".>")
	got := map[string]string{}
	for subj, n := range subjects {
		if n != 1 {
			t.Errorf("%s holds %d events, want 1", subj, n)
		}
		id := subj[strings.LastIndexByte(subj, '.')+1:]
		if prev, dup := got[id]; dup {
			t.Errorf("call %s has two answers: %s and %s", id, prev, subj)
		}
		got[id] = subj
	}
	for _, id := range callIDs {
		if _, ok := got[id]; !ok {
			t.Errorf("call %s has no answer in %s (have %v)", id, eventStream, subjects)
		}
	}
	if len(got) != len(callIDs) {
		t.Errorf("%s holds answers for %d calls of %s, want %d: %v", eventStream, len(got), tenant, len(callIDs), subjects)
	}
	return got
}

// checkDownstream checks the one request a call of book made: the method, the
// arguments as body, Idempotency-Key as `emitter key` derives it, the tenant,
// run and call, and the caller's trace.
func checkDownstream(t *testing.T, r request, c call, key string) {
	t.Helper()
	if r.Method != "POST" {
		t.Errorf("downstream method %s, want POST", r.Method)
	}
	var got, sent any
	if err := json.Unmarshal(r.Body, &got); err != nil {
		t.Errorf("downstream body is not JSON: %s", r.Body)
	}
	_ = json.Unmarshal([]byte(c.Args), &sent)
	if !reflect.DeepEqual(got, sent) {
		t.Errorf("downstream body %s, want the arguments %s", r.Body, c.Args)
	}
	if k := r.Header.Get("Idempotency-Key"); k != key {
		t.Errorf("downstream Idempotency-Key %q, want %q (emitter key)", k, key)
	}
	for name, v := range map[string]string{"Toolexec-Tenant": c.Tenant, "Toolexec-Run-Id": c.Run, "Toolexec-Call-Id": c.ID} {
		if got := r.Header.Get(name); got != v {
			t.Errorf("downstream %s %q, want %q", name, got, v)
		}
	}
	if c.TraceParent != "" {
		if tp := r.Header.Get("traceparent"); !sameTrace(tp, c.TraceParent) {
			t.Errorf("downstream traceparent %q, want the trace of %q", tp, c.TraceParent)
		}
	}
}

// TestStructuredMode publishes calls in structured mode with the Content-Type
// spellings a sender may use and checks each answer and downstream request.
func TestStructuredMode(t *testing.T) {
	variants := []struct {
		name   string
		header nats.Header
	}{
		{"plain", nats.Header{"Content-Type": {structured}}},
		{"charset", nats.Header{"Content-Type": {structured + "; charset=utf-8"}}},
		{"lower-case header name", nats.Header{"content-type": {structured}}},
		{"upper-case header and media type", nats.Header{"CONTENT-TYPE": {"Application/CloudEvents+JSON; Charset=UTF-8"}}},
		// The released NATS binding (1.0.2) predates headers: its messages are
		// the JSON event format alone.
		{"released binding 1.0.2, no Content-Type", nats.Header{}},
	}
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			tenant := fmt.Sprintf("structured-%d", i)
			c := newCall(tenant, "book", fmt.Sprintf("call-%d", i), fmt.Sprintf(`{"flight":"LH%d","seats":2,"request_id":"q-%d"}`, i, i))
			c.TraceParent = traceParent
			key := emitterKey(t, tenant, c.Run, "book", c.Args, "flight")
			sub := subscribe(t, "toolexec.event."+tenant+".*.book."+c.Run+"."+c.ID)

			publish(t, &nats.Msg{Subject: callSubject(tenant, "book", c.ID), Header: v.header, Data: c.JSON()})

			outcome := fmt.Sprintf(`{"booking":"LH%d"}`, i)
			checkAnswer(t, next(t, sub), want{Tenant: tenant, Kind: "completed", Tool: "book", Run: c.Run, Call: c.ID,
				Key: key, TraceParent: traceParent, Outcome: &outcome})
			quiet(t, sub, settle)
			reqs := env.down.forTenant(tenant)
			if len(reqs) != 1 {
				t.Fatalf("downstream saw %d requests, want 1", len(reqs))
			}
			checkDownstream(t, reqs[0], c, key)
			if keys := kvKeys(t, tenant); !reflect.DeepEqual(keys, []string{tenant + "." + key}) {
				t.Errorf("records %v, want one under %s.%s", keys, tenant, key)
			}
			answersOf(t, tenant, c.ID)
		})
	}
}

// TestBinaryMode publishes calls in binary mode: every attribute in a
// percent-encoded ce- header, the data as the payload, its media type in
// Content-Type. The answers come back in structured mode.
func TestBinaryMode(t *testing.T) {
	// The source, a URI-reference, holds '%' and a non-ASCII letter; the extra
	// extension a space, '"' and '%' as well: binary mode percent-encodes each.
	const (
		source  = "/agents/planner%2520one/zo%C3%AB"
		comment = "zo%C3%AB%20%22quoted%22%20100%25%20done"
	)
	variants := []struct {
		name    string
		headers func(tenant, id string) nats.Header
	}{
		{"lower-case names", func(tenant, id string) nats.Header {
			return nats.Header{
				"ce-specversion": {"1.0"}, "ce-id": {id}, "ce-source": {source}, "ce-type": {callType},
				"ce-subject": {"book"}, "ce-tenant": {tenant}, "ce-runid": {"r1"}, "ce-traceparent": {traceParent},
				"ce-comment": {comment}, "Content-Type": {"application/json"},
			}
		}},
		{"mixed-case names, needless escapes", func(tenant, id string) nats.Header {
			return nats.Header{
				"Ce-Specversion": {"1.0"}, "CE-ID": {id}, "Ce-Source": {source}, "ce-Type": {callType},
				"Ce-Subject": {"b%6Fok"}, "Ce-Tenant": {tenant}, "CE-RUNID": {"r%31"}, "Ce-Traceparent": {traceParent},
				"CE-Comment": {comment}, "content-type": {"application/json; charset=utf-8"},
			}
		}},
		{"quoted strings, as older senders wrote them", func(tenant, id string) nats.Header {
			return nats.Header{
				"ce-specversion": {`"1.0"`}, "ce-id": {`"` + id + `"`}, "ce-source": {source}, "ce-type": {`"` + callType + `"`},
				"ce-tenant": {tenant}, "ce-runid": {`"r1"`}, "ce-traceparent": {`"` + traceParent + `"`},
				"ce-comment": {`"a \"quoted\" remark"`}, "Content-Type": {"application/json"},
				// A message id, as callers of wire version 1 set one: harmless.
				"Nats-Msg-Id": {id},
			}
		}},
		{"no tenant or subject attribute, no Content-Type", func(_, id string) nats.Header {
			return nats.Header{
				"ce-specversion": {"1.0"}, "ce-id": {id}, "ce-source": {source}, "ce-type": {callType},
				"ce-runid": {"r1"}, "ce-traceparent": {traceParent},
			}
		}},
	}
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			tenant := fmt.Sprintf("binary-%d", i)
			c := newCall(tenant, "book", fmt.Sprintf("bin-%d", i), fmt.Sprintf(`{"flight":"BA%d","seats":1}`, i))
			c.TraceParent = traceParent
			key := emitterKey(t, tenant, c.Run, "book", c.Args, "flight")
			sub := subscribe(t, "toolexec.event."+tenant+".*.book."+c.Run+"."+c.ID)
			publish(t, &nats.Msg{Subject: callSubject(tenant, "book", c.ID), Header: v.headers(tenant, c.ID),
				Data: []byte(`{"arguments":` + c.Args + `}`)})

			outcome := fmt.Sprintf(`{"booking":"BA%d"}`, i)
			checkAnswer(t, next(t, sub), want{Tenant: tenant, Kind: "completed", Tool: "book", Run: c.Run, Call: c.ID,
				Key: key, TraceParent: traceParent, Outcome: &outcome})
			quiet(t, sub, settle)
			reqs := env.down.forTenant(tenant)
			if len(reqs) != 1 {
				t.Fatalf("downstream saw %d requests, want 1", len(reqs))
			}
			checkDownstream(t, reqs[0], c, key)
			answersOf(t, tenant, c.ID)
		})
	}
}

// TestAnswerKinds drives one call to each answer kind and checks each answer's
// subject, type, extensions and data, and what reached the downstream.
func TestAnswerKinds(t *testing.T) {
	const tenant = "kinds"
	run := func(t *testing.T, c call) *nats.Msg {
		t.Helper()
		sub := subscribe(t, "toolexec.event."+tenant+".*."+c.Tool+"."+c.Run+"."+c.ID)
		publish(t, c.Msg())
		got := next(t, sub)
		quiet(t, sub, settle)
		return got
	}
	requests := func(path string, key string) int {
		n := 0
		for _, r := range env.down.forTenant(tenant) {
			if r.Path == path && (key == "" || r.Header.Get("Idempotency-Key") == key) {
				n++
			}
		}
		return n
	}

	t.Run("completed then deduplicated", func(t *testing.T) {
		first := newCall(tenant, "book", "dd-1", `{"flight":"AF1","seats":2,"request_id":"a"}`)
		key := emitterKey(t, tenant, "r1", "book", first.Args, "flight")
		outcome := `{"booking":"AF1"}`
		checkAnswer(t, run(t, first), want{Tenant: tenant, Kind: "completed", Tool: "book", Run: "r1", Call: "dd-1", Key: key, Outcome: &outcome})
		// Another call id, another request_id (not a key argument), same seats.
		second := newCall(tenant, "book", "dd-2", `{"request_id":"b","seats":2,"flight":"AF1"}`)
		a := checkAnswer(t, run(t, second), want{Tenant: tenant, Kind: "deduplicated", Tool: "book", Run: "r1", Call: "dd-2", Key: key, Outcome: &outcome})
		if a.Header.Get("Nats-Msg-Id") == "" {
			t.Error("no Nats-Msg-Id")
		}
		if n := requests("/book", key); n != 1 {
			t.Errorf("downstream saw %d requests for the key, want 1", n)
		}
	})
	t.Run("indeterminate after the body failed", func(t *testing.T) {
		c := newCall(tenant, "book", "ind-1", `{"flight":"FAIL500","seats":1}`)
		key := emitterKey(t, tenant, "r1", "book", c.Args, "flight")
		checkAnswer(t, run(t, c), want{Tenant: tenant, Kind: "indeterminate", Tool: "book", Run: "r1", Call: "ind-1",
			Key: key, Reason: "body_failed", BodyEntered: ptr(true)})
		// A retry of the same effect is answered indeterminate again, not run.
		again := newCall(tenant, "book", "ind-2", `{"flight":"FAIL500","seats":1}`)
		checkAnswer(t, run(t, again), want{Tenant: tenant, Kind: "indeterminate", Tool: "book", Run: "r1", Call: "ind-2",
			Key: key, Reason: "body_failed", BodyEntered: ptr(true)})
		if n := requests("/book", key); n != 1 {
			t.Errorf("downstream saw %d requests for the key, want 1", n)
		}
	})
	t.Run("failed without effect", func(t *testing.T) {
		c := newCall(tenant, "book", "refused-1", `{"flight":"REFUSE409","seats":1}`)
		key := emitterKey(t, tenant, "r1", "book", c.Args, "flight")
		checkAnswer(t, run(t, c), want{Tenant: tenant, Kind: "failed", Tool: "book", Run: "r1", Call: "refused-1",
			Key: key, Code: "no_effect"})
		for _, k := range kvKeys(t, tenant) {
			if strings.HasSuffix(k, key) {
				t.Errorf("a refused call left a record %s", k)
			}
		}
	})
	t.Run("indeterminate after an outcome too large to record", func(t *testing.T) {
		// The effect landed but its outcome cannot be recorded: an effectful
		// tool's call is indeterminate, and a duplicate does not run it again.
		c := newCall(tenant, "report_once", "big-1", `{"id":"b1"}`)
		key := emitterKey(t, tenant, "r1", "report_once", c.Args, "id")
		checkAnswer(t, run(t, c), want{Tenant: tenant, Kind: "indeterminate", Tool: "report_once", Run: "r1", Call: "big-1",
			Key: key, Reason: "body_failed", BodyEntered: ptr(true)})
		again := newCall(tenant, "report_once", "big-2", `{"id":"b1"}`)
		checkAnswer(t, run(t, again), want{Tenant: tenant, Kind: "indeterminate", Tool: "report_once", Run: "r1", Call: "big-2",
			Key: key, Reason: "body_failed", BodyEntered: ptr(true)})
		if n := requests("/big", key); n != 1 {
			t.Errorf("downstream saw %d requests for the key, want 1", n)
		}
	})
	t.Run("indeterminate, key underivable", func(t *testing.T) {
		c := newCall(tenant, "book_loose", "loose-1", `{"request_id":"x"}`)
		checkAnswer(t, run(t, c), want{Tenant: tenant, Kind: "indeterminate", Tool: "book_loose", Run: "r1", Call: "loose-1",
			Reason: "key_underivable", BodyEntered: ptr(false)})
		for _, r := range env.down.forTenant(tenant) {
			if r.Header.Get("Toolexec-Call-Id") == "loose-1" {
				t.Error("the downstream was called for an effectful call without a key")
			}
		}
	})
	t.Run("read-only", func(t *testing.T) {
		c := newCall(tenant, "lookup", "ro-1", `{"flight":"AF1"}`)
		outcome := `{"fare":120}`
		checkAnswer(t, run(t, c), want{Tenant: tenant, Kind: "completed", Tool: "lookup", Run: "r1", Call: "ro-1", Outcome: &outcome})
		for _, r := range env.down.forTenant(tenant) {
			if r.Path == "/lookup" && r.Header.Get("Idempotency-Key") != "" {
				t.Errorf("a read-only tool sent Idempotency-Key %q", r.Header.Get("Idempotency-Key"))
			}
		}
	})
	answersOf(t, tenant, "dd-1", "dd-2", "ind-1", "ind-2", "refused-1", "big-1", "big-2", "loose-1", "ro-1")
}

// TestConcurrentCallsOneKey publishes calls with distinct call ids and one key
// at once: one is completed, the others deduplicated with its outcome, and the
// downstream sees one request.
func TestConcurrentCallsOneKey(t *testing.T) {
	const tenant, n = "concurrent", 12
	args := `{"flight":"KL9","seats":3}`
	key := emitterKey(t, tenant, "r1", "book", args, "flight")
	sub := subscribe(t, "toolexec.event."+tenant+".*.book.r1.*")
	var wg sync.WaitGroup
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("cc-%02d", i)
		wg.Go(func() {
			if _, err := env.js.PublishMsg(ctxT(t), newCall(tenant, "book", ids[i], args).Msg()); err != nil {
				t.Errorf("publish: %v", err)
			}
		})
	}
	wg.Wait()
	kinds := map[string]int{}
	outcome := `{"booking":"KL9"}`
	for range n {
		m := next(t, sub)
		kind := strings.Split(m.Subject, ".")[3]
		kinds[kind]++
		id := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		checkAnswer(t, m, want{Tenant: tenant, Kind: kind, Tool: "book", Run: "r1", Call: id, Key: key, Outcome: &outcome})
	}
	quiet(t, sub, settle)
	if kinds["completed"] != 1 || kinds["deduplicated"] != n-1 {
		t.Errorf("answers by kind %v, want 1 completed and %d deduplicated", kinds, n-1)
	}
	if got := len(env.down.forTenant(tenant)); got != 1 {
		t.Errorf("downstream saw %d requests, want 1", got)
	}
	answersOf(t, tenant, ids...)
}

// TestPublishedAgain: a call published again on its subject while it waits
// (its body runs) is refused, JetStream's "maximum messages per subject
// exceeded", and nothing is stored; once it is answered, a copy marked
// Toolexec-Repeat is acknowledged without being run or answered again. The
// downstream sees one request, the events stream holds one answer.
func TestPublishedAgain(t *testing.T) {
	const tenant = "again"
	c := newCall(tenant, "book", "again-1", `{"flight":"HOLD","seats":1}`)
	sub := subscribe(t, "toolexec.event."+tenant+".>")
	publish(t, c.Msg())
	wait.EventuallyNoError(t, answerWait, "downstream to see the held request", func() error {
		if n := len(env.down.forTenant(tenant)); n != 1 {
			return fmt.Errorf("downstream saw %d requests, want the held one", n)
		}
		return nil
	})
	_, err := env.js.PublishMsg(ctxT(t), c.Msg())
	var api *jetstream.APIError
	if !errors.As(err, &api) || api.ErrorCode != 10077 || !strings.Contains(api.Description, "maximum messages per subject") {
		t.Errorf("publishing the waiting call again: %v, want error 10077, maximum messages per subject exceeded", err)
	}
	env.down.release(tenant)
	key := emitterKey(t, tenant, "r1", "book", c.Args, "flight")
	outcome := `{"booking":"HOLD"}`
	checkAnswer(t, next(t, sub), want{Tenant: tenant, Kind: "completed", Tool: "book", Run: "r1", Call: c.ID, Key: key, Outcome: &outcome})

	// Marked as a repeat, once the first has left the stream.
	waitCallsSettled(t, callSubject(tenant, "book", c.ID))
	repeat := c.Msg()
	repeat.Header["Toolexec-Repeat"] = []string{"true"}
	publish(t, repeat)
	waitCallsSettled(t, callSubject(tenant, "book", c.ID))
	quiet(t, sub, settle)
	if got := len(env.down.forTenant(tenant)); got != 1 {
		t.Errorf("downstream saw %d requests, want 1", got)
	}
	answersOf(t, tenant, c.ID)
}

// TestRepeatOfAReadOnlyCall: a read-only tool runs for every call, so what
// keeps a copy sent again from running it twice is the Toolexec-Repeat
// header: with it, the copy of an answered call is acknowledged unrun; without
// it, it is a call like any other and runs (its answer, whose id is the
// first's, is not stored twice).
func TestRepeatOfAReadOnlyCall(t *testing.T) {
	const tenant = "readonly"
	c := newCall(tenant, "lookup", "look-1", `{"flight":"AZ1"}`)
	sub := subscribe(t, "toolexec.event."+tenant+".>")
	publish(t, c.Msg())
	outcome := `{"fare":120}`
	first := checkAnswer(t, next(t, sub), want{Tenant: tenant, Kind: "completed", Tool: "lookup", Run: "r1", Call: c.ID, Outcome: &outcome})
	requests := func(want int) {
		t.Helper()
		wait.EventuallyNoError(t, answerWait, "downstream to see the requests", func() error {
			if n := len(env.down.forTenant(tenant)); n != want {
				return fmt.Errorf("downstream saw %d requests, want %d", n, want)
			}
			return nil
		})
	}
	waitCallsSettled(t, callSubject(tenant, "lookup", c.ID))
	repeat := c.Msg()
	repeat.Header["Toolexec-Repeat"] = []string{"true"}
	publish(t, repeat)
	waitCallsSettled(t, callSubject(tenant, "lookup", c.ID))
	quiet(t, sub, settle)
	requests(1)

	publish(t, c.Msg())
	requests(2)
	waitCallsSettled(t, callSubject(tenant, "lookup", c.ID))
	if m, err := sub.NextMsg(settle); err == nil {
		// Heard live, though not stored again: the same event.
		if again := readAnswer(t, m); again.str(t, "id") != first.str(t, "id") {
			t.Errorf("the unmarked copy was answered with id %q, the first with %q", again.str(t, "id"), first.str(t, "id"))
		}
	}
	answersOf(t, tenant, c.ID)
}

// TestCallIDsOfTwoTenants: one call id, used by two tenants at once, names two
// calls. The first tenant's waits in its body while the second's is stored,
// run and answered; each PubAck is a call of its own (neither a duplicate),
// and each answer is its tenant's.
func TestCallIDsOfTwoTenants(t *testing.T) {
	const first, second, id = "ids-a", "ids-b", "same-call-id"
	held := newCall(first, "book", id, `{"flight":"HOLD","seats":2}`)
	other := newCall(second, "book", id, `{"flight":"OS5","seats":2}`)
	subA := subscribe(t, "toolexec.event."+first+".>")
	subB := subscribe(t, "toolexec.event."+second+".>")
	ackA := publish(t, held.Msg())
	wait.EventuallyNoError(t, answerWait, "downstream to see the held request", func() error {
		if n := len(env.down.forTenant(first)); n != 1 {
			return fmt.Errorf("downstream saw %d requests of %s, want the held one", n, first)
		}
		return nil
	})
	ackB := publish(t, other.Msg())
	if ackA.Duplicate || ackB.Duplicate || ackA.Sequence == ackB.Sequence {
		t.Errorf("PubAcks %+v and %+v: want two calls", ackA, ackB)
	}
	outcome := `{"booking":"OS5"}`
	checkAnswer(t, next(t, subB), want{Tenant: second, Kind: "completed", Tool: "book", Run: "r1", Call: id,
		Key: emitterKey(t, second, "r1", "book", other.Args, "flight"), Outcome: &outcome})
	quiet(t, subA, settle)
	env.down.release(first)
	outcome = `{"booking":"HOLD"}`
	checkAnswer(t, next(t, subA), want{Tenant: first, Kind: "completed", Tool: "book", Run: "r1", Call: id,
		Key: emitterKey(t, first, "r1", "book", held.Args, "flight"), Outcome: &outcome})
	answersOf(t, first, id)
	answersOf(t, second, id)
}

// waitCallsSettled waits until TOOLEXEC_CALLS_V2 holds nothing on subject: every
// call published there was acknowledged or terminated.
func waitCallsSettled(t *testing.T, subject string) {
	t.Helper()
	wait.EventuallyNoError(t, answerWait, "the calls on the subject to settle", func() error {
		if left := streamSubjects(t, callStream, subject); len(left) != 0 {
			return fmt.Errorf("%s still holds %v", callStream, left)
		}
		return nil
	})
}

// TestBinaryAnswers runs a second executor, on a server of its own, configured
// to answer in binary mode: the answer's attributes arrive in percent-encoded
// ce- headers, its data as the payload, with the values a structured answer
// would have carried.
func TestBinaryAnswers(t *testing.T) {
	s := natstest.Start(t)
	p, err := startExecutor(s.ClientURL(), t.TempDir(), env.toolsFile, "--binary-answers")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if status, err := p.stop(45 * time.Second); err != nil || status != 0 {
			t.Errorf("executor: status %d, %v\n%s", status, err, p.stderr)
		}
	})
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	const tenant = "binary-answers"
	c := newCall(tenant, "book", "ba-1", `{"flight":"OS5","seats":1}`)
	c.TraceParent = traceParent
	key := emitterKey(t, tenant, "r1", "book", c.Args, "flight")
	sub, err := nc.SubscribeSync("toolexec.event." + tenant + ".*.book.r1." + c.ID)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Msg()
	m.Header["Nats-Msg-Id"] = []string{c.ID}
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	got, err := sub.NextMsg(answerWait)
	if err != nil {
		t.Fatalf("no answer: %v\n%s", err, p.stderr)
	}
	if got.Subject != answerSubject(tenant, "completed", "book", "r1", c.ID) {
		t.Errorf("subject %q", got.Subject)
	}
	header := func(name string) string {
		for k, vs := range got.Header {
			if strings.EqualFold(k, name) && len(vs) == 1 {
				v, err := percentDecode(vs[0])
				if err != nil {
					t.Errorf("header %s %q: %v", k, vs[0], err)
				}
				return v
			}
		}
		return ""
	}
	for name, want := range map[string]string{
		"ce-specversion": "1.0", "ce-type": typePrefix + "completed", "ce-tenant": tenant, "ce-runid": "r1",
		"ce-callid": c.ID, "ce-idempotencykey": key, "Content-Type": "application/json",
	} {
		if v := header(name); v != want {
			t.Errorf("%s %q, want %q", name, v, want)
		}
	}
	if header("ce-id") == "" || header("ce-source") == "" || header("Nats-Msg-Id") == "" {
		t.Errorf("ce-id, ce-source or Nats-Msg-Id missing: %v", got.Header)
	}
	if tp := header("ce-traceparent"); !sameTrace(tp, traceParent) {
		t.Errorf("ce-traceparent %q", tp)
	}
	if err := validateData("completed", got.Data); err != nil {
		t.Errorf("data %s: %v", got.Data, err)
	}
	var data struct{ Tool, Outcome string }
	if err := json.Unmarshal(got.Data, &data); err != nil || data.Tool != "book" || data.Outcome != `{"booking":"OS5"}` {
		t.Errorf("data %s (%v)", got.Data, err)
	}
}

// percentDecode undoes the percent-encoding of a binary-mode header value.
func percentDecode(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", fmt.Errorf("%% at %d is not followed by two hex digits", i)
		}
		var v byte
		if _, err := fmt.Sscanf(s[i+1:i+3], "%02X", &v); err != nil {
			return "", fmt.Errorf("%% at %d: %v", i, err)
		}
		b.WriteByte(v)
		i += 2
	}
	return b.String(), nil
}
