package bus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/dispatch"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
)

// countingDispatcher counts the calls that reach the dispatcher.
type countingDispatcher struct {
	d     dispatch.Runner
	calls atomic.Int64
}

func (c *countingDispatcher) Run(ctx context.Context, call events.Call) (dispatch.Result, error) {
	c.calls.Add(1)
	return c.d.Run(ctx, call)
}

func structuredMsg(subject, payload string) *nats.Msg {
	return &nats.Msg{Subject: subject, Header: nats.Header{"Content-Type": {"application/cloudevents+json"}}, Data: []byte(payload)}
}

func binaryMsg(subject, payload string, kv ...string) *nats.Msg {
	h := nats.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return &nats.Msg{Subject: subject, Header: h, Data: []byte(payload)}
}

// event returns a structured call event as JSON with the given top-level members
// replaced (a nil value removes the member).
func event(over map[string]any) string {
	m := map[string]any{
		"specversion": "1.0", "id": "c1", "source": "/agent", "type": wire.CallType,
		"subject": "book", "tenant": "acme", "runid": "r1", "datacontenttype": "application/json",
		"data": map[string]any{"arguments": map[string]any{"flight": "LH1"}},
	}
	for k, v := range over {
		if v == nil {
			delete(m, k)
			continue
		}
		m[k] = v
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// TestMalformedCallsAreRejectedOnce publishes a table of malformed messages.
// Each gets a rejected answer with the right code, addressed to the caller where
// the message allows it; none is redelivered, none reaches a claim or a body.
func TestMalformedCallsAreRejectedOnce(t *testing.T) {
	h := newHarness(t)
	var entered atomic.Int64
	reg := registry(t, bookTool(t, "book", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		entered.Add(1)
		return "booked", nil
	}))

	// The dispatcher is wrapped to count what reaches it: bus-level rejections
	// never do.
	var cd *countingDispatcher
	wk := h.startWorkerWith(t, reg, bus.WorkerConfig{MaxMessageBytes: 4096}, 0, func(d dispatch.Runner) dispatch.Runner {
		cd = &countingDispatcher{d: d}
		return cd
	})
	w := wk.w

	// subj is the subject of call id of tool book. A rejection is addressed to
	// the call id of its subject when that is a valid token, else to the one
	// the message carries, else to the stand-in. noID returns an id that is no
	// valid token, a new one each time: the stream keeps one message per
	// subject, and a rejected one leaves it only after its answer is stored.
	subj := func(id string) string { return "toolexec.call.acme.book." + id }
	var noIDs int
	noID := func() string { noIDs++; return fmt.Sprintf("c%%%d", noIDs) }
	big := strings.Repeat("x", 5000)
	tests := []struct {
		name       string
		msg        *nats.Msg
		wantCode   events.Code
		wantCallID string // "" means the stand-in
		wantRunID  string
		wantTool   string
		dispatched bool // the rejection comes from the dispatcher
	}{
		{name: "not JSON", msg: structuredMsg(subj("c-nojson"), `{"specversion":"1.0",`), wantCode: events.CodeInvalidJSON, wantCallID: "c-nojson", wantTool: "book"},
		{name: "not JSON, no call id anywhere", msg: structuredMsg(subj(noID()), `{"specversion":"1.0",`), wantCode: events.CodeInvalidJSON, wantTool: "book"},
		{name: "JSON array", msg: structuredMsg(subj(noID()), `[1,2,3]`), wantCode: events.CodeNotCloudEvent, wantTool: "book"},
		{name: "JSON but no specversion", msg: structuredMsg(subj(noID()), `{"id":"c-nospec","runid":"r1"}`), wantCode: events.CodeNotCloudEvent, wantCallID: "c-nospec", wantRunID: "r1", wantTool: "book"},
		{name: "specversion 0.3", msg: structuredMsg(subj("c-03"), event(map[string]any{"specversion": "0.3", "id": "c-03"})), wantCode: events.CodeBadSpecVersion, wantCallID: "c-03", wantRunID: "r1", wantTool: "book"},
		{name: "specversion 2.0", msg: structuredMsg(subj("c-20"), event(map[string]any{"specversion": "2.0", "id": "c-20"})), wantCode: events.CodeBadSpecVersion, wantCallID: "c-20", wantRunID: "r1", wantTool: "book"},
		{name: "no id", msg: structuredMsg(subj("c-noid"), event(map[string]any{"id": nil})), wantCode: events.CodeMissingAttribute, wantCallID: "c-noid", wantRunID: "r1", wantTool: "book"},
		{name: "no id anywhere", msg: structuredMsg(subj(noID()), event(map[string]any{"id": nil})), wantCode: events.CodeMissingAttribute, wantRunID: "r1", wantTool: "book"},
		{name: "no source", msg: structuredMsg(subj("c-nosrc"), event(map[string]any{"source": nil, "id": "c-nosrc"})), wantCode: events.CodeMissingAttribute, wantCallID: "c-nosrc", wantRunID: "r1", wantTool: "book"},
		{name: "no type", msg: structuredMsg(subj("c-notype"), event(map[string]any{"type": nil, "id": "c-notype"})), wantCode: events.CodeMissingAttribute, wantCallID: "c-notype", wantRunID: "r1", wantTool: "book"},
		{name: "wrong type", msg: structuredMsg(subj("c-type"), event(map[string]any{"type": "com.example.other", "id": "c-type"})), wantCode: events.CodeBadType, wantCallID: "c-type", wantRunID: "r1", wantTool: "book"},
		{name: "no runid", msg: structuredMsg(subj("c-norun"), event(map[string]any{"runid": nil, "id": "c-norun"})), wantCode: events.CodeMissingAttribute, wantCallID: "c-norun", wantTool: "book"},
		{name: "id not a token", msg: structuredMsg(subj(noID()), event(map[string]any{"id": "a.b"})), wantCode: events.CodeBadToken, wantRunID: "r1", wantTool: "book"},
		{name: "runid not a token", msg: structuredMsg(subj("c-badrun"), event(map[string]any{"runid": "r 1", "id": "c-badrun"})), wantCode: events.CodeBadToken, wantCallID: "c-badrun", wantTool: "book"},
		{name: "tenant mismatch", msg: structuredMsg(subj("c-tenant"), event(map[string]any{"tenant": "globex", "id": "c-tenant"})), wantCode: events.CodeTenantMismatch, wantCallID: "c-tenant", wantRunID: "r1", wantTool: "book"},
		{name: "tool mismatch", msg: structuredMsg(subj("c-tool"), event(map[string]any{"subject": "cancel", "id": "c-tool"})), wantCode: events.CodeToolMismatch, wantCallID: "c-tool", wantRunID: "r1", wantTool: "book"},
		{name: "call id mismatch", msg: structuredMsg(subj("c-subject"), event(map[string]any{"id": "c-event"})), wantCode: events.CodeCallIDMismatch, wantCallID: "c-subject", wantRunID: "r1", wantTool: "book"},
		{name: "call id of the subject not a token", msg: structuredMsg(subj(noID()), event(map[string]any{"id": "c-event2"})), wantCode: events.CodeCallIDMismatch, wantCallID: "c-event2", wantRunID: "r1", wantTool: "book"},
		{name: "tool not a token", msg: structuredMsg("toolexec.call.acme.bo%ok.c-badtool", event(map[string]any{"subject": nil, "id": "c-badtool"})), wantCode: events.CodeBadToken, wantCallID: "c-badtool", wantRunID: "r1"},
		{name: "duplicate envelope member", msg: structuredMsg(subj("c-dup"), `{"specversion":"1.0","id":"c-dup","id":"c-dup2","runid":"r1"}`), wantCode: events.CodeDuplicateMember, wantCallID: "c-dup", wantRunID: "r1", wantTool: "book"},
		{name: "data not JSON content type", msg: structuredMsg(subj("c-ct"), event(map[string]any{"datacontenttype": "text/plain", "data": "hi", "id": "c-ct"})), wantCode: events.CodeBadContentType, wantCallID: "c-ct", wantRunID: "r1", wantTool: "book"},
		{name: "no data", msg: structuredMsg(subj("c-nodata"), event(map[string]any{"data": nil, "id": "c-nodata"})), wantCode: events.CodeBadData, wantCallID: "c-nodata", wantRunID: "r1", wantTool: "book"},
		{name: "arguments not an object", msg: structuredMsg(subj("c-arr"), event(map[string]any{"data": map[string]any{"arguments": []int{1}}, "id": "c-arr"})), wantCode: events.CodeArgumentsNotObject, wantCallID: "c-arr", wantRunID: "r1", wantTool: "book"},
		{name: "too large", msg: structuredMsg(subj(noID()), event(map[string]any{"id": "c-big", "data": map[string]any{"arguments": map[string]any{"flight": big}}})), wantCode: events.CodeTooLarge, wantCallID: "c-big", wantRunID: "r1", wantTool: "book"},
		{name: "binary without ce headers", msg: binaryMsg(subj(noID()), `{"arguments":{}}`, "Content-Type", "application/json"), wantCode: events.CodeNotCloudEvent, wantTool: "book"},
		{name: "binary bad percent-encoding", msg: binaryMsg(subj("c-pct"), `{"arguments":{"flight":"x"}}`, "ce-specversion", "1.0", "ce-id", "c-pct", "ce-source", "/a",
			"ce-type", wire.CallType, "ce-runid", "r1", "ce-tenant", "ac%ZZme"), wantCode: events.CodeNotCloudEvent, wantCallID: "c-pct", wantRunID: "r1", wantTool: "book"},
		{name: "binary data not JSON", msg: binaryMsg(subj("c-bin"), `not json`, "ce-specversion", "1.0", "ce-id", "c-bin", "ce-source", "/a",
			"ce-type", wire.CallType, "ce-runid", "r1", "Content-Type", "application/json"), wantCode: events.CodeBadData, wantCallID: "c-bin", wantRunID: "r1", wantTool: "book"},
		{name: "duplicate argument", msg: binaryMsg(subj("c-dupa"), `{"arguments":{"flight":"x","flight":"y"}}`, "ce-specversion", "1.0", "ce-id", "c-dupa", "ce-source", "/a",
			"ce-type", wire.CallType, "ce-runid", "r1", "Content-Type", "application/json"), wantCode: events.CodeDuplicateMember, wantCallID: "c-dupa", wantRunID: "r1", wantTool: "book", dispatched: true},
		{name: "unknown tool", msg: structuredMsg("toolexec.call.acme.cancel.c-unknown", event(map[string]any{"subject": "cancel", "id": "c-unknown"})), wantCode: events.CodeUnknownTool, wantCallID: "c-unknown", wantRunID: "r1", wantTool: "cancel", dispatched: true},
		{name: "schema violation", msg: structuredMsg(subj("c-schema"), event(map[string]any{"id": "c-schema", "data": map[string]any{"arguments": map[string]any{"flight": 5}}})), wantCode: events.CodeSchemaViolation, wantCallID: "c-schema", wantRunID: "r1", wantTool: "book", dispatched: true},
	}

	sub, err := h.nc.SubscribeSync(wire.EventSubject("acme", events.KindRejected, "*", "*", "*"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	var wantDispatched int64
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ack, err := h.js.PublishMsg(ctxT(t), tt.msg)
			if err != nil {
				t.Fatalf("publish: %v", err)
			}
			if tt.dispatched {
				wantDispatched++
			}
			m, err := sub.NextMsg(15 * time.Second)
			if err != nil {
				t.Fatalf("no rejection arrived: %v", err)
			}
			a := decodeMsg(t, m)
			if a.Kind != events.KindRejected || a.Code != tt.wantCode {
				t.Fatalf("answer %s/%s (%s), want rejected/%s", a.Kind, a.Code, a.Error, tt.wantCode)
			}
			wantCall := tt.wantCallID
			if wantCall == "" {
				wantCall = bus.StandInCallID(ack.Sequence)
			}
			if a.CallID != wantCall || a.RunID != tt.wantRunID || a.Tool != tt.wantTool {
				t.Errorf("addressed to call %q run %q tool %q, want %q, %q, %q", a.CallID, a.RunID, a.Tool, wantCall, tt.wantRunID, tt.wantTool)
			}
			wantSubject := wire.AnswerSubject(events.Answer{Kind: events.KindRejected, Tenant: "acme", Tool: tt.wantTool, RunID: tt.wantRunID, CallID: wantCall})
			if m.Subject != wantSubject {
				t.Errorf("answer subject %s, want %s", m.Subject, wantSubject)
			}
			if a.Error == "" {
				t.Error("rejection without an error message")
			}
			if got := cd.calls.Load(); got != wantDispatched {
				t.Errorf("dispatcher saw %d calls, want %d", got, wantDispatched)
			}
		})
	}

	// Subjects of other shapes, those of wire version 1 among them, reach no
	// stream: the publisher hears so at once.
	for _, subject := range []string{"toolexec.call.acme.book", "toolexec.call.acme", "toolexec.call.acme.book.c1.now"} {
		if _, err := h.js.PublishMsg(ctxT(t), structuredMsg(subject, event(nil))); !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Errorf("publishing on %s: %v, want no stream response", subject, err)
		}
	}

	// A subject with no valid tenant cannot be answered: terminated, silently.
	if _, err := h.js.PublishMsg(ctxT(t), structuredMsg("toolexec.call.ac%me.book.c1", event(nil))); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 10*time.Second, "the unaddressable call to be terminated", func() bool { return w.Stats().Unaddressable.Load() == 1 })

	info := consumerSettled(t, h.js)
	if info.NumRedelivered != 0 {
		t.Errorf("consumer redelivered %d messages", info.NumRedelivered)
	}
	if n := streamMsgs(t, h.js, wire.CallStream); n != 0 {
		t.Errorf("TOOLEXEC_CALLS still holds %d messages", n)
	}
	if got, want := w.Stats().Received.Load(), int64(len(tests)+1); got != want {
		t.Errorf("worker received %d messages, want %d (each once)", got, want)
	}
	if got := w.Stats().Rejected.Load(); got != int64(len(tests))-wantDispatched {
		t.Errorf("bus rejected %d, want %d", got, int64(len(tests))-wantDispatched)
	}
	if n := entered.Load(); n != 0 {
		t.Errorf("tool body entered %d times", n)
	}
	if n := len(eventSubjects(t, h.js, wire.EventSubjects)); n != len(tests) {
		t.Errorf("TOOLEXEC_EVENTS holds %d answers, want %d", n, len(tests))
	}
	// No claim was made: the bucket holds no record.
	kv, err := h.js.KeyValue(ctxT(t), "toolexec_idempotency")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.ListKeys(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	for k := range keys.Keys() {
		t.Errorf("the store holds key %s", k)
	}
	_ = keys.Stop()
}

// decodeMsg reads an answer from a message, failing the test if it is not one.
func decodeMsg(t *testing.T, m *nats.Msg) events.Answer {
	t.Helper()
	a, err := wire.DecodeAnswer(m.Header, m.Data)
	if err != nil {
		t.Fatalf("answer on %s: %v", m.Subject, err)
	}
	return a
}

// TestHostileAttributeIsAnsweredBriefly: a rejection does not echo a huge
// attribute back; the answer stays small and is stored.
func TestHostileAttributeIsAnsweredBriefly(t *testing.T) {
	h := newHarness(t)
	h.startWorker(t, registry(t, bookTool(t, "book", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "booked", nil
	})), bus.WorkerConfig{}, 0)
	sub, err := h.nc.SubscribeSync(wire.EventSubject("acme", events.KindRejected, "book", "r1", "c-hostile"))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	hostile := strings.Repeat("9", 200<<10)
	if _, err := h.js.PublishMsg(ctxT(t), structuredMsg("toolexec.call.acme.book.c-hostile", event(map[string]any{"id": "c-hostile", "time": hostile}))); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(15 * time.Second)
	if err != nil {
		t.Fatalf("no rejection: %v", err)
	}
	a := decodeMsg(t, m)
	if a.Code != events.CodeNotCloudEvent {
		t.Errorf("code %s, want not_cloudevent", a.Code)
	}
	if len(m.Data) > 16<<10 {
		t.Errorf("the rejection is %d bytes: it echoes the attribute", len(m.Data))
	}
}

// TestAnswerTooLargeForTheServer: an answer the server refuses (larger than its
// max_payload) is not retried for ever: the call is terminated and the outcome
// stays in the record.
func TestAnswerTooLargeForTheServer(t *testing.T) {
	h := newHarness(t, natstest.WithMaxPayload(16<<10))
	var entered atomic.Int64
	wk := h.startWorker(t, registry(t, bookTool(t, "book", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		entered.Add(1)
		return strings.Repeat("x", 20<<10), nil
	})), bus.WorkerConfig{}, 0)
	if _, err := h.client.Publish(ctxT(t), call("book", "r1", "big-1", `{"flight":"A"}`)); err != nil {
		t.Fatal(err)
	}
	info := consumerSettled(t, h.js)
	wait.Eventually(t, 10*time.Second, "the call to leave the stream", func() bool { return streamMsgs(t, h.js, wire.CallStream) == 0 })
	if info.NumRedelivered != 0 || wk.w.Stats().Received.Load() != 1 || entered.Load() != 1 {
		t.Errorf("redelivered %d, received %d, entered %d; want 0, 1, 1",
			info.NumRedelivered, wk.w.Stats().Received.Load(), entered.Load())
	}
	if wk.w.Stats().PublishRetries.Load() != 0 {
		t.Errorf("a refused answer was retried %d times", wk.w.Stats().PublishRetries.Load())
	}
}
