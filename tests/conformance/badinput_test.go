package conformance

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tesserix/toolexec/internal/testkit/wait"
)

// ev returns a structured call event for tenant as JSON text, written by hand.
// Its members come in a fixed order; edits are pairs of a member name and its
// raw JSON value, replacing the member (or removing it, for an empty value) or,
// for a name the event lacks, appending it.
func ev(tenant string, edits ...string) string {
	members := [][2]string{
		{"specversion", `"1.0"`}, {"id", `"bad"`}, {"source", `"/conformance/agent"`}, {"type", jstr(callType)},
		{"subject", `"book"`}, {"tenant", jstr(tenant)}, {"runid", `"r1"`}, {"datacontenttype", `"application/json"`},
		{"data", `{"arguments":{"flight":"XX1","seats":1}}`},
	}
	for i := 0; i+1 < len(edits); i += 2 {
		found := false
		for j := range members {
			if members[j][0] == edits[i] {
				members[j][1], found = edits[i+1], true
			}
		}
		if !found {
			members = append(members, [2]string{edits[i], edits[i+1]})
		}
	}
	var b strings.Builder
	b.WriteByte('{')
	for _, m := range members {
		if m[1] == "" {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.WriteString(jstr(m[0]) + ":" + m[1])
	}
	b.WriteByte('}')
	return b.String()
}

// args returns the data member of a call whose arguments are the raw JSON a.
func args(a string) string { return `{"arguments":` + a + `}` }

// smsg returns a structured-mode message on subject with payload.
func smsg(subject, payload string) *nats.Msg {
	return &nats.Msg{Subject: subject, Header: nats.Header{"Content-Type": {structured}}, Data: []byte(payload)}
}

// bmsg returns a binary-mode call for tenant with payload as its data. Its
// headers are the attributes of a good call, with edits applied: pairs of a
// header name and value, replacing the header (removing it, for an empty value);
// a name ending in "+" adds a second value.
func bmsg(tenant, payload string, edits ...string) *nats.Msg {
	h := nats.Header{
		"ce-specversion": {"1.0"}, "ce-id": {"bad"}, "ce-source": {"/conformance/agent"}, "ce-type": {callType},
		"ce-subject": {"book"}, "ce-tenant": {tenant}, "ce-runid": {"r1"}, "Content-Type": {"application/json"},
	}
	for i := 0; i+1 < len(edits); i += 2 {
		name, v := edits[i], edits[i+1]
		switch {
		case strings.HasSuffix(name, "+"):
			name = strings.TrimSuffix(name, "+")
			h[name] = append(h[name], v)
		case v == "":
			delete(h, name)
		default:
			h[name] = []string{v}
		}
	}
	return &nats.Msg{Subject: callSubject(tenant, "book", "bad"), Header: h, Data: []byte(payload)}
}

// nest returns a JSON value nested depth arrays deep.
func nest(depth int) string { return strings.Repeat("[", depth) + "1" + strings.Repeat("]", depth) }

// badInput is one kind of hostile input.
type badInput struct {
	name string
	// msg builds the message for tenant; send, when set instead, publishes by
	// other means (and the input never reaches the executor).
	msg  func(tenant string) *nats.Msg
	send func(t *testing.T, tenant string)
	// setup runs before the message is sent (a good call whose record the bad
	// one runs into).
	setup func(t *testing.T, tenant string)

	kind string // the answer's kind; "" means rejected
	code string // the code the answer carries
	// tool, run and call are the tokens the answer is addressed to; "" for tool
	// or run means the placeholder, "" for call the stand-in id (neither the
	// subject nor the event has a usable call id).
	tool, run, call string
	// key, when set, returns the idempotencykey the answer carries.
	key func(t *testing.T, tenant string) string
	// noAnswer says why no answer can exist (the input never reaches the
	// executor, or names no tenant to answer).
	noAnswer string
	// effects is how many requests the downstream may see for the tenant, and
	// records how many live records it may keep (setup included).
	effects, records int
}

// reject returns a row whose answer is rejected with code, addressed to tool
// book, run r1 and call "bad".
func reject(name, code string, msg func(tenant string) *nats.Msg) badInput {
	return badInput{name: name, code: code, msg: msg, tool: "book", run: "r1", call: "bad"}
}

// to returns a copy of b with its answer addressed to tool, run and call.
func (b badInput) to(tool, run, call string) badInput {
	b.tool, b.run, b.call = tool, run, call
	return b
}

// badInputs is the table: one row per kind of bad input that reaches (or tries
// to reach) the executor over NATS.
func badInputs() []badInput {
	book := func(tenant string) string { return callSubject(tenant, "book", "bad") }
	s := func(edits ...string) func(string) *nats.Msg {
		return func(tenant string) *nats.Msg { return smsg(book(tenant), ev(tenant, edits...)) }
	}
	sArgs := func(a string) func(string) *nats.Msg { return s("data", args(a)) }
	raw := func(payload string) func(string) *nats.Msg {
		return func(tenant string) *nats.Msg { return smsg(book(tenant), payload) }
	}
	b := func(payload string, edits ...string) func(string) *nats.Msg {
		return func(tenant string) *nats.Msg { return bmsg(tenant, payload, edits...) }
	}
	bookKey := func(a string) func(*testing.T, string) string {
		return func(t *testing.T, tenant string) string { return emitterKey(t, tenant, "r1", "book", a, "flight") }
	}
	huge := strings.Repeat("x", executorMaxMsg+executorMaxMsg/2)

	return []badInput{
		// Not JSON, not a CloudEvent.
		reject("malformed JSON", "invalid_json", raw(`{"specversion":"1.0","id":"bad",`)).to("book", "", "bad"),
		reject("empty structured payload", "invalid_json", raw("")).to("book", "", "bad"),
		reject("no call id in the subject, nor in the event", "invalid_json", func(tenant string) *nats.Msg {
			return smsg("toolexec.call."+tenant+".book.b$d", "")
		}).to("book", "", ""),
		reject("trailing garbage after the event", "invalid_json", func(tenant string) *nats.Msg {
			return smsg(book(tenant), ev(tenant)+" {}")
		}),
		reject("JSON array", "not_cloudevent", raw(`[1,2,3]`)).to("book", "", "bad"),
		reject("JSON object that is not a CloudEvent", "not_cloudevent", raw(`{"id":"bad","runid":"r1","hello":"world"}`)),
		reject("binary message without ce- headers", "not_cloudevent", func(tenant string) *nats.Msg {
			return &nats.Msg{Subject: book(tenant), Header: nats.Header{"Content-Type": {"application/json"}}, Data: []byte(args(`{"flight":"XX1"}`))}
		}).to("book", "", "bad"),
		reject("message without any header that is not an event", "not_cloudevent", func(tenant string) *nats.Msg {
			return &nats.Msg{Subject: book(tenant), Data: []byte(args(`{"flight":"XX1"}`))}
		}).to("book", "", "bad"),
		reject("binary without ce-specversion", "not_cloudevent", b(args(`{"flight":"XX1"}`), "ce-specversion", "")),
		reject("unsupported event format", "not_cloudevent", func(tenant string) *nats.Msg {
			m := smsg(book(tenant), "["+ev(tenant)+"]")
			m.Header.Set("Content-Type", "application/cloudevents-batch+json")
			return m
		}).to("book", "", "bad"),
		reject("structured charset other than utf-8", "not_cloudevent", func(tenant string) *nats.Msg {
			m := smsg(book(tenant), ev(tenant))
			m.Header.Set("Content-Type", structured+"; charset=iso-8859-1")
			return m
		}),
		reject("Content-Type given twice", "not_cloudevent", func(tenant string) *nats.Msg {
			m := smsg(book(tenant), ev(tenant))
			m.Header["content-type"] = []string{structured}
			return m
		}),

		// Spec version.
		reject("specversion 0.3", "bad_specversion", s("specversion", `"0.3"`)),
		reject("specversion as a number", "bad_specversion", s("specversion", `1.0`)),
		reject("binary ce-specversion 2.0", "bad_specversion", b(args(`{"flight":"XX1"}`), "ce-specversion", "2.0")),

		// Required attributes.
		reject("missing id", "missing_attribute", s("id", "")).to("book", "r1", "bad"),
		reject("missing id, and no call id in the subject", "missing_attribute", func(tenant string) *nats.Msg {
			return smsg("toolexec.call."+tenant+".book.b$d", ev(tenant, "id", ""))
		}).to("book", "r1", ""),
		reject("missing source", "missing_attribute", s("source", "")),
		reject("missing type", "missing_attribute", s("type", "")),
		reject("missing runid", "missing_attribute", s("runid", "")).to("book", "", "bad"),
		reject("binary missing ce-source", "missing_attribute", b(args(`{"flight":"XX1"}`), "ce-source", "")),
		reject("wrong type", "bad_type", s("type", `"io.tesserix.toolexec.completed"`)),

		// Malformed attributes.
		reject("time not RFC 3339", "not_cloudevent", s("time", `"yesterday"`)),
		reject("extension name not lower-case alphanumeric", "not_cloudevent", s("Bad_Ext", `"x"`)),
		reject("invalid UTF-8 in an attribute", "invalid_unicode", s("source", "\"/agent/\xff\xfe\"")),
		reject("lone surrogate in an attribute", "invalid_unicode", s("source", `"/agent/\ud800"`)),
		reject("control character in an attribute", "not_cloudevent", s("source", `"/agent/\u0001"`)),
		reject("binary bad percent-encoding", "not_cloudevent", b(args(`{"flight":"XX1"}`), "ce-source", "/a%zz")),
		reject("binary percent-encoded invalid UTF-8", "not_cloudevent", b(args(`{"flight":"XX1"}`), "ce-source", "/a%FF")),
		reject("binary header given twice", "not_cloudevent", b(args(`{"flight":"XX1"}`), "ce-id+", "bad2")).to("book", "r1", "bad"),

		// Tokens.
		reject("id not a token", "bad_token", s("id", `"a.b"`)).to("book", "r1", "bad"),
		reject("id longer than 128", "bad_token", s("id", jstr(strings.Repeat("i", 129)))).to("book", "r1", "bad"),
		reject("runid with a space", "bad_token", s("runid", `"r 1"`)).to("book", "", "bad"),
		reject("runid not a string", "bad_token", s("runid", `7`)).to("book", "", "bad"),
		reject("tool in the subject not a token", "bad_token", func(tenant string) *nats.Msg {
			return smsg("toolexec.call."+tenant+".bo$k.bad", ev(tenant, "subject", ""))
		}).to("", "r1", "bad"),
		{name: "tenant in the subject not a token", noAnswer: "the subject names no tenant to answer",
			msg: func(tenant string) *nats.Msg { return smsg("toolexec.call."+tenant+"$x.book.bad", ev(tenant+"$x")) }},

		// The call id: the subject's last token names the call.
		reject("event id disagrees with the subject's call id", "call_id_mismatch", s("id", `"other"`)).to("book", "r1", "bad"),
		reject("call id in the subject not a token", "call_id_mismatch", func(tenant string) *nats.Msg {
			return smsg("toolexec.call."+tenant+".book.b$d", ev(tenant))
		}),
		{name: "subject of wire version 1, without a call id", noAnswer: "no stream takes the subject", send: noStream(".book")},
		{name: "subject without a tool", noAnswer: "no stream takes the subject", send: noStream("")},
		{name: "subject with an extra token", noAnswer: "no stream takes the subject", send: noStream(".book.bad.now")},

		// Tenant and tool disagreements.
		reject("tenant extension disagrees with the subject", "tenant_mismatch", s("tenant", `"someone-else"`)),
		reject("tenant extension differs only in case", "tenant_mismatch", func(tenant string) *nats.Msg {
			return smsg(book(tenant), ev(tenant, "tenant", jstr(strings.ToUpper(tenant))))
		}),
		reject("binary ce-tenant disagrees with the subject", "tenant_mismatch", b(args(`{"flight":"XX1"}`), "ce-tenant", "someone-else")),
		reject("subject attribute names another tool", "tool_mismatch", s("subject", `"lookup"`)),
		{name: "unknown tool", code: "unknown_tool", tool: "cancel", run: "r1", call: "bad",
			msg: func(tenant string) *nats.Msg {
				return smsg(callSubject(tenant, "cancel", "bad"), ev(tenant, "subject", `"cancel"`))
			}},

		// Data.
		reject("no data", "bad_data", s("data", "")),
		reject("binary data not JSON", "bad_data", b(`flight=XX1`)),
		reject("datacontenttype not JSON", "bad_content_type", s("datacontenttype", `"text/plain"`, "data", `"flight=XX1"`)),
		reject("binary Content-Type not JSON", "bad_content_type", b(args(`{"flight":"XX1"}`), "Content-Type", "text/plain")),
		reject("data without arguments", "schema_violation", s("data", `{}`)),
		reject("data with an extra member", "schema_violation", s("data", `{"arguments":{"flight":"XX1"},"extra":1}`)),
		reject("arguments an array", "arguments_not_object", sArgs(`["XX1"]`)),
		reject("arguments null", "arguments_not_object", sArgs(`null`)),

		// The tool's schema.
		reject("argument of the wrong type", "schema_violation", sArgs(`{"flight":"XX1","seats":"two"}`)),
		reject("argument out of range", "schema_violation", sArgs(`{"flight":"XX1","seats":0}`)),
		reject("required argument missing", "schema_violation", sArgs(`{"seats":1}`)),
		reject("argument the tool does not declare", "schema_violation", sArgs(`{"flight":"XX1","sneaky":true}`)),

		// What the key derivation refuses.
		reject("number 1e999999999", "number_out_of_range", sArgs(`{"flight":"XX1","note":1e999999999}`)),
		reject("number -1e400", "number_out_of_range", sArgs(`{"flight":"XX1","note":-1e400}`)),
		reject("invalid UTF-8 in an argument", "invalid_unicode", sArgs("{\"flight\":\"XX\xff1\"}")),
		reject("lone surrogate in an argument", "invalid_unicode", sArgs(`{"flight":"XX1","note":"\ud800"}`)),
		reject("lone surrogate in a member name", "invalid_unicode", sArgs(`{"flight":"XX1","note":{"\udc00":1}}`)),
		reject("binary lone surrogate", "invalid_unicode", b(args(`{"flight":"\udbff"}`))),
		reject("member names equal after NFC", "nfc_collision", sArgs("{\"flight\":\"XX1\",\"note\":{\"caf\u00e9\":1,\"cafe\u0301\":2}}")),
		reject("duplicate argument", "duplicate_member", sArgs(`{"flight":"XX1","flight":"XX2"}`)),
		reject("duplicate nested member", "duplicate_member", sArgs(`{"flight":"XX1","note":{"a":1,"a":1}}`)),
		reject("duplicate data member", "duplicate_member", s("data", `{"arguments":{"flight":"XX1"},"arguments":{"flight":"XX2"}}`)),
		reject("duplicate event member", "duplicate_member", func(tenant string) *nats.Msg {
			e := ev(tenant)
			return smsg(book(tenant), e[:len(e)-1]+`,"source":"/elsewhere"}`)
		}),
		reject("arguments nested 200 deep", "too_deep", sArgs(`{"flight":"XX1","note":`+nest(200)+`}`)),
		reject("arguments nested 20000 deep", "too_deep", sArgs(`{"flight":"XX1","note":`+nest(20000)+`}`)),
		reject("binary arguments nested 20000 deep", "too_deep", b(args(`{"flight":"XX1","note":`+nest(20000)+`}`))),

		// What the arguments may expand to (the executor's defaults: 1,000
		// members an object, 10,000 elements an array, 20,000 values).
		reject("an object of 1,001 members", "too_many_values", sArgs(`{"flight":"XX1","note":{`+members(1001)+`}}`)),
		reject("an array of 10,001 elements", "too_many_values", sArgs(`{"flight":"XX1","note":[`+strings.Repeat("0,", 10000)+`0]}`)),
		reject("20,001 values", "too_many_values", sArgs(`{"flight":"XX1","note":[`+strings.Repeat("[0,0,0,0,0,0,0,0,0],", 2000)+`0]}`)),
		reject("binary: an object of 1,001 members", "too_many_values", b(args(`{"flight":"XX1","note":{`+members(1001)+`}}`))),

		// Sizes.
		reject("over the executor's maximum message size", "too_large", sArgs(`{"flight":"XX1","note":"`+huge+`"}`)),
		{name: "over the server's max_payload", noAnswer: "the server refuses the message", send: sendOversize},

		// Bad input that meets a record or an outcome.
		{name: "check argument differs from the recorded call", code: "arguments_mismatch", tool: "book", run: "r1", call: "bad",
			setup:   goodCall(`{"flight":"XX1","seats":1}`),
			msg:     s("data", args(`{"flight":"XX1","seats":4}`)),
			key:     bookKey(`{"flight":"XX1"}`),
			effects: 1, records: 1},
		{name: "outcome too large to record", kind: "failed", code: "outcome_too_large", tool: "report", run: "r1", call: "bad",
			msg: func(tenant string) *nats.Msg {
				return smsg(callSubject(tenant, "report", "bad"), ev(tenant, "subject", `"report"`, "data", args(`{"id":"r-1"}`)))
			},
			key: func(t *testing.T, tenant string) string {
				return emitterKey(t, tenant, "r1", "report", `{"id":"r-1"}`, "id")
			},
			effects: 1},
	}
}

// members returns n members "m0":0,"m1":1,… of an object, without its braces.
func members(n int) string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf(`"m%d":%d`, i, i)
	}
	return strings.Join(ms, ",")
}

// goodCall returns a setup that makes a good call of book with arguments a and
// waits for its completed answer.
func goodCall(a string) func(t *testing.T, tenant string) {
	return func(t *testing.T, tenant string) {
		t.Helper()
		c := newCall(tenant, "book", "good", a)
		sub := subscribe(t, "toolexec.event."+tenant+".*.book.r1.good")
		publish(t, c.Msg())
		if m := next(t, sub); !strings.Contains(m.Subject, ".completed.") {
			t.Fatalf("the good call was answered %s: %s", m.Subject, m.Data)
		}
	}
}

// noStream returns a send that publishes a good call on
// toolexec.call.<tenant> followed by rest, a subject of another shape than
// a call's (toolexec.call.<tenant>.<tool>.<call_id>): no stream takes it, and
// the publisher hears so at once.
func noStream(rest string) func(t *testing.T, tenant string) {
	return func(t *testing.T, tenant string) {
		t.Helper()
		_, err := env.js.PublishMsg(ctxT(t), smsg("toolexec.call."+tenant+rest, ev(tenant)))
		if !errors.Is(err, jetstream.ErrNoStreamResponse) {
			t.Errorf("publishing on toolexec.call.%s%s: %v, want no stream response", tenant, rest, err)
		}
	}
}

// sendOversize tries to publish a call larger than the server's max_payload,
// through nats.go and over a raw connection: the client refuses it, and so
// does the server.
func sendOversize(t *testing.T, tenant string) {
	t.Helper()
	payload := []byte(ev(tenant, "data", args(`{"flight":"XX1","note":"`+strings.Repeat("y", serverMaxPayload+1024)+`"}`)))
	err := env.nc.PublishMsg(smsg(callSubject(tenant, "book", "bad"), string(payload)))
	if !errors.Is(err, nats.ErrMaxPayload) {
		t.Errorf("nats.go publish of %d bytes: %v, want ErrMaxPayload", len(payload), err)
	}

	// Without the client's check: the server itself must refuse it.
	conn, err := net.Dial("tcp", strings.TrimPrefix(env.natsURL, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(answerWait))
	r := bufio.NewReader(conn)
	if line, err := r.ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO ") {
		t.Fatalf("server greeting %q: %v", line, err)
	}
	hdr := "NATS/1.0\r\nContent-Type: " + structured + "\r\n\r\n"
	fmt.Fprintf(conn, "CONNECT {\"verbose\":false,\"pedantic\":false,\"headers\":true,\"protocol\":1}\r\nPING\r\n")
	if line, _ := r.ReadString('\n'); !strings.HasPrefix(line, "PONG") {
		t.Fatalf("after CONNECT the server said %q", line)
	}
	fmt.Fprintf(conn, "HPUB %s %d %d\r\n", callSubject(tenant, "book", "bad"), len(hdr), len(hdr)+len(payload))
	_, _ = conn.Write([]byte(hdr))
	_, _ = conn.Write(payload)
	_, _ = conn.Write([]byte("\r\n"))
	var said []string
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			said = append(said, strings.TrimSpace(line))
		}
		if strings.Contains(strings.ToLower(line), "maximum payload") || err != nil {
			break
		}
	}
	if !strings.Contains(strings.ToLower(strings.Join(said, " ")), "maximum payload") {
		t.Errorf("the server said %q to an oversize publish, want a maximum payload violation", said)
	}
}

// TestBadInput sends every kind of bad input in badInputs and checks that each
// is answered exactly once, rejected (or failed, for an outcome too large) with
// its code, and leaves no claim, no record and no request downstream beyond what
// the row allows; and that bad tools files stop the executor at start-up with
// exit status 2 (see badToolsFiles). It logs how many kinds it covered.
func TestBadInput(t *testing.T) {
	rows := badInputs()
	files := badToolsFiles()
	tenants := map[string]badInput{}
	subs := map[string]*nats.Subscription{}
	answers := map[string]int{} // by kind
	codes := map[string]bool{}
	refused := 0

	t.Run("messages", func(t *testing.T) {
		for i, row := range rows {
			tenant := fmt.Sprintf("bad-%02d", i)
			tenants[tenant] = row
			t.Run(row.name, func(t *testing.T) {
				if row.setup != nil {
					row.setup(t, tenant)
				}
				sub := subscribe(t, "toolexec.event."+tenant+".>")
				if row.noAnswer != "" {
					// Listen where an answer would go if the executor made one up.
					subs[tenant] = subscribe(t, "toolexec.event.>")
					_ = sub.Unsubscribe()
				} else {
					subs[tenant] = sub
				}
				if row.send != nil {
					row.send(t, tenant)
				} else {
					m := row.msg(tenant)
					if _, err := env.js.PublishMsg(ctxT(t), m); err != nil {
						t.Fatalf("publish: %v", err)
					}
				}
				if row.noAnswer != "" {
					refused++
					return
				}
				kind := row.kind
				if kind == "" {
					kind = "rejected"
				}
				w := want{Tenant: tenant, Kind: kind, Tool: row.tool, Run: row.run, Call: row.call, Code: row.code}
				if row.key != nil {
					w.Key = row.key(t, tenant)
				}
				m := next(t, sub)
				a := checkAnswer(t, m, w)
				if msg := a.dataStr(t, "error"); len(msg) < 8 || len(msg) > 16<<10 {
					t.Errorf("error text of %d bytes is not a clear message: %q", len(msg), msg)
				}
				answers[kind]++
				codes[row.code] = true
			})
		}
	})

	// No row leaves anything behind: one answer each, no second one, no call left
	// in the stream, no claim, no record, no request downstream.
	t.Run("nothing left behind", func(t *testing.T) {
		time.Sleep(settle)
		for tenant, row := range tenants {
			if sub := subs[tenant]; sub != nil {
				for {
					m, err := sub.NextMsg(10 * time.Millisecond)
					if err != nil {
						break
					}
					if row.noAnswer != "" && !strings.HasPrefix(m.Subject, "toolexec.event."+tenant) {
						continue // another row's answer
					}
					t.Errorf("%s (%s): a second message %s", row.name, tenant, m.Subject)
				}
			}
			calls := []string{}
			if row.noAnswer == "" {
				calls = append(calls, row.call)
				if row.call == "" {
					calls[0] = standInOf(t, tenant)
				}
				if row.setup != nil {
					calls = append(calls, "good")
				}
			}
			answersOf(t, tenant, calls...)
			waitCallsSettled(t, "toolexec.call."+tenant+".>")
			if row.noAnswer != "" {
				waitCallsSettled(t, "toolexec.call."+tenant+"$x.>")
			}
			if row.records == 0 && row.effects == 0 {
				if traces := kvTraces(t, tenant); len(traces) != 0 {
					t.Errorf("%s (%s): the idempotency bucket holds %v", row.name, tenant, traces)
				}
			}
			if keys := kvKeys(t, tenant); len(keys) != row.records {
				t.Errorf("%s (%s): %d live records %v, want %d", row.name, tenant, len(keys), keys, row.records)
			}
			if n := len(env.down.forTenant(tenant)); n != row.effects {
				t.Errorf("%s (%s): downstream saw %d requests, want %d", row.name, tenant, n, row.effects)
			}
		}
		checkConsumerSettled(t)
	})

	t.Run("tools files", func(t *testing.T) {
		for _, f := range files {
			t.Run(f.name, func(t *testing.T) {
				t.Parallel()
				checkStartupError(t, f)
			})
		}
	})

	t.Logf("bad input: %d kinds covered: %d messages answered rejected and %d failed (outcome too large), "+
		"%d codes among them; %d messages refused before an answer could exist; %d tools files refused at start-up (exit status 2)",
		len(rows)+len(files), answers["rejected"], answers["failed"], len(codes), refused, len(files))
	if len(rows)+len(files) < 25 {
		t.Errorf("only %d kinds of bad input", len(rows)+len(files))
	}
}

// standInOf returns the call-id token of tenant's one answer.
func standInOf(t *testing.T, tenant string) string {
	t.Helper()
	for subj := range streamSubjects(t, eventStream, "toolexec.event."+tenant+".>") {
		return subj[strings.LastIndexByte(subj, '.')+1:]
	}
	return "(none)"
}

// checkConsumerSettled waits until the executors' consumer has nothing
// pending and nothing waiting for an ack, and checks that nothing was
// redelivered.
func checkConsumerSettled(t *testing.T) {
	t.Helper()
	wait.EventuallyNoError(t, answerWait, "the executors' consumer to settle", func() error {
		s, err := env.js.Stream(ctxT(t), callStream)
		if err != nil {
			return err
		}
		names := s.ConsumerNames(ctxT(t))
		for name := range names.Name() {
			c, err := s.Consumer(ctxT(t), name)
			if err != nil {
				return err
			}
			info := c.CachedInfo()
			if info.NumPending != 0 || info.NumAckPending != 0 || info.NumRedelivered != 0 {
				return fmt.Errorf("consumer %s: %d pending, %d awaiting ack, %d redelivered",
					name, info.NumPending, info.NumAckPending, info.NumRedelivered)
			}
		}
		return nil
	})
}

// badToolsFile is a tools file the executor must refuse at start-up.
type badToolsFile struct {
	name    string
	content string   // written to tools.yaml; "" means the file does not exist
	says    []string // what the error must mention
}

func badToolsFiles() []badToolsFile {
	const head = "tools:\n  - name: book\n"
	const rest = "    parameters:\n      type: object\n      properties:\n        flight: {type: string}\n    http:\n      url: http://127.0.0.1:1/book\n"
	return []badToolsFile{
		{name: "missing file", says: []string{"tools.yaml"}},
		{name: "not YAML", content: "tools: [\n  - name: book\n", says: []string{"tools.yaml:1", "YAML"}},
		{name: "unknown kind", content: head + "    idempotency: {kind: sometimes}\n" + rest, says: []string{"tools.yaml:3", "book", "sometimes"}},
		{name: "key argument not a parameter", content: head + "    idempotency: {kind: effectful, key_arguments: [flihgt]}\n" + rest,
			says: []string{"tools.yaml:3", "book", "flihgt"}},
		{name: "unset variable", content: strings.Replace(head+rest, "http://127.0.0.1:1", "${CONFORMANCE_UNSET_VARIABLE}", 1),
			says: []string{"tools.yaml:", "book", "CONFORMANCE_UNSET_VARIABLE"}},
		{name: "unknown field", content: head + "    retires: 3\n" + rest, says: []string{"tools.yaml:3", "retires"}},
		{name: "tool declared twice", content: head + rest + "  - name: book\n" + rest, says: []string{"tools.yaml:", "book"}},
		{name: "not an http URL", content: strings.Replace(head+rest, "http://127.0.0.1:1", "ftp://127.0.0.1", 1),
			says: []string{"tools.yaml:", "book", "http"}},
		{name: "bad tool name", content: strings.Replace(head+rest, "name: book", "name: book.now", 1), says: []string{"tools.yaml:2", "book.now"}},
		{name: "no tools", content: "tools: []\n", says: []string{"tools.yaml"}},
	}
}

// checkStartupError runs the executor with f's tools file and checks that it
// exits with status 2 before it is ready, explaining itself on stderr.
func checkStartupError(t *testing.T, f badToolsFile) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "tools.yaml")
	if f.content != "" {
		path = writeFile(t, "tools.yaml", f.content)
	}
	cmd := exec.Command(filepath.Join(env.bin, "executor"), "--nats-url", env.natsURL, "--tools-file", path,
		"--data-dir", dir, "--log-level", "warn")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the executor did not exit within 60s\nstdout: %s\nstderr: %s", stdout.String(), stderr.String())
	}
	status, err := exitStatus(err)
	if err != nil || status != 2 {
		t.Errorf("exit status %d (%v), want 2\nstderr: %s", status, err, stderr.String())
	}
	if strings.Contains(stdout.String(), "ready") {
		t.Errorf("the executor said it was ready: %s", stdout.String())
	}
	msg := stderr.String()
	for _, s := range f.says {
		if !strings.Contains(msg, s) {
			t.Errorf("the error does not mention %q:\n%s", s, msg)
		}
	}
	if strings.Count(strings.TrimSpace(msg), "\n") > 20 {
		t.Errorf("the error runs to %d lines:\n%s", strings.Count(msg, "\n"), msg)
	}
}
