package natsstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tesserix/toolexec/kvstore"
)

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

func encoded(v value) string {
	p := v.encode()
	defer putBuf(p)
	return string(*p)
}

// TestValueFormat pins the stored bytes: those every release so far has
// written (encoding/json's, HTML escaping off, fields in declaration order,
// invalid UTF-8 in a text as {"b64":...}), so that records written by either
// read alike.
func TestValueFormat(t *testing.T) {
	fixed := func(v value) value {
		v.Claim, v.Write = "c1", "w1"
		return v
	}
	for _, tt := range []struct {
		name string
		give value
		want string
	}{
		{"claimed", fixed(claimOf("worker-1", "", "", "book", false)),
			`{"v":1,"s":"claimed","h":"worker-1","c":"c1","w":"w1","l":1500000000,"ca":1700000000000000123,"k":"` +
				strings.Repeat("b", 64) + `","t":"book","run":"run","call":"call"}`},
		{"completed", fixed(claimOf("h", `{"seat":"<14C>","x":"a&b"}`, "", "", false)),
			`{"v":1,"s":"completed","h":"h","c":"c1","w":"w1","l":1500000000,"ca":1700000000000000123,"o":"{\"seat\":\"<14C>\",\"x\":\"a&b\"}","k":"` +
				strings.Repeat("b", 64) + `","run":"run","call":"call"}`},
		{"indeterminate", fixed(claimOf("\xff\xfe", "", "why\n\u2028\x01", "t", true)),
			`{"v":1,"s":"indeterminate","h":{"b64":"//4="},"c":"c1","w":"w1","l":1500000000,"ca":1700000000000000123,"r":"why\n\u2028\u0001","b":true,"k":"` +
				strings.Repeat("b", 64) + `","t":"t","run":"run","call":"call"}`},
		{"plain strings", value{Version: 1, State: "claimed", Claim: "ok\xc3\x28bad", Lease: -1 << 63, Created: 1<<63 - 1},
			`{"v":1,"s":"claimed","h":"","c":"ok\ufffd(bad","w":"","l":-9223372036854775808,"ca":9223372036854775807}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := encoded(tt.give); got != tt.want {
				t.Errorf("encode:\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestValueTextsRoundTrip: every text survives a write and a read, whatever its
// bytes.
func TestValueTextsRoundTrip(t *testing.T) {
	for _, s := range trickyStrings {
		for _, v := range []value{
			claimOf(s, "", "", s, false),
			claimOf("h", s, "", "", false),
			claimOf("h", "", s, "tool", true),
		} {
			b := encoded(v)
			back, err := decodeValue([]byte(b))
			if err != nil {
				t.Fatalf("decodeValue(%s): %v", b, err)
			}
			if back != v {
				t.Fatalf("decodeValue(encode(v)):\n got %+v\nwant %+v", back, v)
			}
		}
		if !utf8.ValidString(s) {
			continue
		}
		v := claimOf("h", "", "", "", false)
		v.Claim, v.Write = s, s
		if back, err := decodeValue([]byte(encoded(v))); err != nil || back != v {
			t.Fatalf("decodeValue(encode(%+v)) = %+v, %v", v, back, err)
		}
	}
}

// TestDecodeValueSpellings: the same document in other spellings of JSON reads
// alike, and what is not a record of this format is ErrCorrupt.
func TestDecodeValueSpellings(t *testing.T) {
	want := value{Version: 1, State: "claimed", Holder: "\xff\xfe", Lease: 0, Created: 1700000000123456789,
		Outcome: "a/bé😀\"\\\b\f\n\r\t", Entered: true}
	for _, give := range []string{
		` { "v" : 1 , "s" : "claimed" , "h" : { "b64" : "//4=" } , "l" : -0 , "ca" : 1700000000123456789 ,` +
			` "o":"x", "o" : "a\/b\u00e9\ud83d\ude00\"\\\b\f\n\r\t", "b":false, "b":true } `,
		`{"V":1,"S":"claimed","H":{"b64":"//4="},"CA":1700000000123456789,"O":"a/bé😀\"\\\b\f\n\r\t","B":true,"unknown":[1]}`,
	} {
		got, err := decodeValue([]byte(give))
		if err != nil || got != want {
			t.Errorf("decodeValue(%s):\n got %+v, %v\nwant %+v", give, got, err, want)
		}
	}
	for _, give := range []string{
		``, `{`, `null`, `[]`, `{}`, `{"v":2,"s":"claimed"}`, `{"v":1,"s":"other"}`, `{"v":1.5,"s":"claimed"}`,
		`{"v":1,"s":"claimed","h":1}`, `{"v":1,"s":"claimed","h":{"b64":"!!"}}`, `{"v":1,"s":"claimed"} x`,
	} {
		if _, err := decodeValue([]byte(give)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeValue(%q) = %v, want ErrCorrupt", give, err)
		}
	}
}

// BenchmarkValueJSON measures a completed record's encoding and decoding, as
// Record writes it and a duplicate's claim reads it.
func BenchmarkValueJSON(b *testing.B) {
	v := claimOf("bench-worker", `{"seat":"14C","confirmation":"K7Q2ZD"}`, "", "book", false)
	enc := []byte(encoded(v))
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			putBuf(v.encode())
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

// refText is text as encoding/json writes it through the MarshalJSON that
// stored values before appendValue: a string if valid UTF-8, else
// {"b64": base64}.
type refText string

func (t refText) MarshalJSON() ([]byte, error) {
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

// refEncode is the encoding every release before appendValue stored:
// encoding/json over value's fields and tags, HTML escaping off.
func refEncode(t *testing.T, v value) string {
	ref := struct {
		Version int     `json:"v"`
		State   string  `json:"s"`
		Holder  refText `json:"h"`
		Claim   string  `json:"c"`
		Write   string  `json:"w"`
		Lease   int64   `json:"l"`
		Created int64   `json:"ca"`
		Outcome refText `json:"o,omitempty"`
		Reason  refText `json:"r,omitempty"`
		Entered bool    `json:"b,omitempty"`
		Check   refText `json:"k,omitempty"`
		Tool    refText `json:"t,omitempty"`
		RunID   refText `json:"run,omitempty"`
		CallID  refText `json:"call,omitempty"`
	}{v.Version, v.State, refText(v.Holder), v.Claim, v.Write, v.Lease, v.Created, refText(v.Outcome), refText(v.Reason),
		v.Entered, refText(v.Check), refText(v.Tool), refText(v.RunID), refText(v.CallID)}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ref); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// TestAppendValueMatchesEncodingJSON: the hand-written encoding writes the
// very bytes encoding/json wrote, for every field's empty, plain and tricky
// strings (control characters, quotes, HTML, U+2028, invalid UTF-8) and
// random bytes, so that records of every release read alike.
func TestAppendValueMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func() string {
		switch n := rng.IntN(len(trickyStrings) + 2); {
		case n < len(trickyStrings):
			return trickyStrings[n]
		case n == len(trickyStrings):
			b := make([]byte, rng.IntN(40))
			for i := range b {
				b[i] = byte(rng.IntN(256))
			}
			return string(b)
		default:
			return "call_" + strings.Repeat("0a", rng.IntN(16))
		}
	}
	for i := range 20000 {
		v := value{
			Version: rng.IntN(3), State: pick(), Holder: text(pick()), Claim: pick(), Write: pick(),
			Lease: rng.Int64() - rng.Int64(), Created: rng.Int64(), Outcome: text(pick()), Reason: text(pick()),
			Entered: rng.IntN(2) == 0, Check: text(pick()), Tool: text(pick()), RunID: text(pick()), CallID: text(pick()),
		}
		if got, want := string(appendValue(nil, &v)), refEncode(t, v); got != want {
			t.Fatalf("value %d (%#v):\n got %s\nwant %s", i, v, got, want)
		}
	}
}

// jsonDecode is decodeValue's reading without parseValue: encoding/json's.
func jsonDecode(b []byte) (value, error) {
	var v value
	err := json.Unmarshal(b, &v)
	return v, err
}

// TestParseValueReadsWhatAppendValueWrites: the hand-written reader takes
// every value the hand-written writer writes, and reads it as encoding/json
// does.
func TestParseValueReadsWhatAppendValueWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 20000 {
		s := func() string { return trickyStrings[rng.IntN(len(trickyStrings))] }
		v := value{
			Version: rng.IntN(3), State: s(), Holder: text(s()), Claim: s(), Write: s(),
			Lease: rng.Int64() - rng.Int64(), Created: rng.Int64(), Outcome: text(s()), Reason: text(s()),
			Entered: rng.IntN(2) == 0, Check: text(s()), Tool: text(s()), RunID: text(s()), CallID: text(s()),
		}
		b := appendValue(nil, &v)
		want, err := jsonDecode(b)
		if err != nil {
			t.Fatalf("encoding/json cannot read %s: %v", b, err)
		}
		got, ok := parseValue(b)
		// \u escapes (U+2028, control characters) are left to encoding/json.
		if !ok && !bytes.Contains(b, []byte(`\u`)) {
			t.Fatalf("value %d: parseValue declined %s", i, b)
		}
		if ok && got != want {
			t.Fatalf("value %d: parseValue(%s)\n got %#v\nwant %#v", i, b, got, want)
		}
	}
}

// FuzzParseValue: whatever parseValue accepts, encoding/json accepts too and
// reads alike.
func FuzzParseValue(f *testing.F) {
	for _, v := range []value{
		claimOf("worker-1", "", "", "book", false),
		claimOf("h", `{"seat":"<14C>","x":"a\\b/c"}`, "", "", false),
		claimOf("\xff\xfe", "", "why\n\t", "t", true),
		{Version: 1, State: "claimed", Lease: -1 << 63, Created: 1<<63 - 1},
	} {
		f.Add(appendValue(nil, &v))
	}
	f.Add([]byte(`{"v":1,"s":"claimed","h":"x","c":"c","w":"w","l":01,"ca":2}`))
	f.Add([]byte(`{"v":1,"s":"claimed","h":{"b64":"//4="},"c":"c\/","w":"w","l":-0,"ca":2,"b":true}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, ok := parseValue(b)
		if !ok {
			return
		}
		want, err := jsonDecode(b)
		if err != nil {
			t.Fatalf("parseValue accepted %q, encoding/json refuses it: %v", b, err)
		}
		if got != want {
			t.Fatalf("parseValue(%q)\n got %#v\nwant %#v", b, got, want)
		}
	})
}
