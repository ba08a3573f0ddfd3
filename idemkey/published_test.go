package idemkey_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/internal/testkit/keyvectors"
)

var update = flag.Bool("update", false, "rewrite "+publishedPath+" from the code")

// publishedPath is where the project publishes its vectors for clients in other
// languages.
const publishedPath = "../schemas/vectors/keys.json"

// ownVectors are the project's vectors beyond the shared ones. Only the inputs are
// written here: the canonical form, key or error come from the code, and the
// published file is checked against the code on every test run.
var ownVectors = []vector{
	{Name: "integers below 1e21 are exact, from 1e21 on they are doubles",
		ArgumentsJSON: `{"n":[1e20,100000000000000000000,999999999999999999999,1e21,123e19]}`,
		Note:          "1e20 is written out in full; 1e21 and above take ECMAScript's exponent form"},
	{Name: "exponent respellings of 2",
		ArgumentsJSON: `{"n":[2,2.0,20e-1,0.2e1,2E0,2e+0,200E-2]}`},
	{Name: "small numbers: plain down to 1e-6, exponent form below",
		ArgumentsJSON: `{"n":[0.000001,1e-6,0.0000001,1.5e-7,0.000012,123.456e-10]}`},
	{Name: "fractions take the shortest round-trip digits",
		ArgumentsJSON: `{"n":[0.1,0.2,0.30000000000000004,0.3,1.005,-2.5,2.50000000000000000001]}`,
		Note:          "0.1+0.2 is 0.30000000000000004, a different double from 0.3"},
	{Name: "double extremes",
		ArgumentsJSON: `{"n":[5e-324,3e-324,2.2250738585072014e-308,1.7976931348623157e308]}`,
		Note:          "3e-324 rounds to the smallest subnormal"},
	{Name: "integers from 1e21 on round to a double",
		ArgumentsJSON: `{"n":[123456789012345678901234,-1e22,1000000000000000000000.5]}`},
	{Name: "big negative integers stay exact",
		ArgumentsJSON: `{"n":[-9007199254740993,-999999999999999999999,-1.0e3]}`},
	{Name: "zero has one spelling",
		ArgumentsJSON: `{"n":[0,-0,0.0,-0.0,0e999999999,-0.000e-5]}`},
	{Name: "every control character is escaped",
		ArgumentsJSON: `{"s":"\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001F"}`,
		Note:          "\\b \\t \\n \\f \\r short, the others \\u00xx with lowercase hex"},
	{Name: "quote, backslash and slash",
		ArgumentsJSON: `{"s":"\"\\\/\/"}`,
		Note:          "the slash is never escaped in the output"},
	{Name: "DEL, U+2028 and U+2029 stay literal",
		ArgumentsJSON: `{"s":"\u007f\u2028\u2029\u0080"}`},
	{Name: "astral characters, escaped or literal, come out literal",
		ArgumentsJSON: "{\"s\":\"\\ud834\\udd1e\",\"t\":\"\U0001D11E\",\"u\":\"\\uD83D\\uDE00\"}"},
	{Name: "members sort by UTF-16 code units of their NFC names",
		ArgumentsJSON: `{"\u00e9":1,"f":2,"e\u0301\u0301":3,"\uff21":4,"\ud83d\ude00":5,"E":6,"":7}`},
	{Name: "nested arrays",
		ArgumentsJSON: `{"a":[[[]],[[1,[2,[3]]]],[],[{}]]}`},
	{Name: "empty object and empty array arguments",
		ArgumentsJSON: `{"o":{},"a":[]}`},
	{Name: "no arguments at all",
		ArgumentsJSON: `{}`},
	{Name: "no arguments and no key arguments",
		ArgumentsJSON: `{}`, KeyArguments: []string{}},
	{Name: "nesting at the limit is allowed",
		ArgumentsJSON: strings.Repeat(`{"a":`, idemkey.MaxDepth-1) + "{}" + strings.Repeat("}", idemkey.MaxDepth-1),
		Note:          fmt.Sprintf("%d nested objects counting the arguments object; the envelope adds one level", idemkey.MaxDepth)},
	{Name: "nesting beyond the limit is refused",
		ArgumentsJSON: strings.Repeat(`{"a":`, idemkey.MaxDepth) + "{}" + strings.Repeat("}", idemkey.MaxDepth)},
	{Name: "tenant, run and tool are NFC too",
		Tenant: "cafe\u0301", RunID: "run_\u0041\u030a", Tool: "Zu\u0308rich",
		ArgumentsJSON: `{"flight":"BA117"}`, KeyArguments: []string{"flight"}},
	{Name: "tenant, run and tool escaped in the envelope",
		Tenant: "a\"b", RunID: "r\\1", Tool: "t\u0001/",
		ArgumentsJSON: `{}`},
	{Name: "null key argument",
		ArgumentsJSON: `{"flight":"BA117","seats":null}`, KeyArguments: []string{"flight", "seats"}},
	{Name: "absent key argument beside a present one",
		ArgumentsJSON: `{"flight":"BA117"}`, KeyArguments: []string{"flight", "seats"},
		Note: "compare 'null key argument': null is sent, absent is not"},
	{Name: "null argument counts when every argument counts",
		ArgumentsJSON: `{"flight":"BA117","seats":null}`,
		Note:          "differs from 'absent argument when every argument counts'"},
	{Name: "absent argument when every argument counts",
		ArgumentsJSON: `{"flight":"BA117"}`},
	{Name: "order and repeats of key arguments do not matter",
		ArgumentsJSON: `{"flight":"BA117","seats":null,"request_id":"x"}`, KeyArguments: []string{"seats", "flight", "seats"}},
	{Name: "key argument names compare after NFC",
		ArgumentsJSON: "{\"caf\\u00e9\":1,\"x\":2}", KeyArguments: []string{"cafe\u0301"}},
	{Name: "whitespace between tokens is ignored",
		ArgumentsJSON: " \t\r\n{ \"flight\" :\t\"BA117\" ,\n\"seats\" : 2 } \n", KeyArguments: []string{"flight"}},
	{Name: "arguments outside the key are validated too",
		ArgumentsJSON: `{"flight":"BA117","x":{"a":1,"a":2}}`, KeyArguments: []string{"flight"}},
	{Name: "duplicate member spelled with an escape",
		ArgumentsJSON: `{"a":1,"\u0061":2}`},
	{Name: "NFC collision in a nested object",
		ArgumentsJSON: "{\"x\":[{\"\\u00c5\":1,\"\\u212b\":2}]}"},
	{Name: "lone low surrogate",
		ArgumentsJSON: `{"s":"\udc00"}`},
	{Name: "high surrogate before a non-surrogate escape",
		ArgumentsJSON: `{"s":"\ud800\u0041"}`},
	{Name: "huge exponent is refused at once",
		ArgumentsJSON: `{"n":1e999999999}`},
	{Name: "a number that rounds to zero is refused",
		ArgumentsJSON: `{"n":1e-400}`,
		Note:          "a non-zero value with no non-zero double is out of range"},
	{Name: "just beyond the largest double",
		ArgumentsJSON: `{"n":-1.7976931348623159e308}`},
	{Name: "trailing comma",
		ArgumentsJSON: `{"flight":"BA117",}`},
	{Name: "trailing data",
		ArgumentsJSON: `{"flight":"BA117"} {}`},
	{Name: "byte order mark",
		ArgumentsJSON: "\ufeff{}"},
	{Name: "leading zero",
		ArgumentsJSON: `{"n":01}`},
	{Name: "NaN is not JSON",
		ArgumentsJSON: `{"n":NaN}`},
	{Name: "raw control character in a string",
		ArgumentsJSON: "{\"s\":\"a\tb\"}"},
	{Name: "null arguments",
		ArgumentsJSON: `null`},
	{Name: "string arguments",
		ArgumentsJSON: `"flight"`},
}

// buildPublished computes the published vector file: the shared vectors with their
// names and notes, then ours, every result computed by the code.
func buildPublished(t *testing.T) []byte {
	t.Helper()
	shared := keyvectors.Read(t, "testdata/keys.json")
	out := vectorFile{
		Spec: "toolexec docs/PROTOCOL.md §6; generated by `go test ./idemkey -run TestPublishedVectors -update`",
	}
	byKey := map[string]string{}
	add := func(v vector, own bool) {
		if v.Tenant == "" && v.RunID == "" && v.Tool == "" {
			v.Tenant, v.RunID, v.Tool = "acme", "run_1", "book"
		}
		v.Canonical, v.Key, v.Error = "", "", ""
		key, err := idemkey.Derive(v.Tenant, v.RunID, v.Tool, []byte(v.ArgumentsJSON), v.KeyArguments)
		if err != nil {
			v.Error = idemkey.Code(err)
		} else {
			v.Canonical, v.Key = string(key.Canonical), key.Hex
			if first, ok := byKey[key.Hex]; ok && own {
				same := fmt.Sprintf("same key as '%s'", first)
				if v.Note == "" {
					v.Note = same
				} else {
					v.Note += "; " + same
				}
			} else if !ok {
				byKey[key.Hex] = v.Name
			}
		}
		out.Vectors = append(out.Vectors, v)
	}
	for _, v := range shared.Vectors {
		add(v, false)
	}
	for _, v := range ownVectors {
		add(v, true)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestPublishedVectors checks that schemas/vectors/keys.json is what the code
// produces (run with -update to rewrite it), that it holds every shared vector
// unchanged, and that every vector in it reproduces.
func TestPublishedVectors(t *testing.T) {
	want := buildPublished(t)
	if *update {
		if err := os.WriteFile(publishedPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", publishedPath)
	}
	got, err := os.ReadFile(publishedPath)
	if err != nil {
		t.Fatalf("%v (run: go test ./idemkey -run TestPublishedVectors -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from what the code produces; if the change is intended, run: go test ./idemkey -run TestPublishedVectors -update", publishedPath)
	}

	published := keyvectors.Read(t, publishedPath)
	shared := keyvectors.Read(t, "testdata/keys.json")
	if len(published.Vectors) < len(shared.Vectors)+15 {
		t.Errorf("%d published vectors, want the %d shared ones and at least 15 more", len(published.Vectors), len(shared.Vectors))
	}
	for i, sv := range shared.Vectors {
		pv := published.Vectors[i]
		if !reflect.DeepEqual(pv, sv) {
			t.Errorf("shared vector %q changed in publication:\n got %+v\nwant %+v", sv.Name, pv, sv)
		}
	}
	names := map[string]bool{}
	for _, v := range published.Vectors {
		if names[v.Name] {
			t.Errorf("vector name %q used twice", v.Name)
		}
		names[v.Name] = true
		t.Run(v.Name, func(t *testing.T) { checkVector(t, v) })
	}
}
