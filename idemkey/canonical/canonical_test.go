package canonical_test

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/idemkey/canonical"
)

func TestCanonicalize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		give string
		want string
	}{
		// Literals and structure.
		{"true", `true`, `true`},
		{"false", `false`, `false`},
		{"null", `null`, `null`},
		{"empty object", `{}`, `{}`},
		{"empty array", `[]`, `[]`},
		{"whitespace of RFC 8259 only", " \t\r\n{ \"a\" :\t[ 1 ,\n2 ] }\r\n ", `{"a":[1,2]}`},
		{"empty containers inside", `{"b":[],"a":{}}`, `{"a":{},"b":[]}`},
		{"nested arrays", `[[[]],[[1,[2,[3]]]],[]]`, `[[[]],[[1,[2,[3]]]],[]]`},
		{"nested objects sorted at every level", `{"z":{"y":1,"x":[{"b":2,"a":1}]},"a":null}`,
			`{"a":null,"z":{"x":[{"a":1,"b":2}],"y":1}}`},
		{"booleans and numbers stay apart", `[true,1,false,0]`, `[true,1,false,0]`},

		// Member order: UTF-16 code units, of the NFC names.
		{"ASCII order", `{"b":1,"a":2,"B":3,"aa":4,"":5}`, `{"":5,"B":3,"a":2,"aa":4,"b":1}`},
		{"astral before U+E000", `{"\ue000":1,"\ud83d\ude00":2}`, "{\"\U0001F600\":2,\"\ue000\":1}"},
		{"astral after U+D7FF", "{\"\U0001F600\":1,\"\ud7ff\":2}", "{\"\ud7ff\":2,\"\U0001F600\":1}"},
		{"astral among themselves", "{\"\U0001F601\":1,\"\U0001F600\":2}", "{\"\U0001F600\":2,\"\U0001F601\":1}"},
		{"prefix sorts first", `{"ab":1,"a":2}`, `{"a":2,"ab":1}`},
		{"sorted by NFC name", "{\"e\u0301\":1,\"f\":2,\"e\":3}", "{\"e\":3,\"f\":2,\"\u00e9\":1}"},
		{"RFC 8785 sample order, U+FB33 decomposed by NFC", `{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"ö\":\"Latin Small Letter O With Diaeresis\",\"\u05d3\u05bc\":\"Hebrew Letter Dalet With Dagesh\",\"€\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\"}"},

		// Strings: JSON.stringify escaping, NFC.
		{"only quote, backslash and controls are escaped", `"\"\\\/\u0041/€\u20ac"`, `"\"\\/A/€€"`},
		{"short control escapes", `"\b\t\n\f\r"`, `"\b\t\n\f\r"`},
		{"other controls as lowercase u00xx", `"\u0000\u0001\u001F\u000b\u000E\u007f"`, "\"\\u0000\\u0001\\u001f\\u000b\\u000e\x7f\""},
		{"U+2028 and U+2029 are literal", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"astral from a surrogate pair", `"\ud834\udd1e"`, "\"\U0001D11E\""},
		{"astral literal", "\"\U0001D11E\"", "\"\U0001D11E\""},
		{"uppercase hex escapes", `"\u00E9\uD834\uDD1E"`, "\"é\U0001D11E\""},
		{"NFC of a value", "\"Zu\u0308rich\"", "\"Z\u00fcrich\""},
		{"NFC of an escaped value", `"Zu\u0308rich"`, "\"Z\u00fcrich\""},
		{"NFC of a name", "{\"cafe\u0301\":1}", "{\"caf\u00e9\":1}"},
		{"NFC composition exclusion", "\"\u0958\"", "\"\u0915\u093c\""},
		{"noncharacter is valid", `"\uffff"`, "\"\uffff\""},
		{"escaped U+FFFD", `"\ufffd"`, "\"\ufffd\""},
		{"DEL is literal", "\"\x7f\"", "\"\x7f\""},

		// Numbers: the exact integer path.
		{"integer", `2`, `2`},
		{"integer with fraction zero", `2.0`, `2`},
		{"integer with exponent", `2e0`, `2`},
		{"integer from a smaller mantissa", `20e-1`, `2`},
		{"integer from a fraction and exponent", `0.2e1`, `2`},
		{"capital E", `2E0`, `2`},
		{"explicit plus exponent", `2e+0`, `2`},
		{"trailing fraction zeros", `4.50e1`, `45`},
		{"minus zero", `-0`, `0`},
		{"minus zero fraction", `-0.0`, `0`},
		{"zero with a huge exponent", `0e999999999`, `0`},
		{"zero with a huge negative exponent", `-0.000e-999999999`, `0`},
		{"2^53 + 1 stays exact", `9007199254740993`, `9007199254740993`},
		{"big negative integer stays exact", `-9007199254740993`, `-9007199254740993`},
		{"1e20 is written out", `1e20`, `100000000000000000000`},
		{"largest exact integer", `999999999999999999999`, `999999999999999999999`},
		{"largest exact integer negative", `-999999999999999999999`, `-999999999999999999999`},
		{"integer below 1e21 spelled with a fraction", `99999999999999999999.9e1`, `999999999999999999999`},
		{"integer with long zero fraction", `7.000000000000000000000000000000`, `7`},

		// Numbers: the double path, ECMAScript formatting.
		{"1e21 takes the exponent form", `1e21`, `1e+21`},
		{"1e21 spelled out", `1000000000000000000000`, `1e+21`},
		{"minus 1e21", `-1e21`, `-1e+21`},
		{"1.23e21", `123e19`, `1.23e+21`},
		{"integer with more than 21 digits rounds", `123456789012345678901234`, `1.2345678901234569e+23`},
		{"fraction", `0.1`, `0.1`},
		{"fraction trailing zero", `4.50`, `4.5`},
		{"0.000001 stays plain", `0.000001`, `0.000001`},
		{"1e-6 is plain", `1e-6`, `0.000001`},
		{"1e-7 takes the exponent form", `1e-7`, `1e-7`},
		{"0.0000001 takes the exponent form", `0.0000001`, `1e-7`},
		{"1.5e-7", `1.5e-7`, `1.5e-7`},
		{"shortest round trip", `333333333.33333329`, `333333333.3333333`},
		{"0.1 + 0.2", `0.30000000000000004`, `0.30000000000000004`},
		{"0.3", `0.3`, `0.3`},
		{"negative fraction", `-1.5`, `-1.5`},
		{"smallest subnormal", `5e-324`, `5e-324`},
		{"rounds up to smallest subnormal", `3e-324`, `5e-324`},
		{"largest double", `1.7976931348623157e308`, `1.7976931348623157e+308`},
		{"fraction respelled", `435e-2`, `4.35`},
		{"fraction respelled with leading zeros", `0.0435e2`, `4.35`},
		{"1e-5 is plain", `1.2e-5`, `0.000012`},
		{"many digits", `1.00000000000000000000000000000000000000000000000000001`, `1`},
		{"long digit string below 1", "0." + strings.Repeat("0", 300) + "12345", `1.2345e-301`},
		{"long integer beyond 1e21", "1" + strings.Repeat("0", 300), `1e+300`},
		{"123.456e-10", `123.456e-10`, `1.23456e-8`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := canonical.Canonicalize([]byte(tt.give))
			if err != nil {
				t.Fatalf("Canonicalize(%q) error: %v", tt.give, err)
			}
			if string(got) != tt.want {
				t.Fatalf("Canonicalize(%q)\n got %q\nwant %q", tt.give, got, tt.want)
			}
			again, err := canonical.Canonicalize(got)
			if err != nil || !bytes.Equal(again, got) {
				t.Fatalf("not idempotent: Canonicalize(%q) = %q, %v", got, again, err)
			}
			if !canonical.Valid([]byte(tt.give)) {
				t.Fatalf("Valid(%q) = false", tt.give)
			}
		})
	}
}

func TestCanonicalizeErrors(t *testing.T) {
	t.Parallel()
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct {
		name       string
		give       string
		wantCode   string
		wantErr    error
		wantOffset int // -1: not checked
	}{
		{"empty input", ``, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"only whitespace", "  \n", canonical.CodeInvalidJSON, canonical.ErrSyntax, 3},
		{"byte order mark", "\ufeff{}", canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"trailing data", `{} {}`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 3},
		{"trailing comma in object", `{"a":1,}`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 7},
		{"trailing comma in array", `[1,]`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 3},
		{"missing colon", `{"a" 1}`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 5},
		{"unquoted name", `{a:1}`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 1},
		{"single quotes", `'a'`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"unterminated object", `{"a":1`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"unterminated array", `[1`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"unterminated string", `"abc`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"unterminated string after escape", `"a\u00e9`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"raw control in string", "\"a\x01\"", canonical.CodeInvalidJSON, canonical.ErrSyntax, 2},
		{"raw tab in string", "\"a\tb\"", canonical.CodeInvalidJSON, canonical.ErrSyntax, 2},
		{"bad escape", `"\x41"`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 1},
		{"short unicode escape", `"\u12"`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 1},
		{"non-hex unicode escape", `"\u12g4"`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 1},
		{"NaN", `NaN`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"Infinity", `-Infinity`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 1},
		{"truncated literal", `tru`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"capitalised literal", `True`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"literal with trailing letters", `nullx`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 4},
		{"leading zero", `01`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"negative leading zero", `-01`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 1},
		{"leading plus", `+1`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"leading point", `.5`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"trailing point", `1.`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 2},
		{"point before exponent", `1.e5`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 2},
		{"empty exponent", `1e`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 2},
		{"signed empty exponent", `1e+`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 3},
		{"lone minus", `-`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 1},
		{"hex number", `0x10`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 1},
		{"non-breaking space is not whitespace", "\u00a0{}", canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"form feed is not whitespace", "\f{}", canonical.CodeInvalidJSON, canonical.ErrSyntax, 0},
		{"comment", `{} // c`, canonical.CodeInvalidJSON, canonical.ErrSyntax, 3},

		{"duplicate member", `{"a":1,"a":2}`, canonical.CodeDuplicateMember, canonical.ErrDuplicateMember, 7},
		{"duplicate member spelled with an escape", `{"a":1,"\u0061":2}`, canonical.CodeDuplicateMember, canonical.ErrDuplicateMember, 7},
		{"duplicate member in a nested object", `[{"x":{"b":1,"c":2,"b":3}}]`, canonical.CodeDuplicateMember, canonical.ErrDuplicateMember, 19},
		{"duplicate decomposed names", "{\"e\u0301\":1,\"e\u0301\":2}", canonical.CodeDuplicateMember, canonical.ErrDuplicateMember, 9},
		{"duplicate among NFC spellings", "{\"\u00e9\":1,\"e\u0301\":2,\"\u00e9\":3}", canonical.CodeDuplicateMember, canonical.ErrDuplicateMember, 16},
		{"NFC collision", `{"\u00e9":1,"e\u0301":2}`, canonical.CodeNFCCollision, canonical.ErrNFCCollision, 12},
		{"NFC collision of raw UTF-8", "{\"e\u0301\":1,\"\u00e9\":2}", canonical.CodeNFCCollision, canonical.ErrNFCCollision, 9},

		{"1e400", `1e400`, canonical.CodeNumberOutOfRange, canonical.ErrNumberOutOfRange, 0},
		{"-1e400", `[-1e400]`, canonical.CodeNumberOutOfRange, canonical.ErrNumberOutOfRange, 1},
		{"just above the largest double", `1.7976931348623159e308`, canonical.CodeNumberOutOfRange, canonical.ErrNumberOutOfRange, 0},
		{"huge exponent", `1e999999999`, canonical.CodeNumberOutOfRange, canonical.ErrNumberOutOfRange, 0},
		{"huger exponent", `1e99999999999999999999999999999999`, canonical.CodeNumberOutOfRange, canonical.ErrNumberOutOfRange, 0},
		{"underflow to zero", `1e-400`, canonical.CodeNumberOutOfRange, canonical.ErrNumberOutOfRange, 0},
		{"underflow just below half the smallest subnormal", `2e-324`, canonical.CodeNumberOutOfRange, canonical.ErrNumberOutOfRange, 0},
		{"huge negative exponent", `-1e-999999999`, canonical.CodeNumberOutOfRange, canonical.ErrNumberOutOfRange, 0},
		{"long integer beyond a double", "1" + strings.Repeat("0", 400), canonical.CodeNumberOutOfRange, canonical.ErrNumberOutOfRange, 0},

		{"lone high surrogate", `"\ud800"`, canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 1},
		{"high surrogate then a letter", `"\ud800a"`, canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 1},
		{"high surrogate then a non-surrogate escape", `"\ud800\u0041"`, canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 1},
		{"two high surrogates", `"\ud800\ud800"`, canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 1},
		{"lone low surrogate", `"a\udc00"`, canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 2},
		{"reversed pair", `"\ude00\ud83d"`, canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 1},
		{"lone surrogate in a name", `{"\udfff":1}`, canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 2},
		{"invalid UTF-8 byte", "\"a\xffb\"", canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 2},
		{"truncated UTF-8", "\"\xc3\"", canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 1},
		{"overlong UTF-8", "\"\xc0\xaf\"", canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 1},
		{"UTF-8 encoded surrogate", "\"\xed\xa0\x80\"", canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 1},
		{"invalid UTF-8 in a name", "{\"\xff\":1}", canonical.CodeInvalidUnicode, canonical.ErrInvalidUnicode, 2},

		{"too deep arrays", deep(canonical.MaxDepth + 1), canonical.CodeTooDeep, canonical.ErrTooDeep, canonical.MaxDepth},
		{"too deep objects", strings.Repeat(`{"a":`, canonical.MaxDepth+1) + "1" + strings.Repeat("}", canonical.MaxDepth+1),
			canonical.CodeTooDeep, canonical.ErrTooDeep, 5 * canonical.MaxDepth},
		{"very deep input", deep(1 << 20), canonical.CodeTooDeep, canonical.ErrTooDeep, canonical.MaxDepth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := canonical.Canonicalize([]byte(tt.give))
			if err == nil {
				t.Fatalf("Canonicalize(%q) = %q, want error %s", tt.give, got, tt.wantCode)
			}
			if got != nil {
				t.Errorf("Canonicalize returned output %q with its error", got)
			}
			var cerr *canonical.Error
			if !errors.As(err, &cerr) {
				t.Fatalf("error %v (%T) is not a *canonical.Error", err, err)
			}
			if cerr.Code != tt.wantCode {
				t.Errorf("Code = %q, want %q (%v)", cerr.Code, tt.wantCode, err)
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.wantErr)
			}
			for _, other := range []error{canonical.ErrSyntax, canonical.ErrDuplicateMember, canonical.ErrNFCCollision,
				canonical.ErrNumberOutOfRange, canonical.ErrInvalidUnicode, canonical.ErrTooDeep} {
				if other != tt.wantErr && errors.Is(err, other) {
					t.Errorf("error %v also matches %v", err, other)
				}
			}
			if tt.wantOffset >= 0 && cerr.Offset != tt.wantOffset {
				t.Errorf("Offset = %d, want %d (%v)", cerr.Offset, tt.wantOffset, err)
			}
			if cerr.Msg == "" || !strings.Contains(err.Error(), tt.wantCode) {
				t.Errorf("Error() = %q, want a message naming %s", err.Error(), tt.wantCode)
			}
			if canonical.Valid([]byte(tt.give)) {
				t.Errorf("Valid(%q) = true", tt.give)
			}
		})
	}
}

// TestManyMembers covers objects too large for the insertion sort.
func TestManyMembers(t *testing.T) {
	t.Parallel()
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("m%02d", i))
	}
	doc := func(names []string) string {
		var b strings.Builder
		b.WriteString("{")
		for i, n := range names {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q:%d", n, len(n))
		}
		b.WriteString("}")
		return b.String()
	}
	want := doc(names)
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	for _, give := range []string{want, doc(reversed)} {
		got, err := canonical.Canonicalize([]byte(give))
		if err != nil || string(got) != want {
			t.Fatalf("Canonicalize(%s) = %s, %v; want %s", give, got, err, want)
		}
	}
	withDup := append(slices.Clone(reversed), "m07")
	if _, err := canonical.Canonicalize([]byte(doc(withDup))); !errors.Is(err, canonical.ErrDuplicateMember) {
		t.Fatalf("40 members and a duplicate: %v, want ErrDuplicateMember", err)
	}
	withNFC := append(slices.Clone(names), "é", "é")
	if _, err := canonical.Canonicalize([]byte(doc(withNFC))); !errors.Is(err, canonical.ErrNFCCollision) {
		t.Fatalf("40 members and an NFC collision: %v, want ErrNFCCollision", err)
	}
	// Duplicates at both ends of a small object, found by the insertion sort.
	for _, give := range []string{`{"a":1,"b":2,"c":3,"a":4}`, `{"c":1,"b":2,"a":3,"c":4}`, `{"b":1,"b":2}`} {
		if _, err := canonical.Canonicalize([]byte(give)); !errors.Is(err, canonical.ErrDuplicateMember) {
			t.Errorf("Canonicalize(%s) = %v, want ErrDuplicateMember", give, err)
		}
	}
}

func TestDepthLimitIsInclusive(t *testing.T) {
	t.Parallel()
	arr := strings.Repeat("[", canonical.MaxDepth) + strings.Repeat("]", canonical.MaxDepth)
	got, err := canonical.Canonicalize([]byte(arr))
	if err != nil || string(got) != arr {
		t.Fatalf("%d nested arrays: %q, %v; want them accepted", canonical.MaxDepth, got, err)
	}
	obj := strings.Repeat(`{"a":`, canonical.MaxDepth-1) + "{}" + strings.Repeat("}", canonical.MaxDepth-1)
	if _, err := canonical.Canonicalize([]byte(obj)); err != nil {
		t.Fatalf("%d nested objects: %v; want them accepted", canonical.MaxDepth, err)
	}
	// Depth is nesting, not the number of containers: many siblings are fine.
	wide := "[" + strings.Repeat("[[]],", 10*canonical.MaxDepth) + "[]]"
	if _, err := canonical.Canonicalize([]byte(wide)); err != nil {
		t.Fatalf("wide array: %v", err)
	}
}

func TestErrorIs(t *testing.T) {
	t.Parallel()
	err := error(&canonical.Error{Code: canonical.CodeTooDeep})
	if !errors.Is(err, canonical.ErrTooDeep) {
		t.Error("*Error with CodeTooDeep does not match ErrTooDeep")
	}
	if errors.Is(err, canonical.ErrSyntax) {
		t.Error("*Error with CodeTooDeep matches ErrSyntax")
	}
	if errors.Is(&canonical.Error{Code: "other"}, nil) {
		t.Error("*Error matches nil")
	}
	if errors.Is(err, canonical.ErrNotObject) {
		t.Error("*Error matches ErrNotObject")
	}
}

func TestAppendCanonical(t *testing.T) {
	t.Parallel()
	dst := []byte("prefix:")
	got, err := canonical.AppendCanonical(dst, []byte(`{"b":2,"a":1}`))
	if err != nil || string(got) != `prefix:{"a":1,"b":2}` {
		t.Fatalf("AppendCanonical = %q, %v", got, err)
	}
	got, err = canonical.AppendCanonical([]byte("prefix:"), []byte(`{"b":2,"a":}`))
	if !errors.Is(err, canonical.ErrSyntax) || string(got) != "prefix:" {
		t.Fatalf("AppendCanonical on bad input = %q, %v; want the prefix back and ErrSyntax", got, err)
	}
	got, err = canonical.AppendCanonical(nil, []byte(`[1.0]`))
	if err != nil || string(got) != `[1]` {
		t.Fatalf("AppendCanonical(nil) = %q, %v", got, err)
	}
}

func TestAppendString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		give     string
		want     string
		wantCode string
		offset   int
	}{
		{give: "acme", want: `"acme"`},
		{give: "", want: `""`},
		{give: "a\"b\\c/d\n\x01", want: `"a\"b\\c/d\n\u0001"`},
		{give: "cafe\u0301", want: "\"caf\u00e9\""},
		{give: "\U0001F600", want: "\"\U0001F600\""},
		{give: "ab\xff", wantCode: canonical.CodeInvalidUnicode, offset: 2},
		{give: "é\xed\xa0\x80", wantCode: canonical.CodeInvalidUnicode, offset: 2},
	}
	for _, tt := range tests {
		got, err := canonical.AppendString([]byte("x"), tt.give)
		if tt.wantCode != "" {
			var cerr *canonical.Error
			if !errors.As(err, &cerr) || cerr.Code != tt.wantCode || cerr.Offset != tt.offset {
				t.Errorf("AppendString(%q) error = %v, want %s at %d", tt.give, err, tt.wantCode, tt.offset)
			}
			if string(got) != "x" {
				t.Errorf("AppendString(%q) on error returned %q, want dst unchanged", tt.give, got)
			}
			continue
		}
		if err != nil || string(got) != "x"+tt.want {
			t.Errorf("AppendString(%q) = %q, %v; want %q", tt.give, got, err, "x"+tt.want)
		}
	}
}

func TestCompareNames(t *testing.T) {
	t.Parallel()
	// Each name sorts strictly before the next.
	order := []string{"", "\r", "1", "A", "B", "a", "aa", "ab", "b", "\u0080", "\u00e9", "\u20ac", "\ud7ff",
		"\U00010000", "\U0001F600", "\U0001F600a", "\U0001F601", "\U0010FFFF", "\ue000", "\ufb33", "\uffff"}
	for i := range order {
		for j := range order {
			want := 0
			switch {
			case i < j:
				want = -1
			case i > j:
				want = 1
			}
			if got := canonical.CompareNames(order[i], order[j]); got != want {
				t.Errorf("CompareNames(%+q, %+q) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
}

func TestInputNotModified(t *testing.T) {
	t.Parallel()
	raw := []byte(`{"z":"Zu\u0308rich","a":[2.0,1e21]}`)
	orig := bytes.Clone(raw)
	if _, err := canonical.Canonicalize(raw); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, orig) {
		t.Fatalf("input modified: %q", raw)
	}
}
