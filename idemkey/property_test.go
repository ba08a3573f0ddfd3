package idemkey_test

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"golang.org/x/text/unicode/norm"
	"pgregory.net/rapid"

	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/idemkey/canonical"
	"github.com/tesserix/toolexec/internal/testkit/canonicaltest"
)

// drawCall draws a call's arguments and a choice of key arguments among them: nil
// (every argument), or a subset in random order, with repeats, spelled in NFC or NFD.
func drawCall(t *rapid.T) (canonicaltest.Value, []string) {
	args := canonicaltest.Objects(4).Draw(t, "arguments")
	if rapid.IntRange(0, 3).Draw(t, "allCount") == 0 {
		return args, nil
	}
	var names []string
	for _, m := range args.Members {
		if rapid.Bool().Draw(t, "pick") {
			name := m.Name
			if rapid.Bool().Draw(t, "nfd") {
				name = norm.NFD.String(name)
			}
			names = append(names, name)
			if rapid.IntRange(0, 4).Draw(t, "repeat") == 0 {
				names = append(names, m.Name)
			}
		}
	}
	names = rapid.Permutation(names).Draw(t, "keyOrder")
	if names == nil {
		names = []string{}
	}
	return args, names
}

// TestPropRespelledCallsShareTheKey: member order, whitespace, NFC or NFD, escapes and
// number notation (2, 2.0, 20e-1, 0.2e1, 2E0) never change the key, nor does
// spelling the tenant, run or tool in NFD.
func TestPropRespelledCallsShareTheKey(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		args, keyArgs := drawCall(t)
		tenant := canonicaltest.Strings().Draw(t, "tenant")
		run := canonicaltest.Strings().Draw(t, "run")
		tool := canonicaltest.Strings().Draw(t, "tool")
		want, err := idemkey.Derive(tenant, run, tool, []byte(canonicaltest.Plain(args)), keyArgs)
		if err != nil {
			t.Fatalf("plain spelling: %v", err)
		}
		spelled := canonicaltest.Spell(t, args)
		got, err := idemkey.Derive(norm.NFD.String(tenant), norm.NFD.String(run), norm.NFD.String(tool), []byte(spelled), keyArgs)
		if err != nil {
			t.Fatalf("spelling %q: %v", spelled, err)
		}
		if got.Hex != want.Hex || !bytes.Equal(got.Canonical, want.Canonical) {
			t.Fatalf("spelling %q changed the key\n got %s %s\nwant %s %s", spelled, got.Hex, got.Canonical, want.Hex, want.Canonical)
		}
		checkKey(t, got)
	})
}

// TestPropAllNamedIsAll: naming every argument, in any order, is the same as nil.
func TestPropAllNamedIsAll(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		raw := []byte(canonicaltest.Plain(canonicaltest.Objects(3).Draw(t, "arguments")))
		args, err := idemkey.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		all, err := args.Key("acme", "run_1", "book", nil)
		if err != nil {
			t.Fatal(err)
		}
		names := rapid.Permutation(args.Names()).Draw(t, "names")
		if names == nil {
			names = []string{}
		}
		named, err := args.Key("acme", "run_1", "book", names)
		if err != nil {
			t.Fatal(err)
		}
		if named.Hex != all.Hex {
			t.Fatalf("naming every argument gives %s, nil gives %s", named.Canonical, all.Canonical)
		}
	})
}

// TestPropTrueIsNotOne: a boolean never collapses into a number, whatever else the
// arguments hold.
func TestPropTrueIsNotOne(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		base := canonicaltest.Objects(3).Draw(t, "arguments")
		b := rapid.Bool().Draw(t, "bool")
		num := "0"
		if b {
			num = "1"
		}
		name := "flag"
		for slices.ContainsFunc(base.Members, func(m canonicaltest.Member) bool { return norm.NFC.String(m.Name) == name }) {
			name += "_"
		}
		boolArgs := append(slices.Clone(base.Members), canonicaltest.Member{Name: name, Value: canonicaltest.Value{Kind: canonicaltest.Bool, Bool: b}})
		numArgs := append(slices.Clone(base.Members), canonicaltest.Member{Name: name, Value: canonicaltest.Value{Kind: canonicaltest.Number, Num: canonicaltest.MakeNum(false, num, 0)}})
		keyArgs := []string{name}
		if rapid.Bool().Draw(t, "all") {
			keyArgs = nil
		}
		kb, err := idemkey.Derive("acme", "run_1", "book", []byte(canonicaltest.Spell(t, canonicaltest.Value{Kind: canonicaltest.Object, Members: boolArgs})), keyArgs)
		if err != nil {
			t.Fatal(err)
		}
		kn, err := idemkey.Derive("acme", "run_1", "book", []byte(canonicaltest.Spell(t, canonicaltest.Value{Kind: canonicaltest.Object, Members: numArgs})), keyArgs)
		if err != nil {
			t.Fatal(err)
		}
		if kb.Hex == kn.Hex {
			t.Fatalf("%v and %s give the same key %s", b, num, kb.Canonical)
		}
	})
}

// TestPropAbsentIsUnderivable: a key argument the call did not send makes the key
// underivable; sending it as null makes it derivable again.
func TestPropAbsentIsUnderivable(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		base := canonicaltest.Objects(3).Draw(t, "arguments")
		missing := canonicaltest.Strings().Draw(t, "missing")
		for slices.ContainsFunc(base.Members, func(m canonicaltest.Member) bool { return norm.NFC.String(m.Name) == norm.NFC.String(missing) }) {
			missing += "_"
		}
		keyArgs := []string{missing}
		for _, m := range base.Members {
			if rapid.Bool().Draw(t, "alsoKey") {
				keyArgs = append(keyArgs, m.Name)
			}
		}
		keyArgs = rapid.Permutation(keyArgs).Draw(t, "order")
		_, err := idemkey.Derive("acme", "run_1", "book", []byte(canonicaltest.Plain(base)), keyArgs)
		if idemkey.Code(err) != idemkey.CodeUnderivable {
			t.Fatalf("absent key argument %q: error %v, want key_underivable", missing, err)
		}
		withNull := canonicaltest.Value{Kind: canonicaltest.Object, Members: append(slices.Clone(base.Members),
			canonicaltest.Member{Name: missing, Value: canonicaltest.Value{Kind: canonicaltest.Null}})}
		key, err := idemkey.Derive("acme", "run_1", "book", []byte(canonicaltest.Plain(withNull)), keyArgs)
		if err != nil {
			t.Fatalf("key argument sent as null: %v", err)
		}
		checkKey(t, key)
	})
}

type fataler interface {
	Helper()
	Fatalf(string, ...any)
}

// checkKey checks what holds of every derived key: the digest is the SHA-256 of the
// canonical envelope, which is its own canonical form and valid JSON with exactly
// the four envelope members.
func checkKey(t fataler, key idemkey.Key) {
	t.Helper()
	if key.Hex != sha(string(key.Canonical)) {
		t.Fatalf("digest %s is not the SHA-256 of %q", key.Hex, key.Canonical)
	}
	again, err := canonical.Canonicalize(key.Canonical)
	if err != nil || !bytes.Equal(again, key.Canonical) {
		t.Fatalf("envelope %q is not canonical: %q, %v", key.Canonical, again, err)
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(key.Canonical, &env); err != nil {
		t.Fatalf("envelope %q: %v", key.Canonical, err)
	}
	for _, name := range []string{"arguments", "run_id", "tenant", "tool"} {
		if _, ok := env[name]; !ok {
			t.Fatalf("envelope %q lacks %s", key.Canonical, name)
		}
	}
	if len(env) != 4 {
		t.Fatalf("envelope %q has %d members", key.Canonical, len(env))
	}
}
