package tokenfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/internal/app/tokenfile"
)

var errMine = errors.New("mine: bad file")

// rules: a name without digits, one or two fields after the token, plain
// tokens of 24 characters or more.
var rules = tokenfile.Rules{
	Err:  errMine,
	Line: "<name> <token> <field> [<field>]",
	CheckName: func(n string) error {
		if strings.ContainsAny(n, "0123456789") {
			return errors.New("a name has no digits")
		}
		return nil
	},
	MinPlain:  24,
	MinFields: 1,
	MaxFields: 2,
}

const long = "0123456789abcdef0123456789"

// TestParse: the format's rules, each broken once.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, file, err string
	}{
		{"plain and hashed, comments, blanks", "# who\n\nalice " + long + " x\n  bob " + tokenfile.Hash("b") + " x y  \n", ""},
		{"a bad name", "al1ce " + long + " x\n", ":1: a name has no digits"},
		{"too few fields", "alice " + long + "\n", `:1: want "<name>`},
		{"too many fields", "alice " + long + " x y z\n", `:1: want "<name>`},
		{"a short plain token", "# c\nalice short x\n", ":2: the token is shorter than 24"},
		{"a malformed digest", "alice sha256:abcd x\n", ":1: a hashed token is sha256: and 64 hex"},
		{"a token given twice", "alice " + long + " x\nbob " + tokenfile.Hash(long) + " x\n", ":2: the same token as line 1"},
		{"no token", "# nobody\n\n", "holds no token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := tokenfile.Parse(strings.NewReader(tc.file), "ops", rules)
			if tc.err == "" {
				if err != nil || len(f.Entries()) == 0 {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), "mine: bad file: ops") {
				t.Fatalf("Parse: %v, want an error with %q", err, tc.err)
			}
			if !errors.Is(err, tokenfile.ErrBadFile) || !errors.Is(err, errMine) {
				t.Errorf("%v matches neither ErrBadFile nor the rules' Err", err)
			}
		})
	}
}

// TestHashedOnly: with MinPlain 0 a plain token, however long, is refused.
func TestHashedOnly(t *testing.T) {
	r := rules
	r.MinPlain = 0
	if _, err := tokenfile.Parse(strings.NewReader("alice "+long+long+" x\n"), "ops", r); err == nil || !strings.Contains(err.Error(), "must be written hashed") {
		t.Fatalf("a plain token in a hashed-only file: %v", err)
	}
	if _, err := tokenfile.Parse(strings.NewReader("alice "+tokenfile.Hash(long)+" x\n"), "ops", r); err != nil {
		t.Fatal(err)
	}
}

// TestLookup: a token finds its own line, by its plain or hashed form in the
// file; the digest itself, another token or an empty one finds nothing.
func TestLookup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ops")
	if err := os.WriteFile(path, []byte("alice "+long+" admin\nbob "+tokenfile.Hash("bob-token")+" tenants=acme extra\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := tokenfile.Load(path, rules)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := f.Lookup(long); !ok || e.Name != "alice" || e.Line != 1 || len(e.Fields) != 1 || e.Fields[0] != "admin" {
		t.Errorf("Lookup(alice's) = %+v, %v", e, ok)
	}
	if e, ok := f.Lookup("bob-token"); !ok || e.Name != "bob" || strings.Join(e.Fields, ",") != "tenants=acme,extra" {
		t.Errorf("Lookup(bob's) = %+v, %v", e, ok)
	}
	for _, tok := range []string{tokenfile.Hash("bob-token"), "bob-token ", "", "nobody's"} {
		if e, ok := f.Lookup(tok); ok {
			t.Errorf("Lookup(%q) found %+v", tok, e)
		}
	}
	if _, err := tokenfile.Load(filepath.Join(t.TempDir(), "missing"), rules); !errors.Is(err, errMine) {
		t.Errorf("Load of a missing file: %v", err)
	}
}
