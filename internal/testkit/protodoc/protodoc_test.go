package protodoc_test

import (
	"reflect"
	"testing"

	"github.com/tesserix/toolexec/internal/testkit/protodoc"
)

func TestMembers(t *testing.T) {
	for _, tc := range []struct {
		text string
		want []protodoc.Member
	}{
		{"`tool`, `outcome`", []protodoc.Member{{Name: "tool"}, {Name: "outcome"}}},
		{
			"`tool`, `error` (detail for operators, when there is some)",
			[]protodoc.Member{{Name: "tool"}, {Name: "error", Note: "detail for operators, when there is some"}},
		},
		{
			"`key`, `action` (`complete` or `release`), `outcome`",
			[]protodoc.Member{{Name: "key"}, {Name: "action", Note: "`complete` or `release`"}, {Name: "outcome"}},
		},
		{
			"`filter` (a subject (`a.b`); default all), at most one start, `since` (RFC 3339)",
			[]protodoc.Member{{Name: "filter", Note: "a subject (`a.b`); default all"}, {Name: "since", Note: "RFC 3339"}},
		},
		{"`records` erased (-1 when unknown)", []protodoc.Member{{Name: "records"}}},
		{"`maximum messages per\n  subject exceeded`", []protodoc.Member{{Name: "maximum messages per subject exceeded"}}},
		{"the `tool` (a `)` in code) and", []protodoc.Member{{Name: "tool", Note: "a `)` in code"}}},
		{"no members (`seats`)", nil},
	} {
		if got := protodoc.Members(tc.text); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Members(%q) = %q, want %q", tc.text, got, tc.want)
		}
	}
}

func TestNamesAndCodeSpans(t *testing.T) {
	text := "`a`, `b` (`c`), `a`"
	if got, want := protodoc.Names(text), []string{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Names = %q, want %q", got, want)
	}
	if got, want := protodoc.CodeSpans(text), []string{"a", "b", "c", "a"}; !reflect.DeepEqual(got, want) {
		t.Errorf("CodeSpans = %q, want %q", got, want)
	}
}

const page = "# Title\n\n" +
	"## 1. One\n\nBefore.\n\n" +
	"| kind | data |\n|---|---|\n| `a` | `x`, `y` |\n| `b` | `z \\| w` or `v|u` |\n\n" +
	"### Sub\n\ntext of sub\n\n### Other\n\nmore\n\n" +
	"## 2. Two\n\n| kind | data |\n| :-- | --: |\n| `c` |\n"

func TestSectionsAndTables(t *testing.T) {
	d := protodoc.Parse("page.md", page)
	one := d.Section(t, 1)
	tb := protodoc.FindTable(t, one, "kind", "data")
	want := [][]string{{"`a`", "`x`, `y`"}, {"`b`", "`z \\| w` or `v|u`"}}
	if !reflect.DeepEqual(tb.Rows, want) {
		t.Errorf("rows %q, want %q", tb.Rows, want)
	}
	if i := tb.Column(t, "data"); i != 1 {
		t.Errorf("Column(data) = %d", i)
	}
	if got := protodoc.Subsection(t, one, "Sub"); got != "\ntext of sub\n\n" {
		t.Errorf("Subsection = %q", got)
	}
	two := protodoc.FindTable(t, d.Section(t, 2), "kind", "data")
	if !reflect.DeepEqual(two.Rows, [][]string{{"`c`"}}) {
		t.Errorf("section 2's rows %q: a short row is kept as it is", two.Rows)
	}
	if n := len(protodoc.Tables(one)); n != 1 {
		t.Errorf("section 1 has %d tables, want 1: section 2's belongs to it", n)
	}
}
