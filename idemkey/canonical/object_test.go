package canonical_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/idemkey/canonical"
)

func TestParseObject(t *testing.T) {
	t.Parallel()
	raw := " {\"seats\":2.0,\"flight\":\"BA117\",\"cafe\u0301\":{\"y\":[1e0],\"x\":null},\"\":true} "
	obj, err := canonical.ParseObject([]byte(raw), canonical.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	wantBytes := `{"":true,"café":{"x":null,"y":[1]},"flight":"BA117","seats":2}`
	if got := string(obj.Bytes()); got != wantBytes {
		t.Fatalf("Bytes() = %s, want %s", got, wantBytes)
	}
	want := []struct{ name, member, value string }{
		{"", `"":true`, `true`},
		{"café", `"café":{"x":null,"y":[1]}`, `{"x":null,"y":[1]}`},
		{"flight", `"flight":"BA117"`, `"BA117"`},
		{"seats", `"seats":2`, `2`},
	}
	if obj.Len() != len(want) {
		t.Fatalf("Len() = %d, want %d", obj.Len(), len(want))
	}
	for i, w := range want {
		if obj.Name(i) != w.name || string(obj.Member(i)) != w.member || string(obj.Value(i)) != w.value {
			t.Errorf("member %d = %q %s %s, want %q %s %s", i, obj.Name(i), obj.Member(i), obj.Value(i), w.name, w.member, w.value)
		}
		if got := obj.Index(w.name); got != i {
			t.Errorf("Index(%q) = %d, want %d", w.name, got, i)
		}
	}
	for _, name := range []string{"cafe\u0301", "caf\u00e9"} {
		if got := obj.Index(name); got != 1 {
			t.Errorf("Index(%+q) = %d, want 1 (names compare after NFC)", name, got)
		}
	}
	for _, name := range []string{"x", "Flight", "seats ", "caf", "\xff", "zzz", "\U0001F600"} {
		if got := obj.Index(name); got != -1 {
			t.Errorf("Index(%q) = %d, want -1", name, got)
		}
	}
}

func TestParseObjectErrors(t *testing.T) {
	t.Parallel()
	for _, give := range []string{`[]`, `"x"`, `1`, `null`, `true`, `false`} {
		obj, err := canonical.ParseObject([]byte(give), canonical.Limits{})
		if obj != nil || !errors.Is(err, canonical.ErrNotObject) {
			t.Errorf("ParseObject(%s) = %v, %v; want ErrNotObject", give, obj, err)
		}
		var cerr *canonical.Error
		if errors.As(err, &cerr) {
			t.Errorf("ParseObject(%s) error %v is a *canonical.Error", give, err)
		}
	}
	// A malformed document is reported as such, even when it is not an object.
	for give, want := range map[string]error{
		`[1e400]`:        canonical.ErrNumberOutOfRange,
		`[1,`:            canonical.ErrSyntax,
		`{"a":1} 2`:      canonical.ErrSyntax,
		`{"a":1,"a":1}`:  canonical.ErrDuplicateMember,
		`{"a":"\udc00"}`: canonical.ErrInvalidUnicode,
	} {
		if _, err := canonical.ParseObject([]byte(give), canonical.Limits{}); !errors.Is(err, want) {
			t.Errorf("ParseObject(%s) error %v, want %v", give, err, want)
		}
	}
}

func TestParseObjectDepth(t *testing.T) {
	t.Parallel()
	nest := func(n int) []byte {
		return []byte(strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1))
	}
	tests := []struct {
		maxDepth, depth int
		ok              bool
	}{
		{3, 3, true},
		{3, 4, false},
		{1, 1, true},
		{1, 2, false},
		{0, canonical.MaxDepth, true},
		{0, canonical.MaxDepth + 1, false},
		{canonical.MaxDepth + 50, canonical.MaxDepth + 1, false},
	}
	for _, tt := range tests {
		_, err := canonical.ParseObject(nest(tt.depth), canonical.Limits{Depth: tt.maxDepth})
		if tt.ok != (err == nil) || (!tt.ok && !errors.Is(err, canonical.ErrTooDeep)) {
			t.Errorf("ParseObject(depth %d, maxDepth %d) error %v, want ok=%v", tt.depth, tt.maxDepth, err, tt.ok)
		}
	}
}

// TestParseObjectLimits: each bound is met exactly at its value and refused one
// past it, wherever the excess stands (the top level or deep inside), with
// ErrTooManyValues and the offset where the excess begins; the value built
// alongside obeys the same bounds.
func TestParseObjectLimits(t *testing.T) {
	t.Parallel()
	members := func(n int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `"m%d":%d`, i, i)
		}
		b.WriteString("}")
		return b.String()
	}
	elements := func(n int) string {
		return "[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]"
	}
	tests := []struct {
		name string
		lim  canonical.Limits
		doc  string
		ok   bool
	}{
		{"members at the bound", canonical.Limits{Members: 3}, members(3), true},
		{"members past the bound", canonical.Limits{Members: 3}, members(4), false},
		{"members past the bound, nested", canonical.Limits{Members: 3}, `{"a":` + members(4) + `}`, false},
		{"nested members count per object", canonical.Limits{Members: 3}, `{"a":` + members(3) + `,"b":` + members(3) + `,"c":1}`, true},
		{"elements at the bound", canonical.Limits{Elements: 5}, `{"a":` + elements(5) + `}`, true},
		{"elements past the bound", canonical.Limits{Elements: 5}, `{"a":` + elements(6) + `}`, false},
		{"elements past the bound, nested", canonical.Limits{Elements: 2}, `{"a":[[1,2],[1,2,3]]}`, false},
		{"empty containers", canonical.Limits{Members: 1, Elements: 1}, `{"a":[]}`, true},
		// {"a":[1,2]} holds four values: the object, the array and two numbers.
		{"values at the bound", canonical.Limits{Values: 4}, `{"a":[1,2]}`, true},
		{"values past the bound", canonical.Limits{Values: 4}, `{"a":[1,2,3]}`, false},
		{"values count containers", canonical.Limits{Values: 3}, `{"a":[[]],"b":{}}`, false},
		{"no bounds", canonical.Limits{}, members(5000), true},
	}
	for _, tt := range tests {
		_, err := canonical.ParseObject([]byte(tt.doc), tt.lim)
		if tt.ok != (err == nil) || (!tt.ok && !errors.Is(err, canonical.ErrTooManyValues)) {
			t.Errorf("%s: ParseObject error %v, want ok=%v", tt.name, err, tt.ok)
		}
		_, v, verr := canonical.ParseObjectValue([]byte(tt.doc), tt.lim)
		if (verr == nil) != (err == nil) || (verr == nil && v == nil) {
			t.Errorf("%s: ParseObjectValue error %v, ParseObject error %v", tt.name, verr, err)
		}
	}
	// The offset points at the first value past the bound.
	_, err := canonical.ParseObject([]byte(`{"a":[1,2,3]}`), canonical.Limits{Elements: 2})
	var cerr *canonical.Error
	if !errors.As(err, &cerr) || cerr.Code != canonical.CodeTooManyValues || cerr.Offset != 10 {
		t.Errorf("error %#v, want code %s at byte 10", err, canonical.CodeTooManyValues)
	}
}

func TestObjectParseReuse(t *testing.T) {
	t.Parallel()
	var obj canonical.Object
	if obj.Len() != 0 || obj.Bytes() != nil || obj.Index("a") != -1 {
		t.Fatal("zero Object is not empty")
	}
	if err := obj.Parse([]byte(`{"b":1,"a":2,"c":3}`), canonical.Limits{}); err != nil {
		t.Fatal(err)
	}
	if err := obj.Parse([]byte(`{"z":[true]}`), canonical.Limits{}); err != nil {
		t.Fatal(err)
	}
	if obj.Len() != 1 || string(obj.Bytes()) != `{"z":[true]}` || obj.Index("a") != -1 || obj.Index("z") != 0 {
		t.Fatalf("reused Object holds %s (%d members)", obj.Bytes(), obj.Len())
	}
	if err := obj.Parse([]byte(`{"z":`), canonical.Limits{}); err == nil {
		t.Fatal("want an error")
	}
	if obj.Len() != 0 || obj.Bytes() != nil {
		t.Fatalf("Object after a failed Parse holds %s (%d members)", obj.Bytes(), obj.Len())
	}
}
