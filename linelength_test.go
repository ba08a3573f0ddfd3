package toolexec_test

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// maxLineLength is the most characters (runes, a tab counting as one) a
// line of the module's non-test Go code may hold.
const maxLineLength = 140

// structTagLine matches a struct field whose line ends in its tag: Go cannot
// split a tag's literal, so such a line may be longer.
var structTagLine = regexp.MustCompile("^\\s*\\w+\\s+\\S+\\s+`[^`]*`$")

// TestLineLength fails naming each line of the module's non-test .go files
// (bench, python and node_modules aside) longer than maxLineLength
// characters, struct tags aside: wrap comments, and break long signatures,
// calls, literals and strings across lines as gofmt keeps them.
func TestLineLength(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch {
			case path == "bench", path == "python", d.Name() == "node_modules",
				path != "." && strings.HasPrefix(d.Name(), "."):
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			line := sc.Text()
			if l := utf8.RuneCountInString(line); l > maxLineLength && !structTagLine.MatchString(line) {
				t.Errorf("%s:%d is %d characters long, more than %d", path, n, l, maxLineLength)
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
