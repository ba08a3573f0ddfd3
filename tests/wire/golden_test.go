package wire_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/nats-io/nats.go"
)

var update = flag.Bool("update", false,
	"write the goldens in testdata/golden anew: refused unless docs/PROTOCOL.md states a wire version other than "+
		"testdata/golden/WIRE_VERSION and CHANGELOG.md names it")

const (
	goldenDir   = "testdata/golden"
	versionFile = "WIRE_VERSION"
	readmeFile  = "README.md"
	protocolDoc = "../../docs/PROTOCOL.md"
	changelog   = "../../CHANGELOG.md"
)

// rule is what every failure of a golden says: when the goldens may change,
// and how.
const rule = `The goldens record wire version %s; they may change only with a new wire version:
state it at the top of docs/PROTOCOL.md (§11 says what changed and why), add a CHANGELOG.md
entry that names it ("wire version N"), then run: go test ./tests/wire -update
A change that keeps the wire (a new encoder, a refactoring) must produce the goldens as they are.`

// used holds the goldens the tests read or wrote, by their slash path under
// goldenDir, so that TestMain can find the stray ones.
var used sync.Map

// TestMain refuses -update unless the wire version changed, records the new
// version once every test wrote its goldens, and, on a full run, fails on a
// golden no test reads (or, with -update, removes it).
func TestMain(m *testing.M) {
	flag.Parse()
	var docVersion string
	if *update {
		v, err := mayUpdate()
		if err != nil {
			fmt.Fprintf(os.Stderr, "tests/wire: -update refused: %v\n", err)
			os.Exit(2)
		}
		docVersion = v
	}
	code := m.Run()
	if code != 0 || flag.Lookup("test.run").Value.String() != "" || flag.Lookup("test.skip").Value.String() != "" {
		os.Exit(code) // a partial run reads only some goldens
	}
	stray, err := strayGoldens()
	if err != nil {
		fmt.Fprintf(os.Stderr, "tests/wire: %v\n", err)
		os.Exit(1)
	}
	if *update {
		for _, name := range stray {
			if err := os.Remove(filepath.Join(goldenDir, filepath.FromSlash(name))); err != nil {
				fmt.Fprintf(os.Stderr, "tests/wire: %v\n", err)
				os.Exit(1)
			}
			fmt.Fprintf(os.Stderr, "tests/wire: removed %s, which no test writes any more\n", name)
		}
		if err := os.WriteFile(filepath.Join(goldenDir, versionFile), []byte(docVersion+"\n"), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "tests/wire: %v\n", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "tests/wire: the goldens now record wire version %s\n", docVersion)
	} else if len(stray) > 0 {
		fmt.Fprintf(os.Stderr, "tests/wire: no test reads these goldens: %s\n(a golden that is no longer produced is a change of the wire)\n%s\n",
			strings.Join(stray, ", "), ruleText())
		code = 1
	}
	os.Exit(code)
}

// strayGoldens lists the files under goldenDir that no test used, but for
// the version file and the README.
func strayGoldens() ([]string, error) {
	var stray []string
	err := filepath.WalkDir(goldenDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(goldenDir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if _, ok := used.Load(rel); !ok && rel != versionFile && rel != readmeFile {
			stray = append(stray, rel)
		}
		return nil
	})
	return stray, err
}

// wireVersionRe finds the version docs/PROTOCOL.md states: "This page
// describes **wire version 2**."
var wireVersionRe = regexp.MustCompile(`describes \*\*wire version ([0-9A-Za-z.+-]+)\*\*`)

// protocolVersion returns the wire version docs/PROTOCOL.md states.
func protocolVersion() (string, error) {
	b, err := os.ReadFile(protocolDoc)
	if err != nil {
		return "", err
	}
	m := wireVersionRe.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s states no wire version (want a line like %q)", protocolDoc, "This page describes **wire version 2**.")
	}
	return string(m[1]), nil
}

// recordedVersion returns the wire version the goldens record.
func recordedVersion() (string, error) {
	b, err := os.ReadFile(filepath.Join(goldenDir, versionFile))
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// ruleText returns rule with the recorded version filled in.
func ruleText() string {
	v, err := recordedVersion()
	if err != nil {
		v = "(unknown: " + err.Error() + ")"
	}
	return fmt.Sprintf(rule, v)
}

// mayUpdate returns the wire version docs/PROTOCOL.md states when the goldens
// may be written for it: there are none yet, or it is not the version they
// record and CHANGELOG.md names it.
func mayUpdate() (string, error) {
	doc, err := protocolVersion()
	if err != nil {
		return "", err
	}
	rec, err := recordedVersion()
	if errors.Is(err, fs.ErrNotExist) {
		return doc, nil // the first goldens
	}
	if err != nil {
		return "", err
	}
	if doc == rec {
		return "", fmt.Errorf("docs/PROTOCOL.md still states wire version %s, the version the goldens record.\n%s", doc, ruleText())
	}
	cl, err := os.ReadFile(changelog)
	if err != nil {
		return "", fmt.Errorf("CHANGELOG.md: %w: the goldens of wire version %s need an entry that names it.\n%s", err, doc, ruleText())
	}
	if !bytes.Contains(bytes.ToLower(cl), []byte("wire version "+strings.ToLower(doc))) {
		return "", fmt.Errorf("CHANGELOG.md does not name wire version %s: add the entry that says what changed first.\n%s", doc, ruleText())
	}
	return doc, nil
}

// TestWireVersion holds the goldens to the wire version docs/PROTOCOL.md
// states: a page that states another describes a wire the goldens do not.
func TestWireVersion(t *testing.T) {
	doc, err := protocolVersion()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		return // TestMain records the version once the goldens are written
	}
	rec, err := recordedVersion()
	if err != nil {
		t.Fatalf("the goldens record no wire version: %v", err)
	}
	if doc != rec {
		t.Fatalf("docs/PROTOCOL.md states wire version %s, but the goldens record version %s: write the goldens of version %s "+
			"(and the CHANGELOG.md entry that names it) with go test ./tests/wire -update.\n%s", doc, rec, doc, ruleText())
	}
}

// readGolden returns the golden called name (a slash path under goldenDir).
func readGolden(t *testing.T, name string) []byte {
	t.Helper()
	used.Store(name, true)
	b, err := os.ReadFile(filepath.Join(goldenDir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatalf("golden %s: %v\n%s", name, err, ruleText())
	}
	return b
}

// writeGolden writes the golden called name, for -update.
func writeGolden(t *testing.T, name string, b []byte) {
	t.Helper()
	used.Store(name, true)
	path := filepath.Join(goldenDir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// checkBytes holds got to the golden called name byte for byte (with
// -update, writes it). A difference is described by describe, given the
// golden and got.
func checkBytes(t *testing.T, name string, got []byte, describe func(want, got []byte) []string) {
	t.Helper()
	if *update {
		writeGolden(t, name, got)
		return
	}
	want := readGolden(t, name)
	if bytes.Equal(want, got) {
		return
	}
	changes := describe(want, got)
	if len(changes) == 0 {
		changes = []string{firstDifference(want, got)}
	}
	t.Errorf("the code no longer writes golden %s:\n  %s\n%s", name, strings.Join(changes, "\n  "), ruleText())
}

// checkJSON holds got, a JSON document, to the golden called name as parsed
// JSON: member order and spacing do not count (with -update, writes it
// indented).
func checkJSON(t *testing.T, name string, got []byte) {
	t.Helper()
	if *update {
		b, err := indent(got)
		if err != nil {
			t.Fatalf("golden %s: %v", name, err)
		}
		writeGolden(t, name, b)
		return
	}
	want := readGolden(t, name)
	if changes := jsonChanges(want, got); len(changes) > 0 {
		t.Errorf("the code no longer writes golden %s:\n  %s\n%s", name, strings.Join(changes, "\n  "), ruleText())
	}
}

// indent writes the JSON document b indented, its members in their order,
// each string with no escape it does not need (encoding/json writes > as
// \u003e), and a newline at the end.
func indent(b []byte) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	var buf bytes.Buffer
	enc := jsontext.NewEncoder(&buf, jsontext.WithIndent("  "))
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return buf.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		if err := enc.WriteToken(tok); err != nil {
			return nil, err
		}
	}
}

// marshalJSON encodes v with encoding/json, failing the test on error.
func marshalJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeJSON reads a JSON document, its numbers as json.Number.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

// jsonChanges describes how the JSON document got differs from want, member
// by member; nil when they are equal as parsed JSON.
func jsonChanges(want, got []byte) []string {
	w, err := decodeJSON(want)
	if err != nil {
		return []string{fmt.Sprintf("the golden is not JSON (%v)", err)}
	}
	g, err := decodeJSON(got)
	if err != nil {
		return []string{fmt.Sprintf("the code wrote something that is not JSON (%v): %q", err, short(got))}
	}
	var out []string
	diffValues("", w, g, &out)
	return out
}

// diffValues appends to out what changed from want to got at path.
func diffValues(path string, want, got any, out *[]string) {
	at := path
	if at == "" {
		at = "(the document)"
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: was %s, is now %s", at, show(want), show(got)))
			return
		}
		names := make([]string, 0, len(w)+len(g))
		for k := range w {
			names = append(names, k)
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				names = append(names, k)
			}
		}
		slices.Sort(names)
		for _, k := range names {
			p := path + "." + k
			if path == "" {
				p = k
			}
			wv, inW := w[k]
			gv, inG := g[k]
			switch {
			case !inG:
				*out = append(*out, fmt.Sprintf("%s: removed (was %s)", p, show(wv)))
			case !inW:
				*out = append(*out, fmt.Sprintf("%s: added (%s)", p, show(gv)))
			default:
				diffValues(p, wv, gv, out)
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: was %s, is now %s", at, show(want), show(got)))
			return
		}
		for i := range max(len(w), len(g)) {
			p := fmt.Sprintf("%s[%d]", path, i)
			switch {
			case i >= len(g):
				*out = append(*out, fmt.Sprintf("%s: removed (was %s)", p, show(w[i])))
			case i >= len(w):
				*out = append(*out, fmt.Sprintf("%s: added (%s)", p, show(g[i])))
			default:
				diffValues(p, w[i], g[i], out)
			}
		}
	default:
		if want != got {
			*out = append(*out, fmt.Sprintf("%s: was %s, is now %s", at, show(want), show(got)))
		}
	}
}

// show writes a JSON value for a failure message, cut short.
func show(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return short(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// short cuts b for a failure message.
func short(b []byte) string {
	const n = 160
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "…"
}

// firstDifference says where two byte strings part.
func firstDifference(want, got []byte) string {
	i := 0
	for i < len(want) && i < len(got) && want[i] == got[i] {
		i++
	}
	from := max(i-40, 0)
	return fmt.Sprintf("the bytes differ from offset %d: the golden has %q, the code wrote %q",
		i, short(want[from:min(len(want), i+80)]), short(got[from:min(len(got), i+80)]))
}

// A golden message is a NATS message written as text: its subject on the
// first line, then one line "Name: value" for each header value, sorted by
// name, an empty line, and the payload exactly, followed by one newline that
// is not part of it.

// formatMsg writes m as a golden message.
func formatMsg(m *nats.Msg) []byte {
	var b bytes.Buffer
	b.WriteString(m.Subject)
	b.WriteByte('\n')
	names := make([]string, 0, len(m.Header))
	for k := range m.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range m.Header[k] {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	b.WriteByte('\n')
	b.Write(m.Data)
	b.WriteByte('\n')
	return b.Bytes()
}

// parseMsg reads a golden message.
func parseMsg(b []byte) (*nats.Msg, error) {
	head, data, ok := bytes.Cut(b, []byte("\n\n"))
	if !ok || len(data) == 0 || data[len(data)-1] != '\n' {
		return nil, errors.New("not a golden message: want a subject line, header lines, an empty line and the payload with a newline")
	}
	lines := strings.Split(string(head), "\n")
	m := &nats.Msg{Subject: lines[0], Header: nats.Header{}, Data: data[:len(data)-1]}
	for _, line := range lines[1:] {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			return nil, fmt.Errorf("header line %q is not \"Name: value\"", line)
		}
		m.Header[k] = append(m.Header[k], v)
	}
	if len(m.Data) == 0 {
		m.Data = nil
	}
	return m, nil
}

// readMsg reads the golden message called name.
func readMsg(t *testing.T, name string) *nats.Msg {
	t.Helper()
	m, err := parseMsg(readGolden(t, name))
	if err != nil {
		t.Fatalf("golden %s: %v", name, err)
	}
	return m
}

// checkMsg holds m to the golden message called name, byte for byte.
func checkMsg(t *testing.T, name string, m *nats.Msg) {
	t.Helper()
	checkBytes(t, name, formatMsg(m), msgChanges)
}

// msgChanges describes how the golden message got differs from want: its
// subject, each header, and its payload (member by member when it is JSON).
func msgChanges(want, got []byte) []string {
	w, err := parseMsg(want)
	if err != nil {
		return []string{"the golden: " + err.Error()}
	}
	g, err := parseMsg(got)
	if err != nil {
		return []string{"the code's message: " + err.Error()}
	}
	var out []string
	if w.Subject != g.Subject {
		out = append(out, fmt.Sprintf("subject: was %s, is now %s", w.Subject, g.Subject))
	}
	names := make([]string, 0, len(w.Header)+len(g.Header))
	for k := range w.Header {
		names = append(names, k)
	}
	for k := range g.Header {
		if _, ok := w.Header[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names {
		wv, inW := w.Header[k]
		gv, inG := g.Header[k]
		switch {
		case !inG:
			out = append(out, fmt.Sprintf("header %s: removed (was %q)", k, wv))
		case !inW:
			out = append(out, fmt.Sprintf("header %s: added (%q)", k, gv))
		case !slices.Equal(wv, gv):
			out = append(out, fmt.Sprintf("header %s: was %q, is now %q", k, wv, gv))
		}
	}
	if !bytes.Equal(w.Data, g.Data) {
		changes := jsonChanges(w.Data, g.Data)
		for _, c := range changes {
			out = append(out, "payload: "+c)
		}
		if len(changes) == 0 {
			out = append(out, "payload: the same JSON, written differently (member order or spacing): "+firstDifference(w.Data, g.Data))
		}
	}
	return out
}
