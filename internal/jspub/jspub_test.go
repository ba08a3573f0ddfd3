package jspub

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
)

// sameResult reports whether two results of Parse agree: equal PubAcks, and
// errors with the same text that match the same sentinel or API error code.
func sameResult(a1 *jetstream.PubAck, e1 error, a2 *jetstream.PubAck, e2 error) bool {
	if !reflect.DeepEqual(a1, a2) || (e1 == nil) != (e2 == nil) {
		return false
	}
	if e1 == nil {
		return true
	}
	var x1, x2 *jetstream.APIError
	if errors.As(e1, &x1) != errors.As(e2, &x2) || (x1 != nil && *x1 != *x2) {
		return false
	}
	return e1.Error() == e2.Error()
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want *jetstream.PubAck
		err  error
		code jetstream.ErrorCode // of a server error
		api  bool                // a server error is expected (code may be 0)
		flat bool                // read without encoding/json
	}{
		{name: "plain", in: `{"stream":"S","seq":42}`, want: &jetstream.PubAck{Stream: "S", Sequence: 42}, flat: true},
		{name: "server spacing", in: `{"stream":"KV_b", "seq":7}`, want: &jetstream.PubAck{Stream: "KV_b", Sequence: 7}, flat: true},
		{name: "duplicate", in: `{"stream":"S", "seq":7,"duplicate": true}`, want: &jetstream.PubAck{Stream: "S", Sequence: 7, Duplicate: true}, flat: true},
		{name: "domain", in: " {\"stream\":\"S\",\"domain\":\"hub\",\"seq\":1}\n", want: &jetstream.PubAck{Stream: "S", Sequence: 1, Domain: "hub"}, flat: true},
		{name: "max seq", in: `{"stream":"S","seq":18446744073709551615}`, want: &jetstream.PubAck{Stream: "S", Sequence: 1<<64 - 1}, flat: true},
		{name: "seq overflows", in: `{"stream":"S","seq":18446744073709551616}`, err: jetstream.ErrInvalidJSAck},
		{name: "negative seq", in: `{"stream":"S","seq":-1}`, err: jetstream.ErrInvalidJSAck},
		{name: "fractional seq", in: `{"stream":"S","seq":1.5}`, err: jetstream.ErrInvalidJSAck},
		{name: "exponent seq", in: `{"stream":"S","seq":1e3}`, err: jetstream.ErrInvalidJSAck},
		{name: "escaped stream", in: `{"stream":"S\u0041","seq":1}`, want: &jetstream.PubAck{Stream: "SA", Sequence: 1}},
		{name: "other case", in: `{"Stream":"S","SEQ":3}`, want: &jetstream.PubAck{Stream: "S", Sequence: 3}},
		{name: "repeated member", in: `{"stream":"S","seq":1,"seq":2}`, want: &jetstream.PubAck{Stream: "S", Sequence: 2}},
		{name: "unknown member", in: `{"stream":"S","seq":1,"x":[1]}`, want: &jetstream.PubAck{Stream: "S", Sequence: 1}},
		{name: "no stream", in: `{"seq":1}`, err: jetstream.ErrInvalidJSAck, flat: true},
		{name: "empty stream", in: `{"stream":"","seq":1}`, err: jetstream.ErrInvalidJSAck, flat: true},
		{name: "empty object", in: `{}`, err: jetstream.ErrInvalidJSAck, flat: true},
		{name: "not JSON", in: `nope`, err: jetstream.ErrInvalidJSAck},
		{name: "trailing bytes", in: `{"stream":"S","seq":1}x`, err: jetstream.ErrInvalidJSAck},
		{name: "empty", in: ``, err: jetstream.ErrInvalidJSAck},
		{
			name: "server error",
			in:   `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"S","seq":0}`,
			code: 10071,
			api:  true,
			flat: true,
		},
		{
			name: "server error, escaped description",
			in:   `{"error":{"code":400,"err_code":10060,"description":"expected \"X\""},"stream":"S","seq":0}`,
			code: 10060,
			api:  true,
		},
		{name: "error code too large", in: `{"error":{"code":400,"err_code":70000}}`, err: jetstream.ErrInvalidJSAck},
		{name: "empty error", in: `{"error":{}}`, api: true, flat: true},
		{name: "null error", in: `{"error":null,"stream":"S","seq":1}`, want: &jetstream.PubAck{Stream: "S", Sequence: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ack, err := Parse([]byte(tc.in))
			jack, jerr := parseJSON([]byte(tc.in))
			if !sameResult(ack, err, jack, jerr) {
				t.Errorf("Parse = %+v, %v; encoding/json reads %+v, %v", ack, err, jack, jerr)
			}
			if _, _, ok := parseFlat([]byte(tc.in)); ok != tc.flat {
				t.Errorf("read by hand: %v, want %v", ok, tc.flat)
			}
			switch {
			case tc.api:
				var apiErr *jetstream.APIError
				if !errors.As(err, &apiErr) || apiErr.ErrorCode != tc.code {
					t.Errorf("error %v, want API error %d", err, tc.code)
				}
			case tc.err != nil:
				if !errors.Is(err, tc.err) {
					t.Errorf("error %v, want %v", err, tc.err)
				}
			default:
				if err != nil || !reflect.DeepEqual(ack, tc.want) {
					t.Errorf("Parse = %+v, %v; want %+v", ack, err, tc.want)
				}
			}
		})
	}
}

// FuzzParse: Parse answers as encoding/json does, for any input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"stream":"S","seq":42}`, `{"stream":"S", "seq":7,"duplicate": true}`, `{"stream":"S","domain":"d","val":"1","seq":1}`,
		`{"error":{"code":503,"err_code":10039,"description":"x"}}`, `{"stream":"S\"","seq":01}`, `{"seq":1,"stream":"é"}`,
		`{"stream":"S","seq":1,"duplicate":false}`, `{"stream":"S","seq":1,"duplicate":null}`, ` { } `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ack, err := Parse(b)
		jack, jerr := parseJSON(b)
		if !sameResult(ack, err, jack, jerr) {
			t.Fatalf("%q: Parse = %+v, %v; encoding/json reads %+v, %v", b, ack, err, jack, jerr)
		}
	})
}

// TestPublishMsg against a server: PubAcks, duplicates, a refused expectation
// and a subject no stream holds answer as nats.go's PublishMsg does.
func TestPublishMsg(t *testing.T) {
	s := natstest.Start(t)
	nc := natstest.Connect(t, s)
	js := natstest.JetStream(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	p := Publisher{Conn: nc, Timeout: 5 * time.Second}
	msg := func(subj string, h nats.Header) *nats.Msg {
		return &nats.Msg{Subject: subj, Header: h, Data: []byte("x")}
	}

	ack, err := p.PublishMsg(ctx, msg("s.a", nats.Header{jetstream.MsgIDHeader: {"m1"}}))
	if err != nil || ack.Stream != "S" || ack.Sequence != 1 || ack.Duplicate {
		t.Fatalf("first publish: %+v, %v", ack, err)
	}
	ack, err = p.PublishMsg(context.Background(), msg("s.a", nats.Header{jetstream.MsgIDHeader: {"m1"}}))
	if err != nil || ack.Sequence != 1 || !ack.Duplicate {
		t.Fatalf("same message id again: %+v, %v; want a duplicate of 1", ack, err)
	}
	_, err = p.PublishMsg(ctx, msg("s.a", nats.Header{jetstream.ExpectedLastSubjSeqHeader: {"5"}}))
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		t.Errorf("publish expecting a wrong last sequence: %v, want API error %d", err, jetstream.JSErrCodeStreamWrongLastSequence)
	}
	_, jsErr := js.PublishMsg(ctx, msg("s.a", nats.Header{jetstream.ExpectedLastSubjSeqHeader: {"5"}}))
	if err == nil || jsErr == nil || err.Error() != jsErr.Error() {
		t.Errorf("refused publish: %v; nats.go says %v", err, jsErr)
	}
	_, err = p.PublishMsg(ctx, msg("s.a", nats.Header{jetstream.ExpectedStreamHeader: {"T"}}))
	if !errors.As(err, &apiErr) {
		t.Errorf("publish expecting another stream: %v, want an API error", err)
	}
	_, err = p.PublishMsg(ctx, msg("nowhere", nil))
	if !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("publish to no stream: %v, want ErrNoStreamResponse", err)
	}
	if _, err := p.PublishMsg(ctx, msg("s.a", nil), jetstream.WithMsgID("x")); !errors.Is(err, jetstream.ErrInvalidOption) {
		t.Errorf("publish with an option: %v, want ErrInvalidOption", err)
	}
}

// BenchmarkParse reads a PubAck and a refusal by hand and with encoding/json.
func BenchmarkParse(b *testing.B) {
	for _, in := range []struct {
		name, data string
		refused    bool
	}{
		{"ack", `{"stream":"KV_toolexec_idempotency", "seq":123456}`, false},
		{"refusal", `{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"KV_toolexec_idempotency","seq":0}`, true},
	} {
		for _, p := range []struct {
			name  string
			parse func([]byte) (*jetstream.PubAck, error)
		}{{"flat", Parse}, {"encoding-json", parseJSON}} {
			b.Run(in.name+"/"+p.name, func(b *testing.B) {
				data := []byte(in.data)
				b.ReportAllocs()
				for b.Loop() {
					if _, err := p.parse(data); (err != nil) != in.refused {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
