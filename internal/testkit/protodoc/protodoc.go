package protodoc

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// Doc is the text of a protocol page.
type Doc struct {
	path string
	text string
}

// Read reads the page at path, failing the test when it cannot.
func Read(t testing.TB, path string) *Doc {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("protodoc: %v", err)
	}
	return &Doc{path: path, text: string(b)}
}

// Parse returns the page whose text is text; path names it in failures.
func Parse(path, text string) *Doc { return &Doc{path: path, text: text} }

// Section returns the text of section n, from its heading "## n. ..." to the
// next heading of its level, its subsections included.
func (d *Doc) Section(t testing.TB, n int) string {
	t.Helper()
	s, ok := block(d.text, fmt.Sprintf("## %d. ", n), "## ")
	if !ok {
		t.Fatalf("protodoc: %s has no section %d (a line starting %q)", d.path, n, fmt.Sprintf("## %d. ", n))
	}
	return s
}

// Subsection returns the text under the heading "### title" of text, up to
// the next heading of any level.
func Subsection(t testing.TB, text, title string) string {
	t.Helper()
	s, ok := block(text, "### "+title+"\n", "#")
	if !ok {
		t.Fatalf("protodoc: no subsection %q", "### "+title)
	}
	return s
}

// block returns the lines of text after the first line starting with start
// (start itself may end in a newline, to match a whole line), up to the next
// line starting with end.
func block(text, start, end string) (string, bool) {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, start) {
			continue
		}
		var b strings.Builder
		for _, l := range lines[i+1:] {
			if strings.HasPrefix(l, end) {
				break
			}
			b.WriteString(l)
		}
		return b.String(), true
	}
	return "", false
}

// Table is a Markdown table: its header's cells and its rows' cells, each
// trimmed of spaces.
type Table struct {
	Header []string
	Rows   [][]string
}

// Column returns the index of the column headed name.
func (tb Table) Column(t testing.TB, name string) int {
	t.Helper()
	i := slices.Index(tb.Header, name)
	if i < 0 {
		t.Fatalf("protodoc: the table %q has no column %q", tb.Header, name)
	}
	return i
}

// FindTable returns the one table of text whose header is exactly header,
// failing the test when there is none or more than one.
func FindTable(t testing.TB, text string, header ...string) Table {
	t.Helper()
	var found []Table
	var headers [][]string
	for _, tb := range Tables(text) {
		headers = append(headers, tb.Header)
		if slices.Equal(tb.Header, header) {
			found = append(found, tb)
		}
	}
	if len(found) != 1 {
		t.Fatalf("protodoc: %d tables headed %q, want 1 (the tables here are headed %q)", len(found), header, headers)
	}
	return found[0]
}

// Tables returns every table of text: a header line, a delimiter line of
// dashes, and the rows that follow, each line starting with '|'. A row with
// another number of cells than the header is kept as it is, for the test to
// refuse.
func Tables(text string) []Table {
	var out []Table
	lines := strings.Split(text, "\n")
	for i := 0; i+1 < len(lines); i++ {
		head, delim := strings.TrimSpace(lines[i]), strings.TrimSpace(lines[i+1])
		if !strings.HasPrefix(head, "|") || !isDelimiter(delim) {
			continue
		}
		tb := Table{Header: cells(head)}
		i += 2
		for ; i < len(lines) && strings.HasPrefix(strings.TrimSpace(lines[i]), "|"); i++ {
			tb.Rows = append(tb.Rows, cells(strings.TrimSpace(lines[i])))
		}
		out = append(out, tb)
	}
	return out
}

// isDelimiter reports whether line is a table's delimiter row: |---|:--:|...
func isDelimiter(line string) bool {
	if !strings.HasPrefix(line, "|") {
		return false
	}
	for _, c := range cells(line) {
		if strings.Trim(c, "-:") != "" || !strings.Contains(c, "-") {
			return false
		}
	}
	return true
}

// cells splits a table line into its cells; a '|' inside backticks does not
// end a cell.
func cells(line string) []string {
	line = strings.TrimPrefix(strings.TrimSuffix(line, "|"), "|")
	var out []string
	var cell strings.Builder
	code := false
	for _, r := range line {
		switch {
		case r == '`':
			code = !code
		case r == '|' && !code:
			out = append(out, strings.TrimSpace(cell.String()))
			cell.Reset()
			continue
		}
		cell.WriteRune(r)
	}
	return append(out, strings.TrimSpace(cell.String()))
}

// Member is a name a text gives in backticks outside parentheses, with its
// note: the text of the parenthesis that follows it, when only spaces come
// between.
type Member struct {
	Name string
	Note string
}

// Members returns the members text names, in order. Backticked words inside
// parentheses belong to a note and are not members; white space inside
// backticks (a code span broken across lines) reads as one space.
func Members(text string) []Member {
	var out []Member
	depth := 0
	last := -1    // the member a parenthesis opened now would note
	noting := -1  // the member the open parenthesis notes
	noteFrom := 0 // where that note's text starts
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case c == '`':
			j := strings.IndexByte(text[i+1:], '`')
			if j < 0 {
				return out
			}
			if depth == 0 {
				out = append(out, Member{Name: spaces(text[i+1 : i+1+j])})
				last = len(out) - 1
			}
			i += j + 1
		case c == '(':
			if depth == 0 {
				noting, noteFrom = last, i+1
			}
			depth++
		case c == ')' && depth > 0:
			depth--
			if depth == 0 {
				if noting >= 0 {
					out[noting].Note = spaces(text[noteFrom:i])
				}
				last, noting = -1, -1
			}
		case depth == 0 && !unicode.IsSpace(rune(c)):
			last = -1
		}
	}
	return out
}

// Names returns the distinct names of text's members, in order.
func Names(text string) []string {
	var out []string
	for _, m := range Members(text) {
		if !slices.Contains(out, m.Name) {
			out = append(out, m.Name)
		}
	}
	return out
}

// CodeSpans returns every backticked span of text, notes included, in order,
// white space inside each read as one space.
func CodeSpans(text string) []string {
	var out []string
	for {
		i := strings.IndexByte(text, '`')
		if i < 0 {
			return out
		}
		j := strings.IndexByte(text[i+1:], '`')
		if j < 0 {
			return out
		}
		out = append(out, spaces(text[i+1:i+1+j]))
		text = text[i+j+2:]
	}
}

// spaces returns s with each run of white space made one space.
func spaces(s string) string { return strings.Join(strings.Fields(s), " ") }
