package docs_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// root is the repository, from this package's folder.
const root = "../.."

// pages are the Markdown files whose blocks are held true: globs relative to
// the root.
var pages = []string{"README.md", "docs/*.md", "deploy/README.md"}

// shellLangs are the fences whose blocks are commands to type.
var shellLangs = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// block is one fenced block of a page.
type block struct {
	ID      string // page#heading-slug:n, n counting the blocks under that heading
	Page    string // slash path from the root
	Line    int    // of the opening fence, 1-based
	Lang    string // first word of the info string ("" for a bare fence)
	Heading string // the nearest heading above it
	Text    string // the lines between the fences, each ending in \n
}

func (b block) String() string { return fmt.Sprintf("%s (%s:%d, ```%s)", b.ID, b.Page, b.Line, b.Lang) }

// shell reports whether the block holds commands to type.
func (b block) shell() bool { return shellLangs[b.Lang] }

// command is one command of a shell block: a logical line (continuation
// lines and quoted newlines joined), numbered from 1 in the order of the
// block, comments and blank lines left out. In a console block only the
// lines after a "$ " prompt are commands, and the lines up to the next prompt
// are what the command prints.
type command struct {
	N      int
	Text   string
	Output string // console blocks: the expected standard output
}

// commands splits a shell block into its commands.
func (b block) commands() []command {
	var cmds []command
	lines := strings.SplitAfter(b.Text, "\n")
	if b.Lang == "console" {
		for _, l := range lines {
			if c, ok := strings.CutPrefix(l, "$ "); ok {
				cmds = append(cmds, command{N: len(cmds) + 1, Text: strings.TrimRight(c, "\n")})
			} else if len(cmds) > 0 {
				cmds[len(cmds)-1].Output += l
			}
		}
		return cmds
	}
	var cur strings.Builder
	for _, l := range lines {
		if cur.Len() == 0 {
			t := strings.TrimSpace(l)
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
		}
		cur.WriteString(l)
		if open(cur.String()) {
			continue
		}
		cmds = append(cmds, command{N: len(cmds) + 1, Text: strings.TrimRight(cur.String(), "\n")})
		cur.Reset()
	}
	if cur.Len() > 0 {
		cmds = append(cmds, command{N: len(cmds) + 1, Text: strings.TrimRight(cur.String(), "\n")})
	}
	return cmds
}

// open reports whether the shell text s goes on past its last line: it ends
// in a backslash, or inside quotes.
func open(s string) bool {
	s = strings.TrimRight(s, "\n")
	var single, double, escaped, comment bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case comment:
			if c == '\n' {
				comment = false
			}
		case escaped:
			escaped = false
		case single:
			single = c != '\''
		case c == '\\':
			escaped = true
		case double:
			double = c != '"'
		case c == '\'':
			single = true
		case c == '"':
			double = true
		case c == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t' || s[i-1] == '\n'):
			comment = true
		}
	}
	return single || double || escaped
}

var (
	fence   = regexp.MustCompile("^(```+)\\s*([^`\\s]*)")
	heading = regexp.MustCompile(`^(#{1,6})\s+(.+?)\s*#*\s*$`)
)

// slug is GitHub's anchor of a heading: lower case, punctuation dropped,
// spaces turned into hyphens.
func slug(h string) string {
	h = strings.ReplaceAll(h, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// parsePage returns the fenced blocks of the page at rel (a slash path from
// the root).
func parsePage(rel, text string) ([]block, error) {
	var (
		blocks  []block
		section = "top"
		count   = map[string]int{}
		cur     *block
		closing string
	)
	for i, l := range strings.SplitAfter(text, "\n") {
		line := strings.TrimRight(l, "\n")
		if cur != nil {
			if strings.TrimSpace(line) == closing {
				blocks = append(blocks, *cur)
				cur = nil
				continue
			}
			cur.Text += line + "\n"
			continue
		}
		if m := fence.FindStringSubmatch(line); m != nil {
			s := slug(section)
			count[s]++
			cur = &block{ID: fmt.Sprintf("%s#%s:%d", rel, s, count[s]), Page: rel, Line: i + 1, Lang: m[2], Heading: section}
			closing = m[1]
			continue
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			section = m[2]
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a block that is never closed", rel, cur.Line)
	}
	return blocks, nil
}

// readBlocks returns the blocks of every page, in page order.
func readBlocks() ([]block, error) {
	var out []block
	seen := map[string]bool{}
	for _, g := range pages {
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(g)))
		if err != nil || len(files) == 0 {
			return nil, fmt.Errorf("no page %s (%v)", g, err)
		}
		sort.Strings(files)
		for _, f := range files {
			rel, _ := filepath.Rel(root, f)
			rel = filepath.ToSlash(rel)
			text, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			bs, err := parsePage(rel, string(text))
			if err != nil {
				return nil, err
			}
			for _, b := range bs {
				if seen[b.ID] {
					return nil, fmt.Errorf("two blocks named %s", b.ID)
				}
				seen[b.ID] = true
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// allBlocks returns the blocks of every page, failing the test on an error.
func allBlocks(t testing.TB) []block {
	t.Helper()
	bs, err := readBlocks()
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// docBlock returns the block named id, failing the test if there is none.
func docBlock(t testing.TB, id string) block {
	t.Helper()
	for _, b := range allBlocks(t) {
		if b.ID == id {
			return b
		}
	}
	t.Fatalf("no block %s in %s (the pages changed: see TestEveryBlockChecked's list)", id, strings.Join(pages, ", "))
	return block{}
}
