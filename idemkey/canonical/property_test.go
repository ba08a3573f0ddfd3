package canonical_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"golang.org/x/text/unicode/norm"
	"pgregory.net/rapid"

	"github.com/tesserix/toolexec/idemkey/canonical"
	"github.com/tesserix/toolexec/internal/testkit/canonicaltest"
)

// TestPropSpellingsAgree: every spelling of a value has one canonical form, which is
// its own canonical form, valid JSON, and means what the spelling means.
func TestPropSpellingsAgree(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		v := canonicaltest.Values(4).Draw(t, "value")
		plain := canonicaltest.Plain(v)
		spelled := canonicaltest.Spell(t, v)
		want, err := canonical.Canonicalize([]byte(plain))
		if err != nil {
			t.Fatalf("Canonicalize(%q): %v", plain, err)
		}
		got, err := canonical.Canonicalize([]byte(spelled))
		if err != nil {
			t.Fatalf("Canonicalize(%q): %v", spelled, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("spellings disagree\nplain   %q -> %q\nspelled %q -> %q", plain, want, spelled, got)
		}
		checkOutput(t, []byte(spelled), got)
	})
}

// TestPropNotEqualWhenDifferent: values that differ (as JSON with NFC strings and
// numbers compared as doubles) never share a canonical form.
func TestPropNotEqualWhenDifferent(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		a := canonicaltest.Plain(canonicaltest.Values(3).Draw(t, "a"))
		b := canonicaltest.Plain(canonicaltest.Values(3).Draw(t, "b"))
		ca, errA := canonical.Canonicalize([]byte(a))
		cb, errB := canonical.Canonicalize([]byte(b))
		if errA != nil || errB != nil {
			t.Fatalf("errors: %v, %v", errA, errB)
		}
		if bytes.Equal(ca, cb) && !reflect.DeepEqual(decodeNFC(t, []byte(a)), decodeNFC(t, []byte(b))) {
			t.Fatalf("%q and %q differ but both canonicalise to %q", a, b, ca)
		}
	})
}

// checkOutput checks what must hold of every canonical output out of input raw.
func checkOutput(t fataler, raw, out []byte) {
	t.Helper()
	again, err := canonical.Canonicalize(out)
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("not idempotent: %q -> %q, %v", out, again, err)
	}
	if !json.Valid(out) {
		t.Fatalf("output %q is not valid JSON", out)
	}
	if !json.Valid(raw) {
		t.Fatalf("input %q was accepted but encoding/json refuses it", raw)
	}
	if want, got := decodeNFC(t, raw), decode(t, out); !reflect.DeepEqual(want, got) {
		t.Fatalf("meaning changed: %q means %#v, canonical %q means %#v", raw, want, out, got)
	}
}

type fataler interface {
	Helper()
	Fatalf(string, ...any)
}

func decode(t fataler, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("encoding/json cannot decode %q: %v", b, err)
	}
	return v
}

// decodeNFC decodes b with encoding/json and normalises every string to NFC.
func decodeNFC(t fataler, b []byte) any {
	t.Helper()
	return nfc(decode(t, b))
}

func nfc(v any) any {
	switch v := v.(type) {
	case string:
		return norm.NFC.String(v)
	case []any:
		for i := range v {
			v[i] = nfc(v[i])
		}
		return v
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[norm.NFC.String(k)] = nfc(e)
		}
		return m
	}
	return v
}
