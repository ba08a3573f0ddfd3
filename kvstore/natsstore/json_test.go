package natsstore

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tesserix/toolexec/kvstore"
)

// legacyValue and legacyText are value and text as this package encoded them
// with encoding/json before appendJSON: the reference appendJSON must match
// byte for byte, so that records written by either read alike.
type legacyValue struct {
	Version int        `json:"v"`
	State   string     `json:"s"`
	Holder  legacyText `json:"h"`
	Claim   string     `json:"c"`
	Write   string     `json:"w"`
	Lease   int64      `json:"l"`
	Created int64      `json:"ca"`
	Outcome legacyText `json:"o,omitempty"`
	Reason  legacyText `json:"r,omitempty"`
	Entered bool       `json:"b,omitempty"`
	Check   legacyText `json:"k,omitempty"`
	Tool    legacyText `json:"t,omitempty"`
	RunID   legacyText `json:"run,omitempty"`
	CallID  legacyText `json:"call,omitempty"`
}

type legacyText string

func (t legacyText) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(t)) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(string(t)); err != nil {
			return nil, err
		}
		return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
	}
	return json.Marshal(struct {
		B64 []byte `json:"b64"`
	}{[]byte(t)})
}

func legacyEncode(t testing.TB, v value) []byte {
	t.Helper()
	l := legacyValue{
		Version: v.Version, State: v.State, Holder: legacyText(v.Holder), Claim: v.Claim, Write: v.Write,
		Lease: v.Lease, Created: v.Created, Outcome: legacyText(v.Outcome), Reason: legacyText(v.Reason),
		Entered: v.Entered, Check: legacyText(v.Check), Tool: legacyText(v.Tool), RunID: legacyText(v.RunID),
		CallID: legacyText(v.CallID),
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(l); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// trickyStrings exercise every escape and the base64 form.
var trickyStrings = []string{
	"", "plain", `quote " backslash \ slash /`, "<html> & 'apos'", "\x00\x01\x1f\x7f",
	"\b\f\n\r\t", "é ü 中文 😀", "\u2028\u2029", "\ufffd", "\xff\xfe", "ok\xc3\x28bad",
	"\xed\xa0\x80", // an encoded surrogate: invalid UTF-8
	`{"b64":"x"}`, strings.Repeat("long ", 300),
}

func claimOf(holder, outcome, reason, tool string, entered bool) value {
	v := newClaim(kvstore.ClaimRequest{
		Holder: holder, Lease: 1500 * time.Millisecond, CheckDigest: strings.Repeat("b", 64),
		Tool: tool, RunID: "run", CallID: "call",
	}, time.Unix(1_700_000_000, 123))
	if outcome != "" {
		v = v.next(kvstore.StateCompleted)
		v.Outcome = text(outcome)
	}
	if reason != "" || entered {
		v = v.next(kvstore.StateIndeterminate)
		v.Reason, v.Entered = text(reason), entered
	}
	return v
}

// checkValueJSON holds appendJSON to encoding/json's bytes and parseValue to
// reading them back unchanged.
func checkValueJSON(t *testing.T, v value) {
	t.Helper()
	got, want := v.appendJSON(nil), legacyEncode(t, v)
	if !bytes.Equal(got, want) {
		t.Fatalf("appendJSON(%+v):\n got %s\nwant %s", v, got, want)
	}
	back, ok := parseValue(got)
	if !ok {
		t.Fatalf("parseValue(%s) gave up on its own encoding", got)
	}
	if back != v {
		t.Fatalf("parseValue(appendJSON(v)):\n got %+v\nwant %+v", back, v)
	}
	checkParseValue(t, got)
}

// checkParseValue holds parseValue to encoding/json: where it reads b at all,
// it reads what encoding/json reads.
func checkParseValue(t *testing.T, b []byte) {
	t.Helper()
	got, ok := parseValue(b)
	if !ok {
		return
	}
	want, err := unmarshalValue(b)
	if err != nil {
		t.Fatalf("parseValue(%q) = %+v, but encoding/json refuses it: %v", b, got, err)
	}
	if got != want {
		t.Fatalf("parseValue(%q):\n got %+v\nwant %+v (encoding/json)", b, got, want)
	}
}

func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range trickyStrings {
		checkValueJSON(t, claimOf(s, "", "", s, false))
		checkValueJSON(t, claimOf("h", s, "", "", false))
		checkValueJSON(t, claimOf("h", "", s, "tool", true))
		v := claimOf("h", "", "", "", false)
		v.State, v.Claim, v.Write = s, s, s // plain strings: invalid UTF-8 becomes \ufffd
		v.Lease, v.Created, v.Version = -1<<63, 1<<63-1, -7
		if utf8.ValidString(s) {
			checkValueJSON(t, v)
		} else if got, want := v.appendJSON(nil), legacyEncode(t, v); !bytes.Equal(got, want) {
			t.Fatalf("appendJSON(%+v):\n got %s\nwant %s", v, got, want)
		}
	}
}

func TestParseValueAgreesWithEncodingJSON(t *testing.T) {
	for _, give := range parseSeeds {
		checkParseValue(t, []byte(give))
	}
	// What parseValue must take itself, not leave to encoding/json.
	for _, give := range []string{
		` { "v" : 1 , "s" : "claimed" , "h" : { "b64" : "//4=" } , "l" : -0 , "ca" : 1700000000123456789 } `,
		`{"v":1,"s":"completed","h":"a\/b\u00e9\ud83d\ude00\"\\\b\f\n\r\t","o":"x","o":"y","b":false,"b":true}`,
		`{}`,
	} {
		if _, ok := parseValue([]byte(give)); !ok {
			t.Errorf("parseValue(%s) gave up", give)
		}
	}
}

// parseSeeds are JSON documents near the edges of what parseValue takes.
var parseSeeds = []string{
	``, `{`, `}`, `[]`, `null`, `{}`, `{} x`, `{"v":1}`, `{"v":1,}`, `{"v":1 "s":"x"}`,
	`{"v":1,"s":"claimed","h":"a","c":"c","w":"w","l":1,"ca":2}`,
	`{"V":1}`, `{"v":1.0}`, `{"v":1e0}`, `{"v":01}`, `{"v":-}`, `{"v":"1"}`, `{"v":null}`,
	`{"l":9223372036854775807}`, `{"l":9223372036854775808}`, `{"l":-9223372036854775808}`,
	`{"l":-9223372036854775809}`, `{"l":12345678901234567890}`,
	`{"b":true}`, `{"b":tru}`, `{"b":truex}`, `{"b":null}`, `{"b":1}`,
	`{"h":{"b64":"AQI="}}`, `{"h":{"b64":"AQI"}}`, `{"h":{"b64":"!!"}}`, `{"h":{"B64":"AQI="}}`,
	`{"h":{"b64":"AQI=","x":1}}`, `{"h":{}}`, `{"h":{"b64":null}}`, `{"h":null}`, `{"h":1}`,
	`{"h":"\ud800"}`, `{"h":"\ud800\u0041"}`, `{"h":"\udc00\ud800"}`, `{"h":"\u00"}`, `{"h":"\x"}`,
	"{\"h\":\"\x01\"}", "{\"h\":\"\xff\"}", "{\"h\":\"\xc3\"}", `{"h":"\u0000"}`, `{"h":"\uFFFD"}`,
	`{"unknown":1}`, `{"run":"r","call":"c","k":"k","t":"t","r":"r"}`, "\t{\"v\":1}\r\n",
	"\ufeff{\"v\":1}", `{"v":1}{"v":2}`, `{"s":"a\u2028b"}`,
}

// FuzzValueJSON encodes values made of arbitrary strings and holds appendJSON
// to encoding/json's bytes and parseValue to reading them back.
func FuzzValueJSON(f *testing.F) {
	for _, s := range trickyStrings {
		f.Add(s, s, s, int64(1500), false)
	}
	f.Fuzz(func(t *testing.T, holder, outcome, tool string, lease int64, entered bool) {
		v := claimOf(holder, outcome, "", tool, false)
		v.Lease = lease
		if entered {
			v = v.next(kvstore.StateIndeterminate)
			v.Reason, v.Entered = text(outcome), true
		}
		checkValueJSON(t, v)
	})
}

// FuzzParseValue feeds parseValue arbitrary bytes: where it reads them at all,
// it reads what encoding/json reads.
func FuzzParseValue(f *testing.F) {
	for _, s := range parseSeeds {
		f.Add([]byte(s))
	}
	for _, s := range trickyStrings {
		v := claimOf(s, s, "", s, false)
		f.Add(v.appendJSON(nil))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkParseValue(t, b)
	})
}

// BenchmarkValueJSON compares appendJSON and parseValue with the encoding/json
// paths they replace, on a completed record as Record writes it.
func BenchmarkValueJSON(b *testing.B) {
	v := claimOf("bench-worker", `{"seat":"14C","confirmation":"K7Q2ZD"}`, "", "book", false)
	enc := v.appendJSON(nil)
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			putBuf(v.encode())
		}
	})
	b.Run("encode/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			legacyEncode(b, v)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeValue(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := unmarshalValue(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkToken measures what Claim and Renew spend making a lease's token
// and every holder write spends reading it.
func BenchmarkToken(b *testing.B) {
	tok := token{Rev: 12345, Value: claimOf("bench-worker", "", "", "book", false)}
	s := tok.String()
	b.Run("String", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = tok.String()
		}
	})
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseToken(s); err != nil {
				b.Fatal(err)
			}
		}
	})
}
