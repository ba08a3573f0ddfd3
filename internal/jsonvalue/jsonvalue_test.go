package jsonvalue

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// reference is what Parse must agree with.
func reference(data []byte) (any, error) { return jsonschema.UnmarshalJSON(bytes.NewReader(data)) }

// agree fails t unless Parse and the reference decode data alike: the same
// value, or both an error with the same text.
func agree(t *testing.T, data []byte) {
	t.Helper()
	got, gotErr := Parse(data)
	want, wantErr := reference(data)
	switch {
	case (gotErr == nil) != (wantErr == nil):
		t.Fatalf("Parse(%q): error %v, jsonschema.UnmarshalJSON: error %v", data, gotErr, wantErr)
	case gotErr != nil:
		if gotErr.Error() != wantErr.Error() {
			t.Fatalf("Parse(%q): error %q, want %q", data, gotErr, wantErr)
		}
	case !reflect.DeepEqual(got, want):
		t.Fatalf("Parse(%q) = %#v, want %#v", data, got, want)
	}
}

var seeds = []string{
	`{"flight":"F1","seat":"12A","passengers":2,"window":true,"note":null}`,
	`{}`, `[]`, ` { } `, "\t[1, 2 ,3]\r\n", `"plain"`, `0`, `-0`, `-12.5e+3`, `1E-2`, `1.0`,
	`true`, `false`, `null`, `{"a":{"b":[{"c":[]}]}}`,
	`{"a":1,"a":2}`,                                         // the last value wins
	`{"s":"caf\u00e9 \"q\" \\ \/ \n"}`,                      // escapes
	"{\"s\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}", // plain UTF-8
	"{\"s\":\"bad \xff byte\"}",                             // replaced by U+FFFD
	"{\"s\":\"surrogate \xed\xa0\x80 bytes\"}",
	`{"s":"lone \ud800 escape"}`,
	`12345678901234567890123456789`, // kept as written
	// Not JSON, or not one value: the reference's errors.
	``, ` `, `{`, `}`, `[1,]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `01`, `1.`, `.5`, `-`, `1e`, `1e+`,
	`tru`, `truex`, `nul`, `[1 2]`, `{} {}`, `1 2`, `"unterminated`, "\"ctl \x01\"", `"bad \q escape"`,
	`"\u12"`, `[` + strings.Repeat(`[`, 300) + strings.Repeat(`]`, 301), // deeper than Parse reads
	strings.Repeat(`[`, 300) + strings.Repeat(`]`, 300),
	"\xef\xbb\xbf{}", // a byte order mark
}

func TestParseAgrees(t *testing.T) {
	for _, s := range seeds {
		agree(t, []byte(s))
	}
}

// TestParseFastPath checks that the common documents are read without the
// Decoder: what Parse reads itself it reads in one pass.
func TestParseFastPath(t *testing.T) {
	for _, s := range []string{
		`{"flight":"F1","seat":"12A","passengers":2,"window":true,"note":null,"legs":[1,2.5]}`,
		`{"s":"caf\u00e9"}`, // one escaped string still goes through the parser
	} {
		p := parser{data: []byte(s)}
		if _, ok := p.value(0); !ok || p.i != len(s) {
			t.Errorf("%s: not read by the parser (ok %v, stopped at %d of %d)", s, ok, p.i, len(s))
		}
	}
	// The map, two names, a string and a number's text, and the two values
	// boxed in interfaces: the Decoder makes 12 of the same document.
	doc := []byte(`{"flight":"F1","n":2}`)
	if n := testing.AllocsPerRun(100, func() { _, _ = Parse(doc) }); n > 7 {
		t.Errorf("Parse of a two-member object: %v allocations, want at most 7", n)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { agree(t, data) })
}

func BenchmarkParse(b *testing.B) {
	doc := []byte(`{"flight":"F123","passenger":"P-000042","seat":"12A","class":"economy","bags":2}`)
	b.Run("jsonvalue", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Parse(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("jsonschema.UnmarshalJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := reference(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}
