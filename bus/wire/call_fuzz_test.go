package wire_test

import (
	"errors"
	"testing"

	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// FuzzCallFromEvent reads arbitrary CloudEvents (JSON format, as sdk-go parses
// it: attributes, extensions of any type, data as JSON or base64 bytes) as calls
// published for an arbitrary tenant and tool. CallFromEvent must not panic; every
// error is a *RejectedError with a rejection code and a message; an accepted call
// carries the subject's tenant and tool, and CallEvent turns it into an event
// that CallFromEvent reads back as the same call. The seed corpus is under
// testdata/fuzz/FuzzCallFromEvent.
func FuzzCallFromEvent(f *testing.F) {
	f.Add([]byte(callJSON), "acme", "book")
	f.Add([]byte(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"c","source":"/s","runid":"r",`+
		`"traceparent":"`+traceParent+`","tracestate":"a=b","time":"2025-01-02T03:04:05.6+02:00","data":{"arguments":{"a":[1,2.50,{"b":null}]}}}`), "t", "x")
	f.Add([]byte(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"c","source":"/s","runid":"r","datacontenttype":"application/vnd.x+json","data_base64":"eyJhcmd1bWVudHMiOnt9fQ=="}`), "t", "x")
	f.Add([]byte(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"c","source":"/s","runid":7,"data":{"arguments":{}}}`), "t", "x")
	f.Add([]byte(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"c","source":"/s","runid":"r","traceparent":"","tracestate":"x","data":{"arguments":{}}}`), "t", "x")
	f.Add([]byte(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"c","source":"/s","runid":"r","tenant":"T","data":{"arguments":{}}}`), "t", "x")
	f.Add([]byte(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"c","source":"/s","runid":"r","datacontenttype":"text/plain","data":"hi"}`), "t", "x")
	f.Add([]byte(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"c","source":"/s","runid":"r","data":{"arguments":{},"arguments":{}}}`), "t", "x")
	f.Add([]byte(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"c","source":"/s","runid":"r","data":{"arguments":[]}}`), "t", "x")
	f.Add([]byte(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"c","source":"/s","runid":"r","data":{"arguments":{"n":1e999999999}}}`), "t", "x")
	f.Add([]byte(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"c","source":"/s","runid":"r","subject":"y","data":{"arguments":{}}}`), "t", "x")
	f.Add([]byte(`{"specversion":"1.0","type":"io.tesserix.toolexec.call","id":"c","source":"/s","runid":"r","data":{"arguments":{}}}`), "t.u", "x*")
	f.Fuzz(func(t *testing.T, raw []byte, tenant, tool string) {
		var e event.Event
		if err := format.JSON.Unmarshal(raw, &e); err != nil {
			return // not an event sdk-go can read; Decode refuses it earlier
		}
		c, err := wire.CallFromEvent(e, tenant, tool)
		if err != nil {
			var re *events.RejectedError
			if !errors.As(err, &re) || !errors.Is(err, events.ErrRejected) {
				t.Fatalf("error %v (%T) is not a *RejectedError", err, err)
			}
			if !re.Code.IsRejection() || re.Message == "" {
				t.Fatalf("RejectedError{Code: %q, Msg: %q}: want a rejection code and a message", re.Code, re.Message)
			}
			return
		}
		if c.Tenant != tenant || c.Tool != tool {
			t.Fatalf("accepted a call for %q/%q published for %q/%q", c.Tenant, c.Tool, tenant, tool)
		}
		for _, tok := range []string{c.Tenant, c.Tool, c.RunID, c.CallID} {
			if !events.ValidToken(tok) {
				t.Fatalf("accepted a call with the token %q", tok)
			}
		}
		e2, err := wire.CallEvent(c)
		if err != nil {
			t.Fatalf("an accepted call cannot be made an event again: %v\ncall: %+v", err, c)
		}
		c2, err := wire.CallFromEvent(e2, tenant, tool)
		if err != nil {
			t.Fatalf("the event of an accepted call is rejected: %v\nevent: %s", err, e2)
		}
		if !equalCalls(c2, c) {
			t.Fatalf("the call changed on the way round:\n got %+v\nwant %+v", c2, c)
		}
	})
}
