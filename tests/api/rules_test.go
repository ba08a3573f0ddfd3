package api_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// version is a semantic version without the leading "v".
type version struct {
	major, minor, patch int
	pre                 string // the pre-release, "" for a release
}

var versionRe = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(?:-([0-9A-Za-z.-]+))?$`)

// parseVersion reads a release as internal/buildinfo writes it: 0.1.0-dev.
func parseVersion(s string) (version, error) {
	m := versionRe.FindStringSubmatch(s)
	if m == nil {
		return version{}, fmt.Errorf("%q is not a semantic version X.Y.Z[-pre]", s)
	}
	var v version
	v.major, _ = strconv.Atoi(m[1])
	v.minor, _ = strconv.Atoi(m[2])
	v.patch, _ = strconv.Atoi(m[3])
	v.pre = m[4]
	return v, nil
}

func (v version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch)
	if v.pre != "" {
		s += "-" + v.pre
	}
	return s
}

// compare orders versions as semantic versioning does: -1, 0 or +1.
func compare(a, b version) int {
	for _, d := range [][2]int{{a.major, b.major}, {a.minor, b.minor}, {a.patch, b.patch}} {
		if d[0] != d[1] {
			return sign(d[0] - d[1])
		}
	}
	switch {
	case a.pre == b.pre:
		return 0
	case a.pre == "":
		return 1
	case b.pre == "":
		return -1
	}
	x, y := strings.Split(a.pre, "."), strings.Split(b.pre, ".")
	for i := 0; i < len(x) && i < len(y); i++ {
		if x[i] == y[i] {
			continue
		}
		nx, errx := strconv.Atoi(x[i])
		ny, erry := strconv.Atoi(y[i])
		switch {
		case errx == nil && erry == nil:
			return sign(nx - ny)
		case errx == nil:
			return -1 // numeric identifiers sort before the others
		case erry == nil:
			return 1
		}
		return strings.Compare(x[i], y[i])
	}
	return sign(len(x) - len(y))
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

// sectionNames are the sections a release of the changelog may have.
var sectionNames = []string{"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}

// logRelease is one release of CHANGELOG.md: ## [version] - date.
type logRelease struct {
	version  string             // "Unreleased", or a version
	date     string             // YYYY-MM-DD, "unreleased", or "" (Unreleased)
	line     int                // of its heading
	sections map[string][]entry // section name -> its entries, in order
	order    []string           // the section names, in order
}

// entry is one list item of a section.
type entry struct {
	text string
	line int
}

var (
	releaseHeading = regexp.MustCompile(`^## \[([^\]]+)\](?: - (.+))?$`)
	sectionHeading = regexp.MustCompile(`^### (.+)$`)
	codeSpan       = regexp.MustCompile("`([^`]+)`")
)

// parseChangelog reads the releases of a changelog, the newest first. The text
// before the first release heading is its preamble.
func parseChangelog(text string) ([]logRelease, error) {
	var (
		out     []logRelease
		cur     *logRelease
		section string
		item    *entry
	)
	end := func() {
		if item != nil && cur != nil && section != "" {
			item.text = strings.TrimSpace(item.text)
			cur.sections[section] = append(cur.sections[section], *item)
		}
		item = nil
	}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		switch {
		case strings.HasPrefix(line, "## "):
			end()
			m := releaseHeading.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("line %d: %q is not a release heading (## [Unreleased], or ## [X.Y.Z] - YYYY-MM-DD)", n, line)
			}
			out = append(out, logRelease{version: m[1], date: m[2], line: n, sections: map[string][]entry{}})
			cur, section = &out[len(out)-1], ""
		case strings.HasPrefix(line, "### "):
			end()
			if cur == nil {
				return nil, fmt.Errorf("line %d: a section before any release heading", n)
			}
			section = sectionHeading.FindStringSubmatch(line)[1]
			if _, dup := cur.sections[section]; dup {
				return nil, fmt.Errorf("line %d: a second %q section in [%s]", n, section, cur.version)
			}
			cur.sections[section] = nil
			cur.order = append(cur.order, section)
		case cur != nil && section != "" && (strings.HasPrefix(line, "- ") || strings.HasPrefix(line, "* ")):
			end()
			item = &entry{text: line[2:], line: n}
		case item != nil && (line == "" || strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t")):
			item.text += "\n" + strings.TrimSpace(line) // a continuation line, or a blank line within the item
		default:
			end()
		}
	}
	end()
	return out, nil
}

// change is one incompatible change from the baseline.
type change struct {
	surface string   // "Go", "Python", "wire" or "key derivation"
	what    string   // the change, as the tool that found it says it
	names   []string // an entry's code span that is one of these, or a prefix of one at a dot, names it
	phrase  string   // or an entry that says this phrase (case aside)
	major   bool     // a major version even while v0
}

// named reports whether the entry names c.
func (c change) named(e entry) bool {
	if c.phrase != "" && strings.Contains(strings.ToLower(strings.Join(strings.Fields(e.text), " ")), strings.ToLower(c.phrase)) {
		return true
	}
	for _, m := range codeSpan.FindAllStringSubmatch(e.text, -1) {
		span := normalName(m[1])
		if span == "" {
			continue
		}
		for _, n := range c.names {
			if n == span || strings.HasPrefix(n, span+".") {
				return true
			}
		}
	}
	return false
}

var typeArgs = regexp.MustCompile(`\[[^\]]*\]`)

// normalName writes a Go or Python name the one way the rule compares them:
// without type arguments, pointer stars, parentheses or a call's "()".
// "(*natsstore.Store).Claim" and "natsstore.Store.Claim()" are
// "natsstore.Store.Claim".
func normalName(s string) string {
	s = typeArgs.ReplaceAllString(s, "")
	s = strings.NewReplacer("(", "", ")", "", "*", "").Replace(s)
	return strings.TrimSpace(s)
}

// counted returns the entries of the Changed and Removed sections that may
// license a change from the baseline: those of Unreleased and of every
// release after the baseline's.
func counted(log []logRelease, base version) []entry {
	var out []entry
	for _, r := range log {
		if r.version != "Unreleased" {
			v, err := parseVersion(r.version)
			if err != nil || compare(v, base) <= 0 {
				continue
			}
		}
		out = append(out, r.sections["Changed"]...)
		out = append(out, r.sections["Removed"]...)
	}
	return out
}

// judge applies the rule to the changes found: each must be named by a
// counted entry, and the current release must be far enough from the
// baseline's. It returns what is wrong, nothing when the changes may ship.
func judge(changes []change, log []logRelease, base, cur version) []string {
	var problems []string
	if compare(cur, base) < 0 {
		problems = append(problems, fmt.Sprintf("internal/buildinfo.Release is %s, before the baseline's %s: a release never goes back",
			cur, base))
	}
	if len(changes) == 0 {
		return problems
	}
	entries := counted(log, base)
	major := base.major > 0
	for _, c := range changes {
		major = major || c.major
		named := false
		for _, e := range entries {
			named = named || c.named(e)
		}
		if !named {
			how := quoteNames(c)
			problems = append(problems, fmt.Sprintf("%s: %s\n    is not in CHANGELOG.md: add an entry under Changed or Removed "+
				"of [Unreleased] that says why, and %s", c.surface, c.what, how))
		}
	}
	var next version
	if major {
		next = version{major: base.major + 1, pre: "dev"}
	} else {
		next = version{major: base.major, minor: base.minor + 1, pre: "dev"}
	}
	if compare(version{major: cur.major, minor: cur.minor}, version{major: next.major, minor: next.minor}) < 0 {
		kind := "a minor version while the baseline is v0"
		if major {
			kind = "a major version"
		}
		problems = append(problems, fmt.Sprintf("%d incompatible change(s) since %s need %s: internal/buildinfo.Release is %s, want %s or later "+
			"(and python/src/toolexec/_version.py in step)", len(changes), base, kind, cur, next))
	}
	return problems
}

// quoteNames says how an entry may name c.
func quoteNames(c change) string {
	if c.phrase != "" {
		return fmt.Sprintf("say %q", c.phrase)
	}
	var q []string
	for _, n := range c.names {
		q = append(q, "`"+n+"`")
	}
	return "write one of " + strings.Join(q, ", ") + " (or a prefix of one at a dot)"
}
