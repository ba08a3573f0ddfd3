package idemkey_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/idemkey/canonical"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

const bookArgs = `{"seats":2,"flight":"BA117","request_id":"r-1","note":null,"cafe\u0301":"x"}`

func mustParse(t *testing.T, raw string) *idemkey.Arguments {
	t.Helper()
	args, err := idemkey.Parse([]byte(raw))
	if err != nil {
		t.Fatalf("Parse(%s): %v", raw, err)
	}
	return args
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestKeySelection(t *testing.T) {
	t.Parallel()
	const tail = `,"run_id":"run_1","tenant":"acme","tool":"book"}`
	tests := []struct {
		name    string
		keyArgs []string
		want    string // the canonical arguments object
		wantErr error
	}{
		{"nil: every argument", nil, `{"café":"x","flight":"BA117","note":null,"request_id":"r-1","seats":2}`, nil},
		{"empty: none", []string{}, `{}`, nil},
		{"one", []string{"flight"}, `{"flight":"BA117"}`, nil},
		{"order of key arguments does not matter", []string{"seats", "flight"}, `{"flight":"BA117","seats":2}`, nil},
		{"repeated key argument counts once", []string{"flight", "flight", "seats", "flight"}, `{"flight":"BA117","seats":2}`, nil},
		{"null is present", []string{"note"}, `{"note":null}`, nil},
		{"names compare after NFC", []string{"cafe\u0301"}, `{"café":"x"}`, nil},
		{"composed name finds it too", []string{"caf\u00e9"}, `{"café":"x"}`, nil},
		{"all named equals nil", []string{"café", "flight", "note", "request_id", "seats"},
			`{"café":"x","flight":"BA117","note":null,"request_id":"r-1","seats":2}`, nil},
		{"absent", []string{"flight", "date"}, "", idemkey.ErrUnderivable},
		{"absent alone", []string{"date"}, "", idemkey.ErrUnderivable},
		{"empty name absent", []string{""}, "", idemkey.ErrUnderivable},
		{"case matters", []string{"Flight"}, "", idemkey.ErrUnderivable},
		{"invalid UTF-8 name is absent", []string{"fl\xffight"}, "", idemkey.ErrUnderivable},
	}
	args := mustParse(t, bookArgs)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, err := args.Key("acme", "run_1", "book", tt.keyArgs)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Key error = %v, want %v", err, tt.wantErr)
				}
				if idemkey.Code(err) != idemkey.CodeUnderivable || !strings.Contains(err.Error(), "absent") {
					t.Errorf("error %q (code %q) should name the absent argument", err, idemkey.Code(err))
				}
				if key.Hex != "" || key.Canonical != nil {
					t.Errorf("Key returned %v with its error", key)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := `{"arguments":` + tt.want + tail
			if string(key.Canonical) != want {
				t.Fatalf("canonical\n got %s\nwant %s", key.Canonical, want)
			}
			if key.Hex != sha(want) || key.String() != key.Hex {
				t.Fatalf("digest %s, want %s", key.Hex, sha(want))
			}
		})
	}
}

func TestUnderivableNamesTheArgument(t *testing.T) {
	t.Parallel()
	_, err := idemkey.Derive("acme", "run_1", "book", []byte(`{"a":1}`), []string{"a", "flight", "seats"})
	if !errors.Is(err, idemkey.ErrUnderivable) || !strings.Contains(err.Error(), `"flight"`) {
		t.Fatalf("error %v should wrap ErrUnderivable and name \"flight\"", err)
	}
}

func TestKeyDiffers(t *testing.T) {
	t.Parallel()
	base, err := idemkey.Derive("acme", "run_1", "book", []byte(`{"flight":"BA117"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name              string
		tenant, run, tool string
		args              string
		keyArgs           []string
	}{
		{"tenant", "globex", "run_1", "book", `{"flight":"BA117"}`, nil},
		{"run", "acme", "run_2", "book", `{"flight":"BA117"}`, nil},
		{"tool", "acme", "run_1", "cancel", `{"flight":"BA117"}`, nil},
		{"value", "acme", "run_1", "book", `{"flight":"BA118"}`, nil},
		{"name", "acme", "run_1", "book", `{"Flight":"BA117"}`, nil},
		{"extra argument when all count", "acme", "run_1", "book", `{"flight":"BA117","x":1}`, nil},
		{"null instead of absent", "acme", "run_1", "book", `{"flight":"BA117","x":null}`, nil},
		{"string type", "acme", "run_1", "book", `{"flight":["BA117"]}`, nil},
		{"none count", "acme", "run_1", "book", `{"flight":"BA117"}`, []string{}},
		// Values that must not be confused with one another.
	}
	for _, tt := range tests {
		key, err := idemkey.Derive(tt.tenant, tt.run, tt.tool, []byte(tt.args), tt.keyArgs)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if key.Hex == base.Hex {
			t.Errorf("%s: same key as the base call", tt.name)
		}
	}
	distinct := []string{`true`, `1`, `"1"`, `"true"`, `false`, `0`, `null`, `"null"`, `""`, `[]`, `{}`, `[1]`, `1.5`, `"1.5"`}
	seen := map[string]string{}
	for _, v := range distinct {
		key, err := idemkey.Derive("acme", "run_1", "book", []byte(`{"x":`+v+`}`), nil)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if prev, ok := seen[key.Hex]; ok {
			t.Errorf("%s and %s give the same key", prev, v)
		}
		seen[key.Hex] = v
	}
}

func TestKeySameForRespellings(t *testing.T) {
	t.Parallel()
	spellings := []string{
		`{"flight":"BA117","seats":2,"city":"Z\u00fcrich"}`,
		` { "seats" : 2.0 , "city" : "Zu\u0308rich" , "flight" : "BA117" } `,
		"{\"city\":\"Zu\u0308rich\",\"seats\":20e-1,\"flight\":\"\\u0042A117\"}",
		`{"seats":0.2e1,"flight":"BA\u0031\u00317","city":"Z\u00FCrich"}`,
		`{"seats":2E0,"city":"Zürich","flight":"BA117","ignored":[1,2,3]}`,
	}
	var want string
	for i, s := range spellings {
		key, err := idemkey.Derive("acme", "run_1", "book", []byte(s), []string{"seats", "flight", "city"})
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		if i == 0 {
			want = key.Hex
		} else if key.Hex != want {
			t.Errorf("spelling %s gives %s, want %s (%s)", s, key.Hex, want, key.Canonical)
		}
	}
}

func TestEnvelopeStrings(t *testing.T) {
	t.Parallel()
	args := mustParse(t, `{}`)
	key, err := args.Key("cafe\u0301", "run \"1\"\n", "t\u00f6\u0301ol", nil)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"arguments\":{},\"run_id\":\"run \\\"1\\\"\\n\",\"tenant\":\"caf\u00e9\",\"tool\":\"t\u00f6\u0301ol\"}"
	if string(key.Canonical) != want {
		t.Fatalf("canonical\n got %s\nwant %s", key.Canonical, want)
	}
	for _, tt := range []struct{ tenant, run, tool, field string }{
		{"a\xff", "r", "t", "tenant"},
		{"a", "r\xc3", "t", "run id"},
		{"a", "r", "\xed\xa0\x80", "tool"},
	} {
		_, err := args.Key(tt.tenant, tt.run, tt.tool, nil)
		if !errors.Is(err, canonical.ErrInvalidUnicode) || idemkey.Code(err) != canonical.CodeInvalidUnicode ||
			!strings.Contains(err.Error(), tt.field) {
			t.Errorf("invalid %s: error %v, want invalid_unicode naming the %s", tt.field, err, tt.field)
		}
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give     string
		wantCode string
		wantErr  error
	}{
		{`[1,2]`, idemkey.CodeNotObject, idemkey.ErrNotObject},
		{`"flight"`, idemkey.CodeNotObject, idemkey.ErrNotObject},
		{`null`, idemkey.CodeNotObject, idemkey.ErrNotObject},
		{`12`, idemkey.CodeNotObject, idemkey.ErrNotObject},
		{`true`, idemkey.CodeNotObject, idemkey.ErrNotObject},
		{``, canonical.CodeInvalidJSON, canonical.ErrSyntax},
		{`{"a":1`, canonical.CodeInvalidJSON, canonical.ErrSyntax},
		{`[1,`, canonical.CodeInvalidJSON, canonical.ErrSyntax},
		{`{"a":1} x`, canonical.CodeInvalidJSON, canonical.ErrSyntax},
		{`[1e400]`, canonical.CodeNumberOutOfRange, canonical.ErrNumberOutOfRange},
		{`{"a":1,"a":1}`, canonical.CodeDuplicateMember, canonical.ErrDuplicateMember},
		{`{"x":{"\u00e9":1,"e\u0301":2}}`, canonical.CodeNFCCollision, canonical.ErrNFCCollision},
		{`{"x":"\udc00"}`, canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode},
		{"{\"x\":\"\xff\"}", canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode},
		{strings.Repeat(`{"a":`, idemkey.MaxDepth) + "[]" + strings.Repeat("}", idemkey.MaxDepth), canonical.CodeTooDeep, canonical.ErrTooDeep},
	}
	for _, tt := range tests {
		args, err := idemkey.Parse([]byte(tt.give))
		if args != nil || !errors.Is(err, tt.wantErr) || idemkey.Code(err) != tt.wantCode {
			t.Errorf("Parse(%.40s) = %v, %v (code %q); want %s", tt.give, args, err, idemkey.Code(err), tt.wantCode)
		}
		if _, err := idemkey.Derive("a", "r", "t", []byte(tt.give), []string{}); idemkey.Code(err) != tt.wantCode {
			t.Errorf("Derive(%.40s) error %v, want %s", tt.give, err, tt.wantCode)
		}
	}
}

// TestValidationIsWhole shows that a key derived from some arguments still requires
// all of them to be valid: an invalid argument outside the key is refused.
func TestValidationIsWhole(t *testing.T) {
	t.Parallel()
	_, err := idemkey.Derive("a", "r", "t", []byte(`{"flight":"BA117","junk":1e999}`), []string{"flight"})
	if !errors.Is(err, canonical.ErrNumberOutOfRange) {
		t.Fatalf("error %v, want number_out_of_range from an argument outside the key", err)
	}
}

func TestMaxDepth(t *testing.T) {
	t.Parallel()
	nest := func(n int) string { return strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1) }
	key, err := idemkey.Derive("acme", "run_1", "book", []byte(nest(idemkey.MaxDepth)), nil)
	if err != nil {
		t.Fatalf("arguments %d deep: %v", idemkey.MaxDepth, err)
	}
	if again, err := canonical.Canonicalize(key.Canonical); err != nil || string(again) != string(key.Canonical) {
		t.Fatalf("the envelope of the deepest arguments is not canonical: %v", err)
	}
	if _, err := idemkey.Derive("acme", "run_1", "book", []byte(nest(idemkey.MaxDepth+1)), nil); !errors.Is(err, canonical.ErrTooDeep) {
		t.Fatalf("arguments %d deep: %v, want too_deep", idemkey.MaxDepth+1, err)
	}
}

func TestArgumentsAccessors(t *testing.T) {
	t.Parallel()
	args := mustParse(t, bookArgs)
	wantNames := []string{"café", "flight", "note", "request_id", "seats"}
	if got := args.Names(); !slices.Equal(got, wantNames) {
		t.Errorf("Names() = %q, want %q", got, wantNames)
	}
	for _, name := range []string{"flight", "note", "cafe\u0301", "café"} {
		if !args.Has(name) {
			t.Errorf("Has(%q) = false", name)
		}
	}
	for _, name := range []string{"date", "", "Flight", "\xff"} {
		if args.Has(name) {
			t.Errorf("Has(%q) = true", name)
		}
	}
	want := `{"café":"x","flight":"BA117","note":null,"request_id":"r-1","seats":2}`
	if got := string(args.Canonical()); got != want {
		t.Errorf("Canonical() = %s, want %s", got, want)
	}
	if names := mustParse(t, `{}`).Names(); len(names) != 0 {
		t.Errorf("Names() of {} = %q", names)
	}
}

func TestCheckDigest(t *testing.T) {
	t.Parallel()
	args := mustParse(t, bookArgs)
	tests := []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{}, ""},
		{[]string{"seats"}, sha(`{"seats":2}`)},
		{[]string{"seats", "flight"}, sha(`{"flight":"BA117","seats":2}`)},
		{[]string{"flight", "seats", "seats"}, sha(`{"flight":"BA117","seats":2}`)},
		{[]string{"seats", "absent"}, sha(`{"seats":2}`)},
		{[]string{"absent"}, sha(`{}`)},
		{[]string{"note"}, sha(`{"note":null}`)},
	}
	for _, tt := range tests {
		if got := args.CheckDigest(tt.names); got != tt.want {
			t.Errorf("CheckDigest(%q) = %q, want %q", tt.names, got, tt.want)
		}
	}
	// A duplicate whose check argument changed has another digest; one whose other
	// arguments changed does not.
	same := mustParse(t, `{"seats":2.0,"flight":"BA117","request_id":"r-2"}`)
	other := mustParse(t, `{"seats":3,"flight":"BA117","request_id":"r-1"}`)
	if args.CheckDigest([]string{"seats"}) != same.CheckDigest([]string{"seats"}) {
		t.Error("check digest changed with an argument outside the check")
	}
	if args.CheckDigest([]string{"seats"}) == other.CheckDigest([]string{"seats"}) {
		t.Error("check digest did not change with the checked argument")
	}
	// Absent and null differ.
	if mustParse(t, `{}`).CheckDigest([]string{"seats"}) == mustParse(t, `{"seats":null}`).CheckDigest([]string{"seats"}) {
		t.Error("absent and null give the same check digest")
	}
}

func TestManyKeyArguments(t *testing.T) {
	t.Parallel()
	// More key arguments than the on-stack index buffer holds.
	var b strings.Builder
	b.WriteString("{")
	var names []string
	for i := range 40 {
		if i > 0 {
			b.WriteString(",")
		}
		name := string(rune('A'+i%26)) + strings.Repeat("x", i/26)
		names = append(names, name)
		b.WriteString(`"` + name + `":` + string(rune('0'+i%10)))
	}
	b.WriteString("}")
	all, err := idemkey.Derive("a", "r", "t", []byte(b.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(names)
	named, err := idemkey.Derive("a", "r", "t", []byte(b.String()), names)
	if err != nil {
		t.Fatal(err)
	}
	if all.Hex != named.Hex {
		t.Fatalf("naming all 40 arguments differs from nil:\n%s\n%s", all.Canonical, named.Canonical)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	args := mustParse(t, bookArgs)
	want, err := args.Key("acme", "run_1", "book", []string{"flight"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan string)
	for range 8 {
		go func() {
			var got string
			for range 200 {
				k, _ := args.Key("acme", "run_1", "book", []string{"flight"})
				got = k.Hex
				if d, _ := idemkey.Derive("acme", "run_1", "book", []byte(bookArgs), []string{"flight"}); d.Hex != got {
					got = "mismatch"
				}
			}
			done <- got
		}()
	}
	for range 8 {
		if got := <-done; got != want.Hex {
			t.Fatalf("concurrent derivation gave %s, want %s", got, want.Hex)
		}
	}
}

var benchArgs = []byte(`{"flight":"BA117","seats":2,"date":"2025-06-01","passenger":{"name":"Ada Lovelace","age":36},"request_id":"req-7f3a"}`)

// BenchmarkKeyFiveArguments derives the key of a five-argument call from its raw
// bytes, as the dispatcher does for each call.
func BenchmarkKeyFiveArguments(b *testing.B) {
	keyArgs := []string{"flight", "seats", "date", "passenger"}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchArgs)))
	for b.Loop() {
		if _, err := idemkey.Derive("acme", "run_1", "book", benchArgs, keyArgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeyFiveArgumentsParsed derives the key from arguments already parsed.
func BenchmarkKeyFiveArgumentsParsed(b *testing.B) {
	args, err := idemkey.Parse(benchArgs)
	if err != nil {
		b.Fatal(err)
	}
	keyArgs := []string{"flight", "seats", "date", "passenger"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := args.Key("acme", "run_1", "book", keyArgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeyFiveArgumentsAll derives the key with every argument counting.
func BenchmarkKeyFiveArgumentsAll(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := idemkey.Derive("acme", "run_1", "book", benchArgs, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDeriveAllocations: deriving a key from raw bytes allocates only the key
// (its digest and canonical bytes), whatever the argument types: building the
// decoded value ParseValue returns must cost Derive nothing.
func TestDeriveAllocations(t *testing.T) {
	if testenv.Race {
		t.Skip("the race detector empties sync.Pool at random")
	}
	keyArgs := []string{"flight", "seats", "date", "passenger"}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := idemkey.Derive("acme", "run_1", "book", benchArgs, keyArgs); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 {
		t.Errorf("Derive allocates %v times, want at most 2", allocs)
	}
}
