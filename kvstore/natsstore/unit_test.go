package natsstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tesserix/toolexec/internal/testkit/natstest"
	"github.com/tesserix/toolexec/kvstore"
)

func TestIsConflict(t *testing.T) {
	tests := []struct {
		name string
		give error
		want bool
	}{
		{"ErrKeyExists", jetstream.ErrKeyExists, true},
		{"wrapped ErrKeyExists", fmt.Errorf("x: %w", jetstream.ErrKeyExists), true},
		{"ErrKeyRevisionMismatch", fmt.Errorf("%w: %w", &jetstream.APIError{ErrorCode: 10164}, jetstream.ErrKeyRevisionMismatch), true},
		{"raw 10071", &jetstream.APIError{Code: 400, ErrorCode: 10071, Description: "wrong last sequence: 3"}, true},
		{"raw 10164 (replicated streams, not wrapped by Create's retry)", &jetstream.APIError{Code: 400, ErrorCode: 10164, Description: "wrong last sequence"}, true},
		{"wrapped raw 10164", fmt.Errorf("publish: %w", &jetstream.APIError{ErrorCode: 10164}), true},
		{"other API error", &jetstream.APIError{Code: 503, ErrorCode: 10008}, false},
		{"message too large", jetstream.ErrStreamMessageExceedsMaximum, false},
		{"timeout", nats.ErrTimeout, false},
		{"connection closed", nats.ErrConnectionClosed, false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isConflict(tt.give); got != tt.want {
				t.Errorf("isConflict(%v) = %t, want %t", tt.give, got, tt.want)
			}
		})
	}
}

func TestNotWritten(t *testing.T) {
	tests := []struct {
		name string
		give error
		want bool
	}{
		{"no responders", nats.ErrNoResponders, true},
		{"no stream response", jetstream.ErrNoStreamResponse, true},
		{"connection closed", nats.ErrConnectionClosed, true},
		{"max payload", nats.ErrMaxPayload, true},
		{"timeout is ambiguous", nats.ErrTimeout, false},
		{"deadline is ambiguous", fmt.Errorf("x: %w", errors.New("context deadline exceeded")), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := notWritten(tt.give); got != tt.want {
				t.Errorf("notWritten(%v) = %t, want %t", tt.give, got, tt.want)
			}
		})
	}
}

func TestUnavailableWraps(t *testing.T) {
	err := unavailable("claim", nats.ErrConnectionClosed)
	if !errors.Is(err, kvstore.ErrUnavailable) || !errors.Is(err, nats.ErrConnectionClosed) {
		t.Errorf("unavailable(...) = %v: want both ErrUnavailable and the cause", err)
	}
	if again := unavailable("wait", err); strings.Count(again.Error(), kvstore.ErrUnavailable.Error()) != 1 {
		t.Errorf("wrapping twice repeats the sentinel: %v", again)
	}
}

func TestValueRoundTrip(t *testing.T) {
	created := time.Unix(1_700_000_000, 123)
	req := kvstore.ClaimRequest{
		Tenant: "t", Key: strings.Repeat("a", 64), Holder: "worker\xff\xfe-1", Lease: 1500 * time.Millisecond,
		CheckDigest: strings.Repeat("b", 64), Tool: "book <seat> & go", RunID: "run", CallID: "call",
	}
	v := newClaim(req, created).next(kvstore.StateCompleted)
	v.Outcome = text("binary \x00\x01\xc3\x28 and <html> & \"quotes\"")
	b := *v.encode()
	if strings.Contains(string(b), `\u003c`) {
		t.Errorf("encoding escapes HTML, wasting space: %s", b)
	}
	got, err := decodeValue(b)
	if err != nil {
		t.Fatalf("decodeValue(%s): %v", b, err)
	}
	if got != v {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, v)
	}
	rec := got.record("t", req.Key, 7, created.Add(time.Second), time.Hour)
	if rec.Holder != req.Holder || rec.Outcome != string(v.Outcome) || rec.Tool != req.Tool {
		t.Errorf("record() lost bytes: %+v", rec)
	}
	if !rec.CreatedAt.Equal(created) || rec.Revision != 7 || !rec.ExpiresAt.Equal(created.Add(time.Second+time.Hour)) {
		t.Errorf("record() times: created %v revision %d expires %v", rec.CreatedAt, rec.Revision, rec.ExpiresAt)
	}
	if !rec.LeaseUntil.IsZero() {
		t.Errorf("a completed record has LeaseUntil %v", rec.LeaseUntil)
	}
}

func TestDecodeValueRefusesForeignData(t *testing.T) {
	for _, give := range []string{``, `not json`, `{}`, `{"v":2,"s":"claimed"}`, `{"v":1,"s":"seen"}`, `{"v":1}`} {
		if _, err := decodeValue([]byte(give)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("decodeValue(%q) = %v, want ErrCorrupt", give, err)
		}
	}
}

func TestTokenRoundTrip(t *testing.T) {
	for _, holder := range []string{"h", "", "\xff\x00 worker", strings.Repeat("w", 300)} {
		v := newClaim(kvstore.ClaimRequest{
			Holder: holder, Lease: time.Second, CheckDigest: strings.Repeat("c", 64), Tool: "x", RunID: "r", CallID: "c",
		}, time.Unix(-5, 0))
		tok := token{Rev: 1<<64 - 1, Value: v}
		got, err := parseToken(tok.String())
		if err != nil {
			t.Fatalf("parseToken(String()) of holder %q: %v", holder, err)
		}
		// The write id is not carried: every write draws its own.
		tok.Value.Write = ""
		if got != tok {
			t.Errorf("parseToken(String()) = %+v, want %+v", got, tok)
		}
	}
}

// TestTokenIsCompact: the token carries no more of the claim than a holder's
// next write keeps.
func TestTokenIsCompact(t *testing.T) {
	v := newClaim(kvstore.ClaimRequest{Holder: "h", Lease: time.Second, Tool: "x"}, time.Now())
	s := token{Rev: 3, Value: v}.String()
	if strings.Contains(s, v.Write) || len(s) > 100 {
		t.Errorf("token %q (%d bytes) carries more than the claim's id, holder, lease and times", s, len(s))
	}
}

func TestParseTokenRefusesForeignTokens(t *testing.T) {
	v := newClaim(kvstore.ClaimRequest{Holder: "h", Lease: time.Second}, time.Now())
	good := token{Rev: 3, Value: v}.String()
	body := strings.TrimPrefix(good, tokenPrefix)
	noRev := token{Rev: 0, Value: v}.String()
	v.Lease = 0
	noLease := token{Rev: 3, Value: v}.String()
	old := "n1.3.eyJ2IjoxLCJzIjoiY2xhaW1lZCJ9" // the first layout's
	for _, give := range []string{
		"", "1", tokenPrefix, "n1." + body, "n3." + body, good[:len(good)-2], good + "AA", tokenPrefix + "!!!",
		noRev, noLease, old,
	} {
		if _, err := parseToken(give); !errors.Is(err, kvstore.ErrNotHolder) {
			t.Errorf("parseToken(%q) = %v, want ErrNotHolder", give, err)
		}
	}
}

// TestCheckKey: the keys the store builds come only from tenants and digests
// that kvstore.CheckKey accepts, and it refuses the probe key's first character.
func TestCheckKey(t *testing.T) {
	d := strings.Repeat("0", 64)
	tests := []struct {
		tenant, digest string
		ok             bool
	}{
		{"acme", d, true},
		{"A-z_09", strings.Repeat("f", 64), true},
		{strings.Repeat("a", 128), d, true},
		{strings.Repeat("a", 129), d, false},
		{"", d, false},
		{"a.b", d, false},
		{"a>", d, false},
		{"=clock", d, false}, // the probe key's first character is no tenant's
		{"acme", strings.Repeat("F", 64), false},
		{"acme", d[:63], false},
	}
	for _, tt := range tests {
		err := kvstore.CheckKey(tt.tenant, tt.digest)
		if (err == nil) != tt.ok {
			t.Errorf("CheckKey(%q, %q) = %v, want ok=%t", tt.tenant, tt.digest, err, tt.ok)
		}
		if err != nil && !errors.Is(err, kvstore.ErrInvalid) {
			t.Errorf("CheckKey(%q, %q) = %v, want ErrInvalid", tt.tenant, tt.digest, err)
		}
	}
}

func TestAPIPrefixOf(t *testing.T) {
	nc := natstest.Connect(t, single)
	withDomain, err := jetstream.NewWithDomain(nc, "hub")
	if err != nil {
		t.Fatal(err)
	}
	withPrefix, err := jetstream.NewWithAPIPrefix(nc, "$JS.acme.API")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		js        jetstream.JetStream
		want, put string
	}{
		{"default", natstest.JetStream(t, nc), "$JS.API.", "$KV.b."},
		{"domain", withDomain, "$JS.hub.API.", "$JS.hub.API.$KV.b."},
		{"prefix without dot", withPrefix, "$JS.acme.API.", "$JS.acme.API.$KV.b."},
	}
	for _, tt := range tests {
		if got := apiPrefixOf(tt.js); got != tt.want {
			t.Errorf("%s: apiPrefixOf = %q, want %q", tt.name, got, tt.want)
		}
		// Writes go where nats.go's KV writes go: behind an API prefix of
		// js's own.
		if got := putPrefixOf(tt.js, "b"); got != tt.put {
			t.Errorf("%s: putPrefixOf = %q, want %q", tt.name, got, tt.put)
		}
	}
}
