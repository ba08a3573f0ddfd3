package toolexec_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec"
	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/internal/testkit/protodoc"
	"github.com/tesserix/toolexec/internal/testkit/wait"
	"github.com/tesserix/toolexec/tool"
)

// wirePage is what docs/PROTOCOL.md tells a caller in another language, as
// TestProtocolDocExecutor reads it from the page.
type wirePage struct {
	// §4: where a call goes, the headers it carries (name and value), and
	// its attributes.
	callSubject    string // toolexec.call.<tenant>.<tool>.<call_id>
	expectedStream [2]string
	repeatHeader   [2]string
	structured     string // the Content-Type of structured mode
	takenCode      int    // the JetStream error of a second publication while the call waits
	callAttrs      map[string]*attributeRow

	// §5: where an answer comes, its attributes, each kind's data members,
	// the codes of failed and rejected, and the reasons.
	answerSubject string // toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>
	answerAttrs   map[string]*attributeRow
	data          map[string][]protodoc.Member
	codes         map[string][]string
	reasons       []string

	// §7: the filter to hear an answer on, the history service's subject and
	// the members of each of its objects.
	answerFilter   string // toolexec.event.<tenant>.*.<tool>.*.<call_id>
	historySubject string // toolexec.history.<tenant>
	history        map[string][]string
}

// readWirePage reads what wirePage holds from the page, failing the test
// where the page does not say it in the form expected.
func readWirePage(t *testing.T) *wirePage {
	t.Helper()
	doc := protodoc.Read(t, protocolDoc)
	s4, s5, s7 := doc.Section(t, 4), doc.Section(t, 5), doc.Section(t, 7)
	p := &wirePage{
		callSubject:    codeSpan(t, "§4", s4, "toolexec.call."),
		expectedStream: header(t, codeSpan(t, "§4", s4, "Nats-Expected-Stream: ")),
		repeatHeader:   header(t, codeSpan(t, "§4", s4, "Toolexec-Repeat: ")),
		structured:     submatch(t, "§4", s4, "the `Content-Type` header is `([^`]+)`"),
		callAttrs:      attributeRows(t, s4),
		answerSubject:  codeSpan(t, "§5", s5, "toolexec.event."),
		answerAttrs:    attributeRows(t, s5),
		data:           map[string][]protodoc.Member{},
		codes: map[string][]string{
			"rejected": protodoc.Names(protodoc.Subsection(t, s5, "Rejection codes (`rejected`)")),
			"failed":   protodoc.Names(protodoc.Subsection(t, s5, "Failure codes (`failed`)")),
		},
		answerFilter:   codeSpan(t, "§7", s7, "toolexec.event."),
		historySubject: codeSpan(t, "§7", s7, "toolexec.history."),
		history:        map[string][]string{},
	}
	var err error
	if p.takenCode, err = strconv.Atoi(submatch(t, "§4", s4, `(?s)second\s+publication\b.*?refused with JetStream error (\d+)`)); err != nil {
		t.Fatalf("§4: %v", err)
	}
	kinds := protodoc.FindTable(t, s5, "kind", "means", "data", "emitter exit status")
	for _, row := range kinds.Rows {
		p.data[oneName(t, "§5: the kind cell", row[0])] = protodoc.Members(row[kinds.Column(t, "data")])
	}
	for _, row := range protodoc.FindTable(t, s5, "reason", "what happened", "what a caller does").Rows {
		p.reasons = append(p.reasons, oneName(t, "§5: the reason cell", row[0]))
	}
	for _, row := range protodoc.FindTable(t, s7, "object", "members").Rows {
		object, _, _ := strings.Cut(row[0], ",")
		p.history[object] = protodoc.Names(row[1])
	}
	return p
}

// codeSpan returns the first code span of text that starts with prefix.
func codeSpan(t *testing.T, sec, text, prefix string) string {
	t.Helper()
	for _, s := range protodoc.CodeSpans(text) {
		if strings.HasPrefix(s, prefix) {
			return s
		}
	}
	t.Fatalf("%s names nothing in backticks starting with %q", sec, prefix)
	return ""
}

// header splits "Name: value".
func header(t *testing.T, s string) [2]string {
	t.Helper()
	name, value, ok := strings.Cut(s, ": ")
	if !ok {
		t.Fatalf("%q is not a header and its value", s)
	}
	return [2]string{name, value}
}

// submatch returns the first group of the first match of pattern in text.
func submatch(t *testing.T, sec, text, pattern string) string {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("%s does not say what the pattern %q reads", sec, pattern)
	}
	return m[1]
}

// fill returns template with each <name> replaced by its value in tokens.
func fill(t *testing.T, template string, tokens map[string]string) string {
	t.Helper()
	s := template
	for name, v := range tokens {
		s = strings.ReplaceAll(s, "<"+name+">", v)
	}
	if strings.Contains(s, "<") {
		t.Fatalf("%q names a placeholder this test does not fill (it fills %q)", template, slices.Sorted(maps.Keys(tokens)))
	}
	return s
}

// airlineTools is what the executor of TestProtocolDocExecutor runs: book,
// effectful with the key argument flight, which books a seat and answers its
// PNR, loses the answer after booking LOST, and holds SLOW until released;
// and full, which refuses every booking without taking a seat.
type airlineTools struct {
	mu      sync.Mutex
	booked  map[string]int // bookings by flight
	entered chan struct{}  // a SLOW booking started
	release chan struct{}  // a SLOW booking may finish
}

func (a *airlineTools) tools(t *testing.T) []*tool.Tool {
	t.Helper()
	params := json.RawMessage(`{"type":"object","properties":{"flight":{"type":"string"},"request_id":{"type":"string"}},"required":["flight"]}`)
	policy := &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}}
	book, err := tool.New(tool.Spec{Name: "book", Idempotency: policy, Parameters: params},
		func(ctx context.Context, _ tool.Context, raw json.RawMessage) (string, error) {
			var args struct{ Flight string }
			if err := json.Unmarshal(raw, &args); err != nil {
				return "", tool.NoEffect(err)
			}
			a.mu.Lock()
			a.booked[args.Flight]++
			n := a.booked[args.Flight]
			a.mu.Unlock()
			switch args.Flight {
			case "LOST":
				return "", errors.New("the answer was lost after the seat was taken")
			case "SLOW":
				select {
				case a.entered <- struct{}{}:
				case <-ctx.Done():
					return "", ctx.Err()
				}
				select {
				case <-a.release:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			return "PNR-" + args.Flight + "-" + strconv.Itoa(n), nil
		})
	if err != nil {
		t.Fatal(err)
	}
	full, err := tool.New(tool.Spec{Name: "full", Idempotency: policy, Parameters: params},
		func(context.Context, tool.Context, json.RawMessage) (string, error) {
			return "", tool.NoEffect(errors.New("the flight is full"))
		})
	if err != nil {
		t.Fatal(err)
	}
	return []*tool.Tool{book, full}
}

func (a *airlineTools) count(flight string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.booked[flight]
}

// pageCall is a call as TestProtocolDocExecutor publishes it.
type pageCall struct {
	tool, callID string
	args         string
	// least leaves out every attribute §4 says is optional, and the
	// Content-Type header; otherwise the call has every attribute §4 names.
	least bool
}

// pageAnswer is what a call's answer must say beyond what §5 says of every
// answer of its kind.
type pageAnswer struct {
	kind        string
	key         string // "" when no key is derived
	outcome     string
	code        string
	reason      string
	bodyEntered bool
}

const (
	pageTenant      = "acme"
	pageRun         = "run_1"
	pageTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	pageTraceState  = "vendor=1"
)

// TestProtocolDocExecutor holds a running executor to docs/PROTOCOL.md as a
// caller in another language reads it, every name taken from the page. Calls
// are published with nothing but a NATS connection as §4 says (its subject,
// the attributes of its table in structured mode, its Nats-Expected-Stream
// header), one to each answer kind of §5's table, and each answer is heard on
// §7's filter and checked against §5: its subject, the attributes of §5's table
// and no others (those whose value says when only then), and the data members
// of its kind's row, its code or reason among §5's. A call with only the
// attributes §4 does not call optional, and without a Content-Type, is
// answered like any other. Then §4's claims about publishing a call again: a
// second publication while the call waits is refused with the JetStream error
// §4 names, and a copy marked with §4's repeat header after the answer is
// acknowledged without running or answering again, its answer still there
// for §7's history service, whose reply has the members §7's table names.
func TestProtocolDocExecutor(t *testing.T) {
	p := readWirePage(t)
	air := &airlineTools{booked: map[string]int{}, entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	ex, err := toolexec.NewExecutor(ctx, natstest.Connect(t, srv), toolexec.ExecutorConfig{
		Tools: air.tools(t), Logger: quiet(), DrainTimeout: 5 * time.Second,
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- ex.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Executor.Run: %v", err)
		}
		ex.Close()
	})
	nc := natstest.Connect(t, srv)
	key := func(toolName, args string) string {
		k, err := idemkey.Derive(pageTenant, pageRun, toolName, []byte(args), []string{"flight"})
		if err != nil {
			t.Fatal(err)
		}
		return k.Hex
	}

	var driven []string
	for _, tc := range []struct {
		call pageCall
		want pageAnswer
	}{
		{
			pageCall{tool: "book", callID: "call_completed", args: `{"flight":"BA117","request_id":"a"}`},
			pageAnswer{kind: "completed", key: key("book", `{"flight":"BA117"}`), outcome: "PNR-BA117-1"},
		},
		{
			pageCall{tool: "book", callID: "call_deduplicated", args: `{"flight":"BA117","request_id":"b"}`, least: true},
			pageAnswer{kind: "deduplicated", key: key("book", `{"flight":"BA117"}`), outcome: "PNR-BA117-1"},
		},
		{
			pageCall{tool: "book", callID: "call_indeterminate", args: `{"flight":"LOST"}`},
			pageAnswer{kind: "indeterminate", key: key("book", `{"flight":"LOST"}`), reason: "body_failed", bodyEntered: true},
		},
		{
			pageCall{tool: "full", callID: "call_failed", args: `{"flight":"BA117"}`},
			pageAnswer{kind: "failed", key: key("full", `{"flight":"BA117"}`), code: "no_effect"},
		},
		{
			pageCall{tool: "book", callID: "call_rejected", args: `{"flight":7}`},
			pageAnswer{kind: "rejected", code: "schema_violation"},
		},
	} {
		driven = append(driven, tc.want.kind)
		t.Run(tc.want.kind, func(t *testing.T) {
			sub := subscribeAnswer(t, nc, p, tc.call)
			if ack := publishCall(t, nc, p, tc.call, false); ack.Error != nil {
				t.Fatalf("the call was refused: %s", ack)
			}
			checkPageAnswer(t, p, ex, tc.call, nextAnswer(t, sub), tc.want)
		})
	}
	var answers []string
	for kind := range p.data {
		if kind != "resolved" {
			answers = append(answers, kind)
		}
	}
	sameSet(t, "§5: the kinds but the audit kind, resolved,", answers, "the kinds this test drives", driven)

	t.Run("published again", func(t *testing.T) {
		held := pageCall{tool: "book", callID: "call_held", args: `{"flight":"SLOW"}`}
		sub := subscribeAnswer(t, nc, p, held)
		if ack := publishCall(t, nc, p, held, false); ack.Error != nil {
			t.Fatalf("the call was refused: %s", ack)
		}
		select {
		case <-air.entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the body of the held call did not start")
		}
		for _, repeat := range []bool{false, true} {
			if ack := publishCall(t, nc, p, held, repeat); ack.Error == nil || ack.Error.ErrCode != p.takenCode {
				t.Errorf("published again (repeat header %t) while the call runs: %s, want JetStream error %d", repeat, ack, p.takenCode)
			}
		}
		close(air.release)
		key := key("book", `{"flight":"SLOW"}`)
		answer := checkPageAnswer(t, p, ex, held, nextAnswer(t, sub),
			pageAnswer{kind: "completed", key: key, outcome: "PNR-SLOW-1"})

		// The executor acknowledges a call once its answer is stored: until
		// then a copy is refused as one that waits.
		js := natstest.JetStream(t, nc)
		subject := fill(t, p.callSubject, map[string]string{"tenant": pageTenant, "tool": held.tool, "call_id": held.callID})
		left := func(what string) {
			t.Helper()
			wait.Eventually(t, 10*time.Second, what+" to leave "+p.expectedStream[1], func() bool {
				return len(natstest.StreamSubjects(t, js, p.expectedStream[1], subject)) == 0
			})
		}
		left("the answered call")
		ack := publishCall(t, nc, p, held, true)
		if ack.Error != nil || ack.Stream != p.expectedStream[1] || ack.Seq == 0 {
			t.Fatalf("the repeat after the answer: %s, want it stored in %s", ack, p.expectedStream[1])
		}
		left("the repeat")
		// An answer published before the repeat was acknowledged reached this
		// connection before the stream's reply above.
		if m, err := sub.NextMsg(10 * time.Millisecond); err == nil {
			t.Errorf("the repeat was answered again: %s %s", m.Subject, m.Data)
		}
		if n := air.count("SLOW"); n != 1 {
			t.Errorf("SLOW booked %d times, want 1: the repeat ran", n)
		}
		checkHistory(t, nc, p, held, answer)
	})
}

// subscribeAnswer subscribes to c's answer filter, as §7 says, before c is
// published.
func subscribeAnswer(t *testing.T, nc *nats.Conn, p *wirePage, c pageCall) *nats.Subscription {
	t.Helper()
	filter := fill(t, p.answerFilter, map[string]string{"tenant": pageTenant, "tool": c.tool, "call_id": c.callID})
	sub, err := nc.SubscribeSync(filter)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return sub
}

// nextAnswer returns the next message sub hears.
func nextAnswer(t *testing.T, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no answer on %s: %v", sub.Subject, err)
	}
	return m
}

// pubAck is JetStream's reply to a publication, as a caller in another
// language reads it.
type pubAck struct {
	Stream string `json:"stream"`
	Seq    uint64 `json:"seq"`
	Error  *struct {
		Code        int    `json:"code"`
		ErrCode     int    `json:"err_code"`
		Description string `json:"description"`
	} `json:"error"`
}

func (a pubAck) String() string {
	if a.Error != nil {
		return fmt.Sprintf("JetStream error %d (%d, %s)", a.Error.ErrCode, a.Error.Code, a.Error.Description)
	}
	return fmt.Sprintf("stored in %s at %d", a.Stream, a.Seq)
}

// publishCall publishes c as §4 says, marked as a repeat when repeat is set,
// and returns JetStream's reply.
func publishCall(t *testing.T, nc *nats.Conn, p *wirePage, c pageCall, repeat bool) pubAck {
	t.Helper()
	attrs := map[string]any{}
	for name, r := range p.callAttrs {
		if c.least && strings.Contains(r.value, "optional") {
			continue
		}
		switch name {
		case "data":
			attrs[name] = json.RawMessage(`{"arguments":` + c.args + `}`)
		case "id":
			attrs[name] = c.callID
		case "source":
			attrs[name] = "/agents/protocol-doc"
		case "subject":
			attrs[name] = c.tool
		case "tenant":
			attrs[name] = pageTenant
		case "runid":
			attrs[name] = pageRun
		case "time":
			attrs[name] = time.Now().UTC().Format(time.RFC3339Nano)
		case "traceparent":
			attrs[name] = pageTraceParent
		case "tracestate":
			attrs[name] = pageTraceState
		default:
			if !strings.HasPrefix(r.value, "`") {
				t.Fatalf("§4 names the attribute %s, whose value this test cannot tell: %q", name, r.value)
			}
			attrs[name] = protodoc.CodeSpans(r.value)[0]
		}
	}
	data, err := json.Marshal(attrs)
	if err != nil {
		t.Fatal(err)
	}
	m := nats.NewMsg(fill(t, p.callSubject, map[string]string{"tenant": pageTenant, "tool": c.tool, "call_id": c.callID}))
	m.Data = data
	m.Header.Set(p.expectedStream[0], p.expectedStream[1])
	if !c.least {
		m.Header.Set("Content-Type", p.structured)
	}
	if repeat {
		m.Header.Set(p.repeatHeader[0], p.repeatHeader[1])
	}
	reply, err := nc.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatalf("publishing %s: %v", m.Subject, err)
	}
	var ack pubAck
	if err := json.Unmarshal(reply.Data, &ack); err != nil {
		t.Fatalf("the reply to %s is not a PubAck: %s", m.Subject, reply.Data)
	}
	return ack
}

var hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)

// checkPageAnswer checks m, the answer to c, against §5 and want, and returns
// its attributes.
func checkPageAnswer(t *testing.T, p *wirePage, ex *toolexec.Executor, c pageCall, m *nats.Msg, want pageAnswer) map[string]json.RawMessage {
	t.Helper()
	tokens := map[string]string{"tenant": pageTenant, "kind": want.kind, "tool": c.tool, "run_id": pageRun, "call_id": c.callID}
	if s := fill(t, p.answerSubject, tokens); m.Subject != s {
		t.Errorf("the answer came on %s, want %s", m.Subject, s)
	}
	if ct := m.Header.Get("Content-Type"); ct != p.structured {
		t.Errorf("%s: Content-Type %q, want structured mode, %q", m.Subject, ct, p.structured)
	}
	if m.Reply == "" {
		t.Errorf("%s: the answer came without a reply subject", m.Subject)
	}
	var attrs map[string]json.RawMessage
	if err := json.Unmarshal(m.Data, &attrs); err != nil {
		t.Fatalf("%s: the answer is not a JSON object: %v\n%s", m.Subject, err, m.Data)
	}
	str := func(name string) string {
		var s string
		if raw, ok := attrs[name]; ok {
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Errorf("%s: %s is %s, not a string", m.Subject, name, raw)
			}
		}
		return s
	}

	// Which attributes: §5's, those that say when only then, and those it
	// says an answer may leave out perhaps not even then.
	traced := !c.least
	present := map[string]bool{
		"subject": true, "runid": true, "idempotencykey": want.key != "", "traceparent": traced, "tracestate": traced,
	}
	for name := range attrs {
		if p.answerAttrs[name] == nil {
			t.Errorf("%s: the answer has the attribute %s, which §5 does not name", m.Subject, name)
		}
	}
	for name, r := range p.answerAttrs {
		_, got := attrs[name]
		expect, conditional := present[name]
		switch {
		case !saysWhen(r.value) && conditional:
			t.Errorf("§5 gives %s no condition (%q), but this test knows one", name, r.value)
		case !saysWhen(r.value) && !got:
			t.Errorf("%s: the answer lacks %s, which §5 does not say is there only sometimes", m.Subject, name)
		case saysWhen(r.value) && !conditional:
			t.Errorf("§5 gives %s a condition this test does not know: %q", name, r.value)
		case saysWhen(r.value) && got && !expect:
			t.Errorf("%s: %s is there, though not %q", m.Subject, name, r.value)
		case saysWhen(r.value) && !got && expect && !strings.Contains(r.value, "may leave `"+name+"` out"):
			t.Errorf("%s: %s is not there, though %q", m.Subject, name, r.value)
		}
	}

	// Their values, where §5 gives them or the call does.
	for name, r := range p.answerAttrs {
		if name != "data" && strings.HasPrefix(r.value, "`") {
			if got, v := str(name), strings.ReplaceAll(protodoc.CodeSpans(r.value)[0], "<kind>", want.kind); got != v {
				t.Errorf("%s: %s is %q, §5 says %q", m.Subject, name, got, v)
			}
		}
	}
	if id := str("id"); !hex32.MatchString(id) || m.Header.Get("Nats-Msg-Id") != id {
		t.Errorf("%s: id %q, Nats-Msg-Id %q: want the same 32 hex digits", m.Subject, id, m.Header.Get("Nats-Msg-Id"))
	}
	if src, prefix := str("source"), codeSpan(t, "§5: the source", p.answerAttrs["source"].value, "/"); src != prefix+ex.Holder() {
		t.Errorf("%s: source %q, want %q followed by the executor's holder %q", m.Subject, src, prefix, ex.Holder())
	}
	for name, v := range map[string]string{"subject": c.tool, "tenant": pageTenant, "callid": c.callID, "runid": pageRun, "idempotencykey": want.key} {
		if got := str(name); got != v {
			t.Errorf("%s: %s is %q, want %q", m.Subject, name, got, v)
		}
	}
	if traced {
		if tp := str("traceparent"); tp != pageTraceParent {
			t.Errorf("%s: traceparent %q, want the call's, %q", m.Subject, tp, pageTraceParent)
		}
		if ts, ok := attrs["tracestate"]; ok && str("tracestate") != pageTraceState {
			t.Errorf("%s: tracestate %s, want the call's, %q", m.Subject, ts, pageTraceState)
		}
	}

	// The data: the members of the kind's row, those that say when only
	// sometimes.
	var data map[string]json.RawMessage
	if err := json.Unmarshal(attrs["data"], &data); err != nil {
		t.Fatalf("%s: data is not a JSON object: %s", m.Subject, attrs["data"])
	}
	row, ok := p.data[want.kind]
	if !ok {
		t.Fatalf("§5 has no row for %s", want.kind)
	}
	for name := range data {
		if !slices.ContainsFunc(row, func(m protodoc.Member) bool { return m.Name == name }) {
			t.Errorf("%s: data has %s, which §5's row of %s does not name", m.Subject, name, want.kind)
		}
	}
	for _, mem := range row {
		if _, ok := data[mem.Name]; !ok && !saysWhen(mem.Note) {
			t.Errorf("%s: data lacks %s, which §5's row of %s does not say is there only sometimes", m.Subject, mem.Name, want.kind)
		}
	}
	dataStr := func(name string) string {
		var s string
		_ = json.Unmarshal(data[name], &s)
		return s
	}
	if want.code != "" && (dataStr("code") != want.code || !slices.Contains(p.codes[want.kind], want.code)) {
		t.Errorf("%s: code %q, want %q, which §5 must list among the codes of %s", m.Subject, dataStr("code"), want.code, want.kind)
	}
	if want.reason != "" && (dataStr("reason") != want.reason || !slices.Contains(p.reasons, want.reason)) {
		t.Errorf("%s: reason %q, want %q, which §5 must list among the reasons", m.Subject, dataStr("reason"), want.reason)
	}
	if want.outcome != "" && dataStr("outcome") != want.outcome {
		t.Errorf("%s: outcome %q, want %q", m.Subject, dataStr("outcome"), want.outcome)
	}
	if want.kind == "indeterminate" && string(data["body_entered"]) != map[bool]string{false: "false", true: "true"}[want.bodyEntered] {
		t.Errorf("%s: body_entered %s, want %t", m.Subject, data["body_entered"], want.bodyEntered)
	}
	if dataStr("tool") != c.tool {
		t.Errorf("%s: data's tool %q, want %q", m.Subject, dataStr("tool"), c.tool)
	}
	return attrs
}

// checkHistory asks §7's history service for the answers to c and checks
// that its reply holds answer, in the members §7's table names.
func checkHistory(t *testing.T, nc *nats.Conn, p *wirePage, c pageCall, answer map[string]json.RawMessage) {
	t.Helper()
	filter := fill(t, p.answerFilter, map[string]string{"tenant": pageTenant, "tool": c.tool, "call_id": c.callID})
	req, err := json.Marshal(map[string]string{p.history["request"][0]: filter})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := nc.Request(fill(t, p.historySubject, map[string]string{"tenant": pageTenant}), req, 10*time.Second)
	if err != nil {
		t.Fatalf("history request %s: %v", req, err)
	}
	var reply map[string]json.RawMessage
	if err := json.Unmarshal(msg.Data, &reply); err != nil {
		t.Fatalf("the history reply is not a JSON object: %s", msg.Data)
	}
	for name := range reply {
		if !slices.Contains(p.history["reply"], name) {
			t.Errorf("the history reply has %s, which §7 does not name: %s", name, msg.Data)
		}
	}
	var evs []map[string]json.RawMessage
	if err := json.Unmarshal(reply["events"], &evs); err != nil || len(evs) != 1 {
		t.Fatalf("the history reply holds %d events, want the one answer: %s", len(evs), msg.Data)
	}
	for name := range evs[0] {
		if !slices.Contains(p.history["event"], name) {
			t.Errorf("the history event has %s, which §7 does not name: %s", name, msg.Data)
		}
	}
	var stored []struct {
		Header map[string][]string `json:"header"`
		Data   []byte              `json:"data"`
	}
	if err := json.Unmarshal(reply["events"], &stored); err != nil {
		t.Fatalf("the history event is not what §7 says: %v", err)
	}
	var id string
	if err := json.Unmarshal(answer["id"], &id); err != nil {
		t.Fatal(err)
	}
	if got := stored[0].Header["Nats-Msg-Id"]; !slices.Equal(got, []string{id}) {
		t.Errorf("the stored answer's Nats-Msg-Id %q, want the answer heard, %s", got, id)
	}
	var storedAttrs map[string]json.RawMessage
	if err := json.Unmarshal(stored[0].Data, &storedAttrs); err != nil || string(storedAttrs["id"]) != string(answer["id"]) {
		t.Errorf("the stored answer %s is not the one heard (id %s)", stored[0].Data, answer["id"])
	}
}
