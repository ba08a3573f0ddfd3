package bus_test

import (
	"context"
	"encoding/json"
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
	"github.com/tesserix/toolexec/internal/testkit/clienttest"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/tool"
)

// serveHistory runs a history service on a connection of its own, closed when
// the test ends.
func (h *harness) serveHistory(t *testing.T) *bus.HistoryService {
	t.Helper()
	return serveHistory(t, natstest.JetStream(t, natstest.Connect(t, h.srv)), bus.HistoryConfig{})
}

// serveHistory runs a history service on js with cfg (and the tests' logger
// if cfg names none), closed when the test ends.
func serveHistory(t *testing.T, js jetstream.JetStream, cfg bus.HistoryConfig) *bus.HistoryService {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	s, err := bus.ServeHistory(js, cfg)
	if err != nil {
		t.Fatalf("ServeHistory: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("HistoryService.Close: %v", err)
		}
	})
	return s
}

// serviceClient returns a client that reads stored events through the history
// service only.
func (h *harness) serviceClient(t *testing.T) clienttest.Client {
	t.Helper()
	return clienttest.New(t, h.nc, toolexec.WithHistoryPath(toolexec.HistoryViaService))
}

// completed is the completed answer to acme's call callID of tool book in
// run-1, with outcome.
func completed(callID, outcome string) events.Answer {
	return events.Answer{
		Kind: events.KindCompleted, Tenant: "acme", Tool: "book", RunID: "run-1", CallID: callID,
		Outcome: outcome, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

// storeAnswer publishes a as an executor would, in mode, with its Nats-Msg-Id,
// and returns its stream sequence (a duplicate's is the first one's).
func storeAnswer(t *testing.T, js jetstream.JetStream, a events.Answer, mode wire.Mode) uint64 {
	t.Helper()
	var msg *nats.Msg
	if mode == wire.Structured {
		data, err := wire.AnswerJSON(a, "/test")
		if err != nil {
			t.Fatal(err)
		}
		msg = wire.StructuredMsg(wire.AnswerSubject(a), data)
	} else {
		e, err := wire.AnswerEvent(a, "/test")
		if err != nil {
			t.Fatal(err)
		}
		if msg, err = wire.NewMsg(wire.AnswerSubject(a), e, mode); err != nil {
			t.Fatal(err)
		}
	}
	msg.Header.Set(jetstream.MsgIDHeader, wire.MsgID(a))
	ack, err := js.PublishMsg(ctxT(t), msg)
	if err != nil {
		t.Fatalf("storing %s: %v", msg.Subject, err)
	}
	return ack.Sequence
}

// historyCode returns the code of err's *HistoryError, "" when it has none.
func historyCode(err error) string {
	var he *bus.HistoryError
	if errors.As(err, &he) {
		return he.Code
	}
	return ""
}

// TestHistoryAttach attaches through the history service to answers stored
// before, in both modes, and to one stored while Attach waits.
func TestHistoryAttach(t *testing.T) {
	for _, mode := range []wire.Mode{wire.Structured, wire.Binary} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			h.serveHistory(t)
			c := h.serviceClient(t)
			want := completed("stored-1", "PNR-1")
			want.Key = strings.Repeat("ab", 32)
			storeAnswer(t, h.js, want, mode)
			got, err := c.Attach(ctxT(t), "acme", "book", "run-1", "stored-1")
			if err != nil {
				t.Fatalf("Attach to a stored answer: %v", err)
			}
			if got.Kind != want.Kind || got.Outcome != want.Outcome || got.Key != want.Key || !got.Time.Equal(want.Time) {
				t.Errorf("Attach = %+v, want %+v", got, want)
			}
		})
	}
}

// TestHistoryAttachLive attaches before the answer exists: the service finds
// nothing, and the answer is heard when it is stored.
func TestHistoryAttachLive(t *testing.T) {
	h := newHarness(t)
	h.serveHistory(t)
	c := h.serviceClient(t)
	// A spy on the requests and the replies: once the service has answered
	// Attach's request, the answer can only come live.
	spy := natstest.Connect(t, h.srv)
	seen := make(chan *nats.Msg, 16)
	for _, subject := range []string{wire.HistorySubject("acme"), "_INBOX.>"} {
		sub, err := spy.ChanSubscribe(subject, seen)
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe()
	}
	if err := spy.Flush(); err != nil {
		t.Fatal(err)
	}
	attached := make(chan error, 1)
	var got events.Answer
	go func() {
		var err error
		got, err = c.Attach(ctxT(t), "acme", "book", "run-1", "live-1")
		attached <- err
	}()
	var reply string
	waiting := ctxT(t)
	for answered := false; !answered; {
		select {
		case m := <-seen:
			if m.Subject == wire.HistorySubject("acme") {
				reply = m.Reply
			} else if reply != "" && m.Subject == reply {
				if code := replyCode(m.Data); code != "" || !strings.Contains(string(m.Data), `"events":[]`) {
					t.Fatalf("the service's reply: %s", m.Data)
				}
				answered = true
			}
		case <-waiting.Done():
			t.Fatal("the service never answered Attach's request")
		}
	}
	storeAnswer(t, h.js, completed("live-1", "PNR-live"), wire.Structured)
	if err := <-attached; err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if got.CallID != "live-1" || got.Outcome != "PNR-live" {
		t.Errorf("Attach = %+v", got)
	}
}

// TestHistoryAttachErrors: a bad token, no answer before the context ends,
// and no service at all.
func TestHistoryAttachErrors(t *testing.T) {
	h := newHarness(t)
	c := h.serviceClient(t)
	if _, err := c.Attach(ctxT(t), "acme", "book", "run 1", "x"); !errors.Is(err, events.ErrInvalidToken) {
		t.Errorf("Attach with a bad run id: %v, want ErrInvalidToken", err)
	}
	if _, err := c.Attach(ctxT(t), "acme", "book", "run-1", "x"); !errors.Is(err, toolexec.ErrNoHistoryService) {
		t.Errorf("Attach with no service: %v, want ErrNoHistoryService", err)
	}
	if _, err := c.Watch(ctxT(t), "toolexec.event.acme.>", toolexec.WatchFromStart()); !errors.Is(err, toolexec.ErrNoHistoryService) {
		t.Errorf("Watch with no service: %v, want ErrNoHistoryService", err)
	}
	h.serveHistory(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Attach(ctx, "acme", "book", "run-1", "never"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Attach to an unknown call: %v, want DeadlineExceeded", err)
	}
}

// TestHistoryCallDuplicate calls again, marked as a repeat, with the id of a
// call answered before: the executor acknowledges it unrun, and Call finds
// the stored answer through the service.
func TestHistoryCallDuplicate(t *testing.T) {
	h := newHarness(t)
	h.serveHistory(t)
	reg := registry(t, bookTool(t, "book", tool.Effectful, func(context.Context, tool.Context, json.RawMessage) (string, error) {
		return "booked", nil
	}))
	h.startWorker(t, reg, bus.WorkerConfig{}, 0)
	c := h.serviceClient(t)
	first, err := c.Call(ctxT(t), call("book", "run-1", "dup-1", `{"flight":"LH1"}`))
	if err != nil {
		t.Fatal(err)
	}
	repeat := call("book", "run-1", "dup-1", `{"flight":"LH1"}`)
	repeat.Repeat = true
	again, err := c.Call(ctxT(t), repeat)
	if err != nil {
		t.Fatal(err)
	}
	if again.Kind != first.Kind || again.Outcome != "booked" || again.Key != first.Key {
		t.Errorf("second Call = %+v, want %+v", again, first)
	}
}

// collect reads n answers from ch, failing the test if the channel closes or
// the test's minute runs out first.
func collect(t *testing.T, ch <-chan events.Answer, n int) []events.Answer {
	t.Helper()
	var got []events.Answer
	timeout := time.After(time.Minute)
	for len(got) < n {
		select {
		case a, ok := <-ch:
			if !ok {
				t.Fatalf("the watch ended after %d of %d events", len(got), n)
			}
			got = append(got, a)
		case <-timeout:
			t.Fatalf("got %d of %d events", len(got), n)
		}
	}
	return got
}

func callIDs(as []events.Answer) []string {
	ids := make([]string, len(as))
	for i, a := range as {
		ids[i] = a.CallID
	}
	return ids
}

// TestHistoryWatch watches through the service from the start: more stored
// events than a page, then live ones, in order, each once, although one
// answer is published twice (the stream keeps one, the subscription hears
// both) and the events stored while the history was read are heard live too.
func TestHistoryWatch(t *testing.T) {
	h := newHarness(t)
	h.serveHistory(t)
	c := h.serviceClient(t)
	const stored = bus.MaxHistoryLimit + 44
	var want []string
	for i := range stored {
		id := fmt.Sprintf("s-%03d", i)
		storeAnswer(t, h.js, completed(id, "x"), wire.Mode(i%2)) // both modes
		want = append(want, id)
	}
	// Another tenant's event and an event of another tool, which the filter
	// leaves out.
	other := completed("other", "x")
	other.Tenant = "globex"
	storeAnswer(t, h.js, other, wire.Structured)
	cancelled := completed("cancel", "x")
	cancelled.Tool = "cancel"
	storeAnswer(t, h.js, cancelled, wire.Structured)

	ctx, stop := context.WithCancel(ctxT(t))
	defer stop()
	ch, err := c.Watch(ctx, "toolexec.event.acme.*.book.>", toolexec.WatchFromStart())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		id := fmt.Sprintf("l-%d", i)
		storeAnswer(t, h.js, completed(id, "x"), wire.Structured)
		want = append(want, id)
	}
	storeAnswer(t, h.js, completed("l-2", "x"), wire.Structured) // published again: dropped by the stream
	storeAnswer(t, h.js, completed("last", "x"), wire.Structured)
	want = append(want, "last")

	got := callIDs(collect(t, ch, len(want)))
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("watch delivered\n%v\nwant\n%v", got, want)
	}
	stop()
	for a := range ch {
		t.Errorf("after the last event: %s", a.CallID)
	}
}

// TestHistoryWatchSince watches through the service from a time between two
// stored events, and from now on (no history at all).
func TestHistoryWatchSince(t *testing.T) {
	h := newHarness(t)
	h.serveHistory(t)
	c := h.serviceClient(t)
	storeAnswer(t, h.js, completed("before", "x"), wire.Structured)
	s, err := h.js.Stream(ctxT(t), wire.EventStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctxT(t), 1)
	if err != nil {
		t.Fatal(err)
	}
	since := m.Time.Add(time.Nanosecond)
	storeAnswer(t, h.js, completed("after", "x"), wire.Structured)

	ch, err := c.Watch(ctxT(t), "toolexec.event.acme.>", toolexec.WatchSince(since))
	if err != nil {
		t.Fatal(err)
	}
	if got := collect(t, ch, 1); got[0].CallID != "after" {
		t.Errorf("watch since %v began with %s, want after", since, got[0].CallID)
	}
	ch, err = c.Watch(ctxT(t), "toolexec.event.acme.>")
	if err != nil {
		t.Fatal(err)
	}
	storeAnswer(t, h.js, completed("new", "x"), wire.Structured)
	if got := collect(t, ch, 1); got[0].CallID != "new" {
		t.Errorf("watch from now began with %s, want new", got[0].CallID)
	}
}

// TestHistoryWatchFilter: through the service, a filter must be an event
// filter whose tenant token is a tenant or a wildcard.
func TestHistoryWatchFilter(t *testing.T) {
	h := newHarness(t)
	h.serveHistory(t)
	c := h.serviceClient(t)
	for _, filter := range []string{"toolexec.event.ac*.>", "toolexec.event.ac$me.>", "toolexec.event.acme.comp*",
		"toolexec.call.acme.>", "toolexec.event.acme", "toolexec.event.*", "toolexec.event.acme.>.book"} {
		if _, err := c.Watch(ctxT(t), filter, toolexec.WatchFromStart()); !errors.Is(err, toolexec.ErrBadFilter) {
			t.Errorf("Watch(%q): %v, want ErrBadFilter", filter, err)
		}
	}
}

// TestHistoryPages reads the history page by page: the limit, the start after
// a sequence, since a time, and the end.
func TestHistoryPages(t *testing.T) {
	h := newHarness(t)
	h.serveHistory(t)
	c := h.serviceClient(t)
	var seqs []uint64
	for i := range 5 {
		seqs = append(seqs, storeAnswer(t, h.js, completed(fmt.Sprint("p-", i), "x"), wire.Structured))
	}
	tests := []struct {
		name     string
		req      bus.HistoryRequest
		wantSeqs []uint64
		wantMore bool
	}{
		{"first page", bus.HistoryRequest{Limit: 2}, seqs[:2], true},
		{"next page", bus.HistoryRequest{Limit: 2, AfterSeq: seqs[1]}, seqs[2:4], true},
		{"last page", bus.HistoryRequest{Limit: 2, AfterSeq: seqs[3]}, seqs[4:], false},
		{"exactly the rest", bus.HistoryRequest{Limit: 3, AfterSeq: seqs[1]}, seqs[2:], false},
		{"past the end", bus.HistoryRequest{AfterSeq: seqs[4]}, nil, false},
		{"largest sequence", bus.HistoryRequest{AfterSeq: ^uint64(0)}, nil, false},
		{"one call", bus.HistoryRequest{Filter: wire.AnswerFilter("acme", "book", "run-1", "p-3")}, seqs[3:4], false},
		{"since the far past", bus.HistoryRequest{Since: time.Unix(1, 0)}, seqs, false},
		{"since the future", bus.HistoryRequest{Since: time.Now().Add(time.Hour)}, nil, false},
		{"limit above the bound", bus.HistoryRequest{Limit: bus.MaxHistoryLimit + 1}, seqs, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := c.History(ctxT(t), "acme", tt.req)
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, ev := range resp.Events {
				got = append(got, ev.Seq)
				if ev.Omitted || len(ev.Data) == 0 || !strings.HasPrefix(ev.Subject, "toolexec.event.acme.completed.book.run-1.p-") {
					t.Errorf("event %d: %+v", ev.Seq, ev)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.wantSeqs) || resp.More != tt.wantMore {
				t.Errorf("got %v more %t, want %v more %t", got, resp.More, tt.wantSeqs, tt.wantMore)
			}
			if resp.LastSeq != seqs[4] {
				t.Errorf("last_seq %d, want %d", resp.LastSeq, seqs[4])
			}
		})
	}
}

// TestHistoryPageBytes: a page stops short of the connection's maximum
// payload, and an event that alone would not fit comes without its headers and
// data.
func TestHistoryPageBytes(t *testing.T) {
	const maxPayload = 16 << 10
	h := newHarness(t, natstest.WithMaxPayload(maxPayload))
	h.serveHistory(t)
	c := h.serviceClient(t)
	for i := range 6 {
		storeAnswer(t, h.js, completed(fmt.Sprint("b-", i), strings.Repeat("o", 3000)), wire.Binary)
	}
	huge := storeAnswer(t, h.js, completed("huge", strings.Repeat("o", 12000)), wire.Binary)
	var seqs []uint64
	var after uint64
	for {
		resp, err := c.History(ctxT(t), "acme", bus.HistoryRequest{AfterSeq: after})
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Events) == 0 {
			t.Fatal("an empty page")
		}
		if len(resp.Events) == 6 {
			t.Errorf("one page of %d bytes holds all six 3000-byte events", maxPayload)
		}
		for _, ev := range resp.Events {
			seqs = append(seqs, ev.Seq)
			if ev.Omitted != (ev.Seq == huge) {
				t.Errorf("event %d omitted %t", ev.Seq, ev.Omitted)
			}
			if ev.Omitted && (ev.Data != nil || ev.Header != nil) {
				t.Errorf("omitted event %d carries its data or headers", ev.Seq)
			}
			if !ev.Omitted && wire.Values(ev.Header, "ce-id") == nil {
				t.Errorf("event %d lacks its ce- headers: %v", ev.Seq, ev.Header)
			}
		}
		after = resp.Events[len(resp.Events)-1].Seq
		if !resp.More {
			break
		}
	}
	if fmt.Sprint(seqs) != "[1 2 3 4 5 6 7]" {
		t.Errorf("pages held %v", seqs)
	}
	// Attach cannot read the event that does not fit.
	if _, err := c.Attach(ctxT(t), "acme", "book", "run-1", "huge"); !errors.Is(err, toolexec.ErrBadAnswer) {
		t.Errorf("Attach to an event too large for a reply: %v, want ErrBadAnswer", err)
	}
}

// TestHistoryFence asks acme's history service for subjects beyond acme's
// events, and sends it requests it must not read: every one is refused with
// the code a client branches on, and a well-formed one still works.
func TestHistoryFence(t *testing.T) {
	h := newHarness(t)
	h.serveHistory(t)
	storeAnswer(t, h.js, completed("mine", "x"), wire.Structured)
	theirs := completed("theirs", "x")
	theirs.Tenant = "globex"
	storeAnswer(t, h.js, theirs, wire.Structured)

	filters := []struct {
		give string
		want string // code, "" for a page
	}{
		{"toolexec.event.acme.>", ""},
		{"toolexec.event.acme.*.book.*.mine", ""},
		{"toolexec.event.acme.completed.book.run-1.mine", ""},
		{"toolexec.event.globex.>", bus.HistoryForbidden},
		{"toolexec.event.*.>", bus.HistoryForbidden},
		{"toolexec.event.>", bus.HistoryForbidden},
		{">", bus.HistoryForbidden},
		{"*.*.acme.>", bus.HistoryForbidden},
		{"toolexec.call.acme.>", bus.HistoryForbidden},
		{"toolexec.admin.forget", bus.HistoryForbidden},
		{"toolexec.history.acme", bus.HistoryForbidden},
		{"$JS.API.STREAM.MSG.GET.TOOLEXEC_EVENTS", bus.HistoryForbidden},
		{"toolexec.event.acmeX.>", bus.HistoryForbidden},
		{"toolexec.event.acme*.>", bus.HistoryBadRequest},
		{"toolexec.event.acme.comp*", bus.HistoryBadRequest},
		{"toolexec.event.acme.>.book", bus.HistoryBadRequest},
		{"toolexec.event.acme..book", bus.HistoryBadRequest},
		{"toolexec.event.acme.", bus.HistoryBadRequest},
		{"toolexec.event.acme", bus.HistoryBadRequest},
		{"toolexec.event.acme.completed.book.run-1.mine.more", bus.HistoryBadRequest},
		{"toolexec.event.acme.completed.bo ok.>", bus.HistoryBadRequest},
		{"toolexec.event.acme.completed.b$ok.>", bus.HistoryBadRequest},
		{"toolexec.event.acme.completed.\tbook", bus.HistoryBadRequest},
	}
	for _, tt := range filters {
		req, err := json.Marshal(map[string]string{"filter": tt.give})
		if err != nil {
			t.Fatal(err)
		}
		resp := rawHistory(t, h.nc, wire.HistorySubject("acme"), req)
		if code := replyCode(resp); code != tt.want {
			t.Errorf("filter %q: code %q (%s), want %q", tt.give, code, resp, tt.want)
			continue
		}
		if tt.want == "" && (!strings.Contains(string(resp), `"subject":"toolexec.event.acme.completed.book.run-1.mine"`) ||
			strings.Contains(string(resp), "globex")) {
			t.Errorf("filter %q: %s", tt.give, resp)
		}
	}

	requests := []struct{ name, give string }{
		{"empty", ""},
		{"not JSON", "filter please"},
		{"null", "null"},
		{"an array", "[]"},
		{"a string", `"toolexec.event.acme.>"`},
		{"unknown member", `{"filter":"toolexec.event.acme.>","tenant":"globex"}`},
		{"member in another case", `{"Filter":"toolexec.event.acme.>"}`},
		{"member twice", `{"filter":"toolexec.event.acme.>","filter":"toolexec.event.globex.>"}`},
		{"trailing data", `{"filter":"toolexec.event.acme.>"} {}`},
		{"trailing garbage", `{}x`},
		{"filter not a string", `{"filter":1}`},
		{"negative limit", `{"limit":-1}`},
		{"fractional limit", `{"limit":1.5}`},
		{"negative sequence", `{"after_seq":-1}`},
		{"two starts", `{"after_seq":1,"since":"2026-01-01T00:00:00Z"}`},
		{"two starts, one of them zero", `{"after_seq":0,"since":"2026-01-01T00:00:00Z"}`},
		{"two starts, one of them the zero time", `{"after_seq":3,"since":"0001-01-01T00:00:00Z"}`},
		{"since not a time", `{"since":"yesterday"}`},
		{"invalid UTF-8", "{\"filter\":\"toolexec.event.acme.\xff\"}"},
		{"oversize", `{"filter":"toolexec.event.acme.>"` + strings.Repeat(" ", bus.MaxHistoryRequestBytes) + `}`},
	}
	for _, tt := range requests {
		resp := rawHistory(t, h.nc, wire.HistorySubject("acme"), []byte(tt.give))
		if code := replyCode(resp); code != bus.HistoryBadRequest {
			t.Errorf("%s: code %q (%s), want %s", tt.name, code, resp, bus.HistoryBadRequest)
		}
	}

	for _, tenant := range []string{"ac$me", "acme\u00e9", strings.Repeat("t", events.MaxTokenLen+1)} {
		subject := wire.HistoryPrefix + tenant
		if code := replyCode(rawHistory(t, h.nc, subject, []byte(`{}`))); code != bus.HistoryBadRequest {
			t.Errorf("tenant %q: code %q, want %s", tenant, code, bus.HistoryBadRequest)
		}
	}
}

// rawHistory sends data on subject and returns the reply's payload.
func rawHistory(t *testing.T, nc *nats.Conn, subject string, data []byte) []byte {
	t.Helper()
	m, err := nc.RequestWithContext(ctxT(t), subject, data)
	if err != nil {
		t.Fatalf("request on %s: %v", subject, err)
	}
	return m.Data
}

// replyCode returns the error code of a history reply, "" for a page.
func replyCode(reply []byte) string {
	var r struct {
		Error *struct{ Code string } `json:"error"`
	}
	if err := json.Unmarshal(reply, &r); err != nil {
		return "not JSON: " + err.Error()
	}
	if r.Error == nil {
		return ""
	}
	return r.Error.Code
}

// TestHistoryUnavailable: without the events stream the service answers
// unavailable; once closed, it answers nothing.
func TestHistoryUnavailable(t *testing.T) {
	srv := natstest.Start(t)
	nc := natstest.Connect(t, srv)
	s, err := bus.ServeHistory(natstest.JetStream(t, natstest.Connect(t, srv)), bus.HistoryConfig{Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	c := clienttest.New(t, nc, toolexec.WithHistoryPath(toolexec.HistoryViaService))
	if _, err := c.History(ctxT(t), "acme", bus.HistoryRequest{}); historyCode(err) != bus.HistoryUnavailable {
		t.Errorf("History without the stream: %v, want %s", err, bus.HistoryUnavailable)
	}
	if _, err := c.Attach(ctxT(t), "acme", "book", "run-1", "x"); historyCode(err) != bus.HistoryUnavailable {
		t.Errorf("Attach without the stream: %v, want %s", err, bus.HistoryUnavailable)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.History(ctxT(t), "acme", bus.HistoryRequest{}); !errors.Is(err, toolexec.ErrNoHistoryService) {
		t.Errorf("History after Close: %v, want ErrNoHistoryService", err)
	}
	if _, err := bus.ServeHistory(nil, bus.HistoryConfig{}); !errors.Is(err, bus.ErrInvalidConfig) {
		t.Errorf("ServeHistory(nil): %v, want ErrInvalidConfig", err)
	}
}
