package api_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/internal/buildinfo"
)

var update = flag.Bool("update", false,
	"write the baseline in api/ from the code (make api-snapshot): refused while it is a release's, unless this is a release")

const (
	root        = "../.."
	baselineDir = root + "/api"
	changelog   = root + "/CHANGELOG.md"

	// The baseline's files, and where each comes from.
	releaseFile = "RELEASE"
	goFile      = "go.zip"
	pythonFile  = "python.txt"
	wireFile    = "WIRE_VERSION"
	keysFile    = "keys.json"

	pythonSource = root + "/python/tests/public_api.txt"
	wireSource   = root + "/tests/wire/testdata/golden/WIRE_VERSION"
	keysSource   = root + "/schemas/vectors/keys.json"
)

// rule is what a failure of TestReleaseRules ends with.
const rule = `The rule (docs/RELEASES.md): an incompatible change ships only in a major version
(a minor one while v0; a key derivation change always in a major one), listed under Changed
or Removed in CHANGELOG.md's [Unreleased] with what it changes named. If the change is not
meant, undo it. Before the first release only, make api-snapshot takes the code's API as
the baseline.`

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustVersion(t *testing.T, s string) version {
	t.Helper()
	v, err := parseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func readChangelog(t *testing.T) []logRelease {
	t.Helper()
	log, err := parseChangelog(string(read(t, changelog)))
	if err != nil {
		t.Fatalf("CHANGELOG.md: %v", err)
	}
	return log
}

// TestReleaseRules holds the code to the baseline in api/: the exported Go
// API, the Python names, the wire version and the key derivation. With
// -update it writes the baseline instead (make api-snapshot).
func TestReleaseRules(t *testing.T) {
	apidiff := apidiffPath(t)
	cur := mustVersion(t, buildinfo.Release)
	if *update {
		snapshot(t, apidiff, cur)
		return
	}
	base := mustVersion(t, strings.TrimSpace(string(read(t, filepath.Join(baselineDir, releaseFile)))))

	changes := goChanges(t, apidiff, root, filepath.Join(baselineDir, goFile))
	changes = append(changes, pythonChanges(
		pythonLines(string(read(t, filepath.Join(baselineDir, pythonFile)))),
		pythonLines(string(read(t, pythonSource))))...)
	changes = append(changes, wireChanges(
		strings.TrimSpace(string(read(t, filepath.Join(baselineDir, wireFile)))),
		strings.TrimSpace(string(read(t, wireSource))))...)
	changes = append(changes, keyChanges(t, read(t, filepath.Join(baselineDir, keysFile)))...)

	for _, c := range changes {
		t.Logf("incompatible, %s: %s", c.surface, c.what)
	}
	if problems := judge(changes, readChangelog(t), base, cur); len(problems) > 0 {
		t.Fatalf("the code breaks what the baseline (api/, release %s) promised:\n  %s\n%s", base, strings.Join(problems, "\n  "), rule)
	}
}

// snapshot writes the baseline from the code, when it may: the baseline is
// no release's yet (its release has a -dev suffix), or the code is a release.
func snapshot(t *testing.T, apidiff string, cur version) {
	if b, err := os.ReadFile(filepath.Join(baselineDir, releaseFile)); err == nil {
		base := mustVersion(t, strings.TrimSpace(string(b)))
		if !strings.HasSuffix(base.pre, "dev") && strings.HasSuffix(cur.pre, "dev") {
			t.Fatalf("api/ is the baseline of release %s: it is written anew when the next release is cut "+
				"(internal/buildinfo.Release without -dev), not at %s.\n%s", base, cur, rule)
		}
	}
	if err := os.MkdirAll(baselineDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeGoBaseline(t, apidiff, root, filepath.Join(baselineDir, goFile))
	for src, dst := range map[string]string{pythonSource: pythonFile, wireSource: wireFile, keysSource: keysFile} {
		if err := os.WriteFile(filepath.Join(baselineDir, dst), read(t, src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(baselineDir, releaseFile), []byte(cur.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("api/ is now the baseline of %s: %s", cur, strings.Join(publicPackages(t, root), ", "))
}

var dateRe = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}$`)

// TestChangelogShape holds CHANGELOG.md to its format: [Unreleased] first,
// then the releases, newest first, each dated (but the one internal/buildinfo
// is the development of, which says "unreleased"), their sections those of
// Keep a Changelog; a release the source declares has its dated entry, and
// the wire version of the goldens is named.
func TestChangelogShape(t *testing.T) {
	log := readChangelog(t)
	cur := mustVersion(t, buildinfo.Release)
	if len(log) == 0 || log[0].version != "Unreleased" || log[0].date != "" {
		t.Fatal("CHANGELOG.md's first release heading is not ## [Unreleased]")
	}
	var prev *version
	released := false
	for _, r := range log[1:] {
		v, err := parseVersion(r.version)
		if err != nil {
			t.Errorf("line %d: [%s]: %v", r.line, r.version, err)
			continue
		}
		switch {
		case dateRe.MatchString(r.date):
		case r.date == "unreleased":
			if cur.pre != "dev" || compare(v, version{major: cur.major, minor: cur.minor, patch: cur.patch}) != 0 {
				t.Errorf("line %d: [%s] says unreleased, but internal/buildinfo.Release is %s: only the release under development may", r.line, v, cur)
			}
		default:
			t.Errorf("line %d: [%s] - %q: want a date, YYYY-MM-DD", r.line, v, r.date)
		}
		if prev != nil && compare(v, *prev) >= 0 {
			t.Errorf("line %d: [%s] comes after [%s]: the newest release goes first", r.line, v, *prev)
		}
		prev = &v
		released = released || (compare(v, cur) == 0 && dateRe.MatchString(r.date))
	}
	if cur.pre != "dev" && !released {
		t.Errorf("internal/buildinfo.Release is %s, a release, but CHANGELOG.md has no ## [%s] - YYYY-MM-DD", cur, cur)
	}
	for _, r := range log {
		for _, s := range r.order {
			if !slices.Contains(sectionNames, s) {
				t.Errorf("line %d: [%s] has a section %q: the sections are %s", r.line, r.version, s, strings.Join(sectionNames, ", "))
			}
		}
	}
	wire := strings.TrimSpace(string(read(t, wireSource)))
	if !bytes.Contains(bytes.ToLower(read(t, changelog)), []byte("wire version "+wire)) {
		t.Errorf("CHANGELOG.md never names wire version %s, the version tests/wire's goldens record", wire)
	}
}

// copyModule makes a module at a temporary folder that holds go.mod, go.sum
// and a copy of the package at rel (its non-test Go files): a module with
// toolexec's path and requirements and that one package.
func copyModule(t *testing.T, rel string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"go.mod", "go.sum"} {
		if err := os.WriteFile(filepath.Join(dir, f), read(t, filepath.Join(root, f)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, dst := filepath.Join(root, filepath.FromSlash(rel)), filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s (%v)", src, err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), read(t, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestGoRuleOnACopy runs the Go check on a copy of package idemkey/canonical
// to which the test adds a function, Probe, then changes it: a change of an
// exported function's signature fails until CHANGELOG.md names it under
// Changed and the release is a minor version later (v0); an addition passes
// as it is.
func TestGoRuleOnACopy(t *testing.T) {
	apidiff := apidiffPath(t)
	const pkg = "idemkey/canonical"
	dir := copyModule(t, pkg)
	probe := filepath.Join(dir, filepath.FromSlash(pkg), "probe.go")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(probe, []byte("package canonical\n\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("// Probe is the test's.\nfunc Probe(s string) string { return s }\n")
	base := filepath.Join(t.TempDir(), "go.zip")
	writeGoBaseline(t, apidiff, dir, base)
	if got := baselinePackages(t, base); !slices.Equal(got, []string{pkg}) {
		t.Fatalf("the copy's baseline holds %q, want [%s]", got, pkg)
	}

	v010, v011, v020 := mustVersion(t, "0.1.0"), mustVersion(t, "0.1.1-dev"), mustVersion(t, "0.2.0-dev")
	changelogWith := func(section, text string) []logRelease {
		t.Helper()
		log, err := parseChangelog("# Changelog\n\n## [Unreleased]\n\n### " + section + "\n\n- " + text + "\n\n## [0.1.0] - 2026-12-01\n")
		if err != nil {
			t.Fatal(err)
		}
		return log
	}
	none := changelogWith("Added", "Nothing that matters here.")

	t.Run("addition", func(t *testing.T) {
		write("// Probe is the test's.\nfunc Probe(s string) string { return s }\n\n// Probe2 is new.\nfunc Probe2() {}\n")
		changes := goChanges(t, apidiff, dir, base)
		if len(changes) != 0 {
			t.Fatalf("an added function is incompatible? %v", changes)
		}
		if p := judge(changes, none, v010, v011); len(p) != 0 {
			t.Fatalf("an addition in a patch release fails: %v", p)
		}
	})

	t.Run("incompatible", func(t *testing.T) {
		write("// Probe is the test's.\nfunc Probe(s string, n int) string { return s }\n")
		changes := goChanges(t, apidiff, dir, base)
		if len(changes) != 1 || !strings.Contains(changes[0].what, "Probe") {
			t.Fatalf("apidiff found %v, want Probe's signature change", changes)
		}
		t.Logf("apidiff: %s", changes[0].what)
		cases := []struct {
			name     string
			log      []logRelease
			cur      version
			wantFail []string // what the failure says; none: it passes
		}{
			{"no entry, no bump", none, v011, []string{"canonical.Probe", "is not in CHANGELOG.md", "want 0.2.0-dev"}},
			{"entry, no bump", changelogWith("Changed", "`canonical.Probe` takes a count."), v011, []string{"want 0.2.0-dev"}},
			{"bump, no entry", none, v020, []string{"is not in CHANGELOG.md"}},
			{"entry under Added", changelogWith("Added", "`canonical.Probe` takes a count."), v020, []string{"is not in CHANGELOG.md"}},
			{"entry naming another name", changelogWith("Changed", "`canonical.Canonicalize` is faster."), v020, []string{"is not in CHANGELOG.md"}},
			{"entry and bump", changelogWith("Changed", "`canonical.Probe` takes a count."), v020, nil},
			{"the package named, and bump", changelogWith("Removed", "Parts of `idemkey/canonical`."), v020, nil},
			{"the import path named, and bump", changelogWith("Changed", "`github.com/tesserix/toolexec/idemkey/canonical.Probe()`"), v020, nil},
		}
		for _, c := range cases {
			problems := judge(changes, c.log, v010, c.cur)
			text := strings.Join(problems, "\n")
			switch {
			case len(c.wantFail) == 0 && len(problems) > 0:
				t.Errorf("%s: fails: %s", c.name, text)
			case len(c.wantFail) > 0 && len(problems) == 0:
				t.Errorf("%s: passes", c.name)
			}
			for _, w := range c.wantFail {
				if !strings.Contains(text, w) {
					t.Errorf("%s: the failure does not say %q:\n%s", c.name, w, text)
				}
			}
		}
	})
}

// TestPythonRule: a Python name removed from public_api.txt (here Client's
// call) fails until CHANGELOG.md names it (or its class or module) and the
// release is bumped; an added name passes.
func TestPythonRule(t *testing.T) {
	base := pythonLines(string(read(t, pythonSource)))
	i := slices.IndexFunc(base, func(l string) bool { return strings.HasPrefix(l, "toolexec.client.Client.call:") })
	if i < 0 {
		t.Fatal("python/tests/public_api.txt lists no toolexec.client.Client.call")
	}
	removed := slices.Delete(slices.Clone(base), i, i+1)
	added := append(slices.Clone(base), "toolexec.client.Client.probe: method(self) -> None")

	if c := pythonChanges(base, added); len(c) != 0 {
		t.Fatalf("an added name is incompatible? %v", c)
	}
	changes := pythonChanges(base, removed)
	if len(changes) != 1 || changes[0].names[0] != "toolexec.client.Client.call" {
		t.Fatalf("pythonChanges = %+v, want Client.call removed", changes)
	}
	v010, v020 := mustVersion(t, "0.1.0"), mustVersion(t, "0.2.0-dev")
	for _, c := range []struct {
		entry string
		cur   version
		pass  bool
	}{
		{"", v020, false},
		{"- `toolexec.client.Client.call` is gone.", mustVersion(t, "0.1.1-dev"), false},
		{"- `toolexec.client.Client.call` is gone.", v020, true},
		{"- `toolexec.client.Client` lost a method.", v020, true},
		{"- `toolexec.client.Client.call_async` is gone.", v020, false},
	} {
		log, err := parseChangelog("## [Unreleased]\n### Removed\n" + c.entry + "\n## [0.1.0] - 2026-12-01\n")
		if err != nil {
			t.Fatal(err)
		}
		if p := judge(changes, log, v010, c.cur); (len(p) == 0) != c.pass {
			t.Errorf("entry %q at %s: problems %v, want pass=%v", c.entry, c.cur, p, c.pass)
		}
	}
}

// TestWireRule: a new wire version fails until CHANGELOG.md names it under
// Changed and the release is bumped.
func TestWireRule(t *testing.T) {
	if wireChanges("2", "2") != nil {
		t.Fatal("the same wire version is a change")
	}
	changes := wireChanges("2", "3")
	v010, v020 := mustVersion(t, "0.1.0"), mustVersion(t, "0.2.0-dev")
	for _, c := range []struct {
		section, entry string
		cur            version
		pass           bool
	}{
		{"Changed", "Answers carry a new member.", v020, false},
		{"Changed", "Wire\n  version 3: answers carry a new member.", mustVersion(t, "0.1.5"), false},
		{"Added", "Wire version 3: answers carry a new member.", v020, false},
		{"Changed", "Wire\n  version 3: answers carry a new member.", v020, true},
	} {
		log, err := parseChangelog(fmt.Sprintf("## [Unreleased]\n### %s\n- %s\n## [0.1.0] - 2026-12-01\n", c.section, c.entry))
		if err != nil {
			t.Fatal(err)
		}
		if p := judge(changes, log, v010, c.cur); (len(p) == 0) != c.pass {
			t.Errorf("%s %q at %s: problems %v, want pass=%v", c.section, c.entry, c.cur, p, c.pass)
		}
	}
}

// TestKeyRule: the published vectors derive as they say; a vector whose key
// the code derives otherwise is a key derivation change, which needs a major
// version even while v0.
func TestKeyRule(t *testing.T) {
	data := read(t, keysSource)
	if c := keyChanges(t, data); len(c) != 0 {
		t.Fatalf("the published vectors do not derive as they say: %v", c)
	}
	changed := bytes.Replace(data, []byte("dcaca72c477ec402dd504f145eb9fa54d2964d52f26edc7cd656608baca21496"),
		[]byte("0000000000000000000000000000000000000000000000000000000000000000"), 1)
	changes := keyChanges(t, changed)
	if len(changes) != 1 || !changes[0].major {
		t.Fatalf("keyChanges = %+v, want one major change", changes)
	}
	log, err := parseChangelog("## [Unreleased]\n### Changed\n- The key derivation writes numbers otherwise.\n## [0.1.0] - 2026-12-01\n")
	if err != nil {
		t.Fatal(err)
	}
	v010 := mustVersion(t, "0.1.0")
	if p := judge(changes, log, v010, mustVersion(t, "0.2.0-dev")); len(p) != 1 || !strings.Contains(p[0], "want 1.0.0-dev") {
		t.Errorf("a minor bump passes a key derivation change: %v", p)
	}
	if p := judge(changes, log, v010, mustVersion(t, "1.0.0-dev")); len(p) != 0 {
		t.Errorf("a major bump with the entry fails: %v", p)
	}
}

func TestParseAPIDiff(t *testing.T) {
	out := "- ./kvstore/natsstore.(*Store).Claim: removed\n" +
		"- ./kvstore.Record.State: changed from string to State\n" +
		"- Version: value changed from \"0.1.0\" to \"0.2.0\"\n" + // the release: every one changes it
		"- (*Client).Call: changed from func() to func(int)\n" +
		"- package github.com/tesserix/toolexec/bus/embedded: removed\n" +
		"- ./events.Answer, method set of *Answer: removed Err\n"
	got := parseAPIDiff(out, []string{"", "kvstore", "kvstore/natsstore", "events", "bus/embedded"})
	want := [][]string{
		{"kvstore/natsstore.Store.Claim", "github.com/tesserix/toolexec/kvstore/natsstore.Store.Claim", "natsstore.Store.Claim"},
		{"kvstore.Record.State", "github.com/tesserix/toolexec/kvstore.Record.State"},
		{"toolexec.Client.Call", "github.com/tesserix/toolexec.Client.Call"},
		{"bus/embedded", "github.com/tesserix/toolexec/bus/embedded", "embedded"},
		{"events.Answer", "github.com/tesserix/toolexec/events.Answer"},
	}
	if len(got) != len(want) {
		t.Fatalf("parseAPIDiff = %+v", got)
	}
	for i := range want {
		if !slices.Equal(got[i].names, want[i]) {
			t.Errorf("%s: names %q, want %q", got[i].what, got[i].names, want[i])
		}
	}
}

func TestCompare(t *testing.T) {
	order := []string{"0.1.0-alpha.2", "0.1.0-alpha.10", "0.1.0-beta.1", "0.1.0-dev", "0.1.0-rc.1", "0.1.0",
		"0.1.1-dev", "0.2.0", "1.0.0-dev", "1.0.0"}
	for i := range order {
		for j := range order {
			if got := compare(mustVersion(t, order[i]), mustVersion(t, order[j])); got != sign(i-j) {
				t.Errorf("compare(%s, %s) = %d, want %d", order[i], order[j], got, sign(i-j))
			}
		}
	}
	for _, bad := range []string{"v0.1.0", "0.1", "01.2.3", "0.1.0-"} {
		if _, err := parseVersion(bad); err == nil {
			t.Errorf("parseVersion(%q) = nil error", bad)
		}
	}
}

func TestParseChangelog(t *testing.T) {
	log, err := parseChangelog("# Changelog\n\nIntro, with - a dash.\n\n## [Unreleased]\n\n" +
		"### Changed\n\n- One,\n  continued.\n\n  Still one.\n- Two.\nA paragraph.\n\n### Removed\n* Three.\n\n" +
		"## [0.1.0] - 2026-12-01\n\n### Added\n- Four.\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 2 || log[0].version != "Unreleased" || log[1].version != "0.1.0" || log[1].date != "2026-12-01" {
		t.Fatalf("parseChangelog = %+v", log)
	}
	changed := log[0].sections["Changed"]
	if len(changed) != 2 || changed[0].text != "One,\ncontinued.\n\nStill one." || changed[1].text != "Two." {
		t.Errorf("Changed = %+v", changed)
	}
	if r := log[0].sections["Removed"]; len(r) != 1 || r[0].text != "Three." {
		t.Errorf("Removed = %+v", r)
	}
	if got := counted(log, mustVersion(t, "0.1.0")); len(got) != 3 {
		t.Errorf("counted = %+v, want Unreleased's three", got)
	}
	if got := counted(log, mustVersion(t, "0.1.0-dev")); len(got) != 3 {
		t.Errorf("counted from 0.1.0-dev = %+v, want Unreleased's three and 0.1.0's none", got)
	}
	for _, bad := range []string{"## Unreleased\n", "### Added\n", "## [Unreleased]\n### Added\n### Added\n"} {
		if _, err := parseChangelog(bad); err == nil {
			t.Errorf("parseChangelog(%q) = nil error", bad)
		}
	}
}
