package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// fuzzHeaders reads headers written one per line as "Name: value" (the value
// may be empty; a line without a colon is a name with an empty value). Names
// keep their case, as a hostile sender may choose it.
func fuzzHeaders(s string) nats.Header {
	h := nats.Header{}
	for line := range strings.SplitSeq(s, "\n") {
		if line == "" {
			continue
		}
		name, value, _ := strings.Cut(line, ":")
		h[name] = append(h[name], strings.TrimPrefix(value, " "))
	}
	return h
}

// checkRejection fails the test unless err is a *events.RejectedError with a
// rejection code and a message.
func checkRejection(t *testing.T, what string, err error) {
	t.Helper()
	var re *events.RejectedError
	if !errors.As(err, &re) || !errors.Is(err, events.ErrRejected) {
		t.Fatalf("%s: error %v (%T) is not a *events.RejectedError", what, err, err)
	}
	if !re.Code.IsRejection() || re.Message == "" {
		t.Fatalf("%s: RejectedError{Code: %q, Message: %q}: want a rejection code and a message", what, re.Code, re.Message)
	}
}

// FuzzDecode feeds arbitrary headers and payloads to Decode, in whichever mode
// the headers select, and what it accepts to wire.CallFromEvent. Neither may
// panic; every error is a *events.RejectedError with a rejection code, the same
// one however often the message is decoded (each time the header map is
// ranged in another order); Peek reads anything; and a call accepted by both
// is encoded again in each mode and decoded to the same call. The seed corpus
// is under testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	const st = "Content-Type: application/cloudevents+json"
	const bin = "ce-specversion: 1.0\nce-id: c1\nce-source: /agent\nce-type: io.tesserix.toolexec.call\nce-tenant: acme\nce-runid: r1\nContent-Type: application/json"
	good := `{"specversion":"1.0","id":"c1","source":"/agent","type":"io.tesserix.toolexec.call","subject":"book",` +
		`"tenant":"acme","runid":"r1","time":"2025-01-02T03:04:05.678Z","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",` +
		`"datacontenttype":"application/json","data":{"arguments":{"flight":"LH1","seats":2}}}`
	f.Add(st, []byte(good))
	f.Add(st+"; charset=utf-8", []byte(good))
	f.Add("content-type: application/cloudevents+json", []byte(`{"specversion":"1.0","id":"c1","source":"/a","type":"io.tesserix.toolexec.call","runid":"r1","data":{"arguments":{}}}`))
	f.Add(st, []byte(`{"specversion":"1.0","id":"c1","id":"c2"}`))
	f.Add(st, []byte(`{"specversion":"1.0","id":"c1","source":"/a\ud800","type":"t","runid":"r1"}`))
	f.Add(st, []byte("{\"specversion\":\"1.0\",\"id\":\"c1\",\"source\":\"/a\xff\"}"))
	f.Add(st, []byte(`{"specversion":"1.0","id":"c1","runid":"r1","data":`+strings.Repeat("[", 10001)+`}`))
	f.Add(st, []byte(`{"specversion":"1.0","id":"c1","source":"/a","type":"io.tesserix.toolexec.call","runid":"r1","datacontenttype":"application/json","data":{"arguments":{"n":1e999999999}}}`))
	f.Add(st, []byte(`[1,2]`))
	f.Add("", []byte(`{}`))
	f.Add(bin, []byte(`{"arguments":{"flight":"LH1"}}`))
	f.Add(bin+"\nce-subject: b%6Fok\nce-traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\nce-tracestate: a%3Db", []byte(`{"arguments":{"flight":"LH 1","seats":2.0}}`))
	f.Add(bin+"\nce-time: 2025-01-02T03:04:05Z", []byte(`{"arguments":{}}`))
	f.Add("ce-specversion: 1.0\nCE-ID: c1\nce-id: c2", []byte(`{}`))
	f.Add("ce-specversion: 1.0\nce-id: c%ZZ", []byte(``))
	f.Add(bin+"\nce-comment: %FF", []byte(`{"arguments":{}}`))
	f.Add(bin+"\nce-tracestate: %FF\nce-traceparent: a%2\nCE-TENANT: globex", []byte(`{"arguments":{}}`))
	f.Fuzz(func(t *testing.T, headers string, data []byte) {
		h := fuzzHeaders(headers)
		_ = wire.Peek(h, data)
		e, err := wire.Decode(h, data)
		for range 3 {
			if _, again := wire.Decode(h, data); !sameText(again, err) {
				t.Fatalf("Decode error %v, and decoding the message again %v", err, again)
			}
		}
		if err != nil {
			checkRejection(t, "Decode", err)
			return
		}
		c, err := wire.CallFromEvent(e, "acme", "book")
		if err != nil {
			checkRejection(t, "CallFromEvent", err)
			return
		}
		e2, err := wire.CallEvent(c)
		if err != nil {
			t.Fatalf("an accepted call cannot be made an event again: %v\ncall: %+v", err, c)
		}
		for _, mode := range []wire.Mode{wire.Structured, wire.Binary} {
			h2, d2, err := wire.Encode(e2, mode)
			if err != nil {
				t.Fatalf("%v: Encode: %v", mode, err)
			}
			e3, err := wire.Decode(h2, d2)
			if err != nil {
				t.Fatalf("%v: Decode of an encoded call: %v\nheaders %v\npayload %q", mode, err, h2, d2)
			}
			c3, err := wire.CallFromEvent(e3, c.Tenant, c.Tool)
			if err != nil {
				t.Fatalf("%v: CallFromEvent of an encoded call: %v", mode, err)
			}
			if !sameCall(c3, c) {
				t.Fatalf("%v: the call changed on the way round:\n got %+v\nwant %+v", mode, c3, c)
			}
		}
	})
}

// sameCall reports whether two calls are equal field by field, the arguments
// byte for byte and the times as instants.
func sameCall(a, b events.Call) bool {
	return a.Tenant == b.Tenant && a.RunID == b.RunID && a.CallID == b.CallID && a.Tool == b.Tool &&
		a.Source == b.Source && a.TraceParent == b.TraceParent && a.TraceState == b.TraceState &&
		string(a.Arguments) == string(b.Arguments) && a.Time.Equal(b.Time)
}
