package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	inlineCode = regexp.MustCompile("`([^`]+)`")
	testFunc   = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Fuzz|Example)\w*)\(`)
)

// goTestCommands returns the go test commands of a page: the lines of its
// blocks that run go test, and its inline code that does (which may wrap
// across lines; a table's \| is a |).
func goTestCommands(page string) []string {
	var cmds, prose []string
	inBlock := false
	for _, l := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inBlock = !inBlock
			prose = append(prose, "")
			continue
		}
		if inBlock {
			if i := strings.Index(l, "go test "); i >= 0 {
				cmds = append(cmds, l[i:])
			}
			continue
		}
		prose = append(prose, l)
	}
	for _, m := range inlineCode.FindAllStringSubmatch(strings.Join(prose, "\n"), -1) {
		c := strings.ReplaceAll(strings.ReplaceAll(m[1], "\n", " "), `\|`, "|")
		if i := strings.Index(c, "go test "); i >= 0 {
			cmds = append(cmds, c[i:])
		}
	}
	return cmds
}

// words splits a command line the way a shell would, for the quoting the
// pages use: single and double quotes, no escapes.
func words(s string) []string {
	var out []string
	var cur strings.Builder
	quote := byte(0)
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteByte(c)
			}
		case c == '\'' || c == '"':
			quote, in = c, true
		case c == ' ' || c == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(c)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// topLevel splits a -run or -bench pattern into its alternatives at the top
// level of its first element (what names top-level tests; after a / come
// subtests).
func topLevel(pattern string) []string {
	depth := 0
	var alts []string
	start := 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '/':
			if depth == 0 {
				return append(alts, pattern[start:i])
			}
		case '|':
			if depth == 0 {
				alts = append(alts, pattern[start:i])
				start = i + 1
			}
		}
	}
	return append(alts, pattern[start:])
}

// TestGoTestCommands: every go test command the pages give, in a block or in
// the prose, names packages that exist, and each alternative of its -run,
// -bench and -fuzz patterns matches a test, benchmark or fuzz target of one of
// them (build tags aside). A benchmark renamed or moved fails it.
func TestGoTestCommands(t *testing.T) {
	checked := 0
	for _, g := range pages {
		files, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(g)))
		for _, f := range files {
			text, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, f)
			for _, m := range goTestCommands(string(text)) {
				m, _, _ = strings.Cut(m, " #")
				m, _, _ = strings.Cut(m, " |")
				w := words(m)
				var pkgs []string
				patterns := map[string]string{}
				for i := 2; i < len(w); i++ {
					a := w[i]
					switch {
					case strings.HasPrefix(a, "./") || a == ".":
						pkgs = append(pkgs, a)
					case a == "-run" || a == "-bench" || a == "-fuzz":
						if i+1 < len(w) {
							patterns[a] = w[i+1]
							i++
						}
					case strings.HasPrefix(a, "-run=") || strings.HasPrefix(a, "-bench=") || strings.HasPrefix(a, "-fuzz="):
						k, v, _ := strings.Cut(a, "=")
						patterns[k] = v
					}
				}
				var names []string
				for _, p := range pkgs {
					if strings.Contains(p, "...") {
						names = nil
						pkgs = nil
						break
					}
					dir := filepath.Join(root, filepath.FromSlash(p))
					tests, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
					if len(tests) == 0 {
						t.Errorf("%s: `%s`: %s has no tests", rel, m, p)
					}
					for _, tf := range tests {
						src, err := os.ReadFile(tf)
						if err != nil {
							t.Fatal(err)
						}
						for _, fm := range testFunc.FindAllStringSubmatch(string(src), -1) {
							names = append(names, fm[1])
						}
					}
				}
				if len(pkgs) == 0 {
					continue // ./... or a package named otherwise: nothing to hold it to
				}
				for flag, pat := range patterns {
					if pat == "^$" || pat == "." {
						continue
					}
					for _, alt := range topLevel(pat) {
						re, err := regexp.Compile(alt)
						if err != nil {
							t.Errorf("%s: `%s`: %s %q: %v", rel, m, flag, alt, err)
							continue
						}
						found := false
						for _, n := range names {
							found = found || re.MatchString(n)
						}
						if !found {
							t.Errorf("%s: `%s`: %s %q matches nothing in %s", rel, m, flag, alt, strings.Join(pkgs, " "))
						}
						checked++
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no go test command with a pattern found in the pages")
	}
	t.Logf("%d patterns of go test commands checked", checked)
}
