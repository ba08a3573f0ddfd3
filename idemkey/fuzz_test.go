package idemkey_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/tesserix/toolexec/idemkey"
)

// splitKeys turns the fuzzer's key-argument string into a list: "*" is nil (every
// argument), "" the empty list, anything else comma-separated names.
func splitKeys(keys string) []string {
	switch keys {
	case "*":
		return nil
	case "":
		return []string{}
	}
	return strings.Split(keys, ",")
}

// FuzzDerive checks, for any tenant, arguments and key arguments: no panic; every
// error has a code; Derive and Parse-then-Key agree; a derived key is the SHA-256 of
// a canonical envelope holding the NFC tenant and the named arguments.
func FuzzDerive(f *testing.F) {
	f.Add("acme", []byte(`{"flight":"BA117","request_id":"a"}`), "flight")
	f.Add("acme", []byte(`{"seats":2.0,"flight":"BA117"}`), "*")
	f.Add("globex", []byte(`{"flight":null}`), "")
	f.Fuzz(func(t *testing.T, tenant string, raw []byte, keys string) {
		keyArgs := splitKeys(keys)
		key, err := idemkey.Derive(tenant, "run_1", "book", raw, keyArgs)
		args, perr := idemkey.Parse(raw)
		if perr == nil {
			key2, err2 := args.Key(tenant, "run_1", "book", keyArgs)
			if idemkey.Code(err) != idemkey.Code(err2) || key.Hex != key2.Hex || !bytes.Equal(key.Canonical, key2.Canonical) {
				t.Fatalf("Derive = %v, %v; Parse+Key = %v, %v", key, err, key2, err2)
			}
		} else if idemkey.Code(perr) != idemkey.Code(err) {
			t.Fatalf("Parse error %v, Derive error %v", perr, err)
		}
		if err != nil {
			if idemkey.Code(err) == "" {
				t.Fatalf("error %v has no code", err)
			}
			if key.Hex != "" || key.Canonical != nil {
				t.Fatalf("key %v returned with error %v", key, err)
			}
			return
		}
		checkKey(t, key)
		var env struct {
			Arguments map[string]json.RawMessage `json:"arguments"`
			Tenant    string                     `json:"tenant"`
		}
		if err := json.Unmarshal(key.Canonical, &env); err != nil {
			t.Fatal(err)
		}
		if env.Tenant != norm.NFC.String(tenant) {
			t.Fatalf("envelope tenant %q, want NFC of %q", env.Tenant, tenant)
		}
		for _, name := range keyArgs {
			if _, ok := env.Arguments[norm.NFC.String(name)]; !ok {
				t.Fatalf("key argument %q missing from the envelope %q", name, key.Canonical)
			}
		}
		if keyArgs == nil && len(env.Arguments) != len(args.Names()) {
			t.Fatalf("envelope %q does not hold every argument %q", key.Canonical, args.Names())
		}
	})
}
