package wire

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/cloudevents/sdk-go/v2/event"

	"github.com/tesserix/toolexec/internal/jsonobj"
)

// plainSeeds are payloads in the shapes toolexec writes (a call, each kind of
// answer) and near misses that plainEvent must leave to the SDK.
var plainSeeds = []string{
	`{"specversion":"1.0","id":"c1","source":"/agents/planner","type":"io.tesserix.toolexec.call","subject":"book","datacontenttype":"application/json","time":"2025-01-02T03:04:05.678Z","data":{"arguments":{"flight":"LH1","seats":2}},"runid":"r1","tenant":"acme","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}`,
	`{"specversion":"1.0","id":"a-c1","source":"/toolexec/executor","type":"io.tesserix.toolexec.completed","subject":"book","datacontenttype":"application/json","time":"2026-05-01T12:00:00Z","data":{"tool":"book","outcome":"VGUQR2"},"callid":"c1","idempotencykey":"dcaca72c477ec402dd504f145eb9fa54d2964d52f26edc7cd656608baca21496","runid":"r1","tenant":"acme"}`,
	`{"specversion":"1.0","id":"a-c2","source":"/x","type":"io.tesserix.toolexec.indeterminate","datacontenttype":"application/json","data":{"tool":"book","body_entered":true,"reason":"timeout"},"callid":"c2","tenant":"acme","traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"a=b"}`,
	` { "data" : null , "datacontenttype" : "application/json" , "specversion" : "1.0" , "id" : "x" , "source" : "urn:a" , "type" : "t" } `,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t"}`,
	`{"specversion":"1.0","id":"","source":"/a","type":"t"}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","subject":""}`,
	`{"specversion":"1.0","id":"c\u0031","source":"/a","type":"t"}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","time":"yesterday"}`,
	`{"specversion":"1.0","id":"c1","source":"%zz","type":"t"}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","data":{"a":1}}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","datacontenttype":"text/plain","data":"hi"}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","datacontenttype":"application/json; charset=utf-8","data":{}}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","data_base64":"aGk="}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","dataschema":"https://x/s"}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","comment":"hi"}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","tenant":7}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","tenant":""}`,
	`{"specversion":"1.0","id":1,"source":"/a","type":"t"}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","runid":null}`,
	`{"specversion":"1.0","id":"c1","source":"/a","type":"t","datacontenttype":"application/json","data":"text"}`,
}

// FuzzPlainEvent holds plainEvent to the SDK's reader: whatever payload it
// accepts, the SDK reads to the same event. (What it declines the SDK reads
// anyway, so declining is always safe; accepting is what must be right.)
func FuzzPlainEvent(f *testing.F) {
	for _, s := range plainSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) || !json.Valid(data) {
			return // refused before plainEvent is asked
		}
		top, dup, isObject := attributeNames.Members(data)
		if !isObject || dup != "" || loneSurrogateIn(top) != "" || !isSpecVersion1(top) {
			return
		}
		fast, ok := plainEvent(top)
		if !ok {
			return
		}
		var slow event.Event
		if err := slow.UnmarshalJSON(data); err != nil {
			t.Fatalf("plainEvent accepted what the SDK refuses (%v):\n%s", err, data)
		}
		// The data's bytes may differ by the space around them.
		fast.DataEncoded, slow.DataEncoded = bytes.TrimSpace(fast.DataEncoded), bytes.TrimSpace(slow.DataEncoded)
		if len(slow.DataEncoded) == 0 {
			slow.DataEncoded = nil
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("plainEvent and the SDK disagree on\n%s\nplain: %#v %s\nSDK:   %#v %s", data, fast.Context, fast.DataEncoded, slow.Context, slow.DataEncoded)
		}
	})
}

// TestPlainEventTakesToolexecShapes checks that the payloads toolexec writes
// take the fast path, so FuzzPlainEvent's agreement covers the hot path.
func TestPlainEventTakesToolexecShapes(t *testing.T) {
	for _, s := range plainSeeds[:4] {
		top, _, _ := jsonobj.Members([]byte(s))
		if _, ok := plainEvent(top); !ok {
			t.Errorf("plainEvent declined %s", s)
		}
	}
}

// isSpecVersion1 reports whether top's specversion is written "1.0".
func isSpecVersion1(top jsonobj.Object) bool {
	v, ok := top.Get("specversion")
	return ok && string(v) == `"1.0"`
}
