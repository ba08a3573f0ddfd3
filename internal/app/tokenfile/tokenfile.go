// Package tokenfile reads the files that map secret tokens to who holds them:
// one "<name> <token> [field …]" per line, the token written as its SHA-256
// digest ("sha256:" and 64 hex digits) or, where the caller allows it, in
// plain text. The MCP gateway's tokens file (token → tenant) and the
// console's operators file (token → operator) are both this format; each
// checks its names and its further fields itself.
//
// Only digests are kept in memory, and [File.Lookup] compares a token's
// digest with every entry's in constant time, looking at all of them
// whatever matches.
package tokenfile

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// HashedPrefix marks a token written as its SHA-256 digest.
const HashedPrefix = "sha256:"

// ErrBadFile is matched by every error of [Parse] and [Load].
var ErrBadFile = errors.New("tokenfile: bad token file")

// Hash returns how a token file holds token without revealing it: "sha256:"
// and the hex of its SHA-256 digest.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return HashedPrefix + hex.EncodeToString(sum[:])
}

// Rules are what a kind of token file accepts.
type Rules struct {
	// Err is matched by the errors too (besides ErrBadFile), and its text
	// starts them; nil: ErrBadFile's.
	Err error
	// Line is the form of a line, for the message about a malformed one, e.g.
	// "<tenant> <token>".
	Line string
	// CheckName checks a line's first field; nil accepts any.
	CheckName func(name string) error
	// MinPlain is the shortest token the file may hold in plain text; 0
	// refuses plain tokens: every token must be hashed.
	MinPlain int
	// MinFields and MaxFields bound how many fields a line has after its
	// token.
	MinFields, MaxFields int
}

// Entry is one line of a token file.
type Entry struct {
	// Name is the line's first field.
	Name string
	// Fields are the fields after the token, if any.
	Fields []string
	// Line is the entry's line number, from 1.
	Line int

	sum [sha256.Size]byte
}

// File is a parsed token file.
type File struct {
	entries []Entry
}

// Load reads the token file at path; see [Parse].
func Load(path string, rules Rules) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, rules.fail("%v", err)
	}
	defer f.Close()
	return Parse(f, path, rules)
}

// Parse reads a token file called name: one entry per line, blank lines and
// lines starting with # skipped. A name CheckName refuses, a token neither a
// well-formed digest nor (where allowed) a long enough plain token, too few or
// too many fields, a token given twice (plain or hashed), or a file with no
// entry are errors naming the file and line.
func Parse(r io.Reader, name string, rules Rules) (*File, error) {
	f := &File{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if n := len(fields) - 2; n < rules.MinFields || n > rules.MaxFields {
			return nil, rules.fail("%s:%d: want %q", name, line, rules.Line)
		}
		e := Entry{Name: fields[0], Fields: fields[2:], Line: line}
		if rules.CheckName != nil {
			if err := rules.CheckName(e.Name); err != nil {
				return nil, rules.fail("%s:%d: %v", name, line, err)
			}
		}
		sum, err := rules.digest(fields[1])
		if err != nil {
			return nil, rules.fail("%s:%d: %v", name, line, err)
		}
		e.sum = sum
		if first, dup := seen[sum]; dup {
			return nil, rules.fail("%s:%d: the same token as line %d", name, line, first)
		}
		seen[sum] = line
		f.entries = append(f.entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, rules.fail("%s: %v", name, err)
	}
	if len(f.entries) == 0 {
		return nil, rules.fail("%s holds no token", name)
	}
	return f, nil
}

// digest returns the SHA-256 digest a file's token field stands for.
func (rules Rules) digest(token string) (sum [sha256.Size]byte, err error) {
	if hexSum, ok := strings.CutPrefix(token, HashedPrefix); ok {
		b, err := hex.DecodeString(hexSum)
		if err != nil || len(b) != sha256.Size {
			return sum, fmt.Errorf("a hashed token is %s and 64 hex digits", HashedPrefix)
		}
		copy(sum[:], b)
		return sum, nil
	}
	switch {
	case rules.MinPlain <= 0:
		return sum, fmt.Errorf("the token must be written hashed, as %s<64 hex digits>", HashedPrefix)
	case len(token) < rules.MinPlain:
		return sum, fmt.Errorf("the token is shorter than %d characters", rules.MinPlain)
	}
	return sha256.Sum256([]byte(token)), nil
}

// Lookup returns the entry whose token is token. It compares token's digest
// with every entry's, in constant time, and looks at all of them whatever
// matches, so that the time it takes says nothing about which entry is close.
func (f *File) Lookup(token string) (Entry, bool) {
	sum := sha256.Sum256([]byte(token))
	var found Entry
	ok := false
	for _, e := range f.entries {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
			found, ok = e, true
		}
	}
	return found, ok
}

// Entries returns the file's entries, in file order.
func (f *File) Entries() []Entry { return append([]Entry(nil), f.entries...) }

// fileError is a token file's error: it matches ErrBadFile and the rules' Err.
type fileError struct {
	base error
	msg  string
}

func (e *fileError) Error() string   { return e.base.Error() + ": " + e.msg }
func (e *fileError) Unwrap() []error { return []error{ErrBadFile, e.base} }

func (rules Rules) fail(format string, args ...any) error {
	base := rules.Err
	if base == nil {
		base = ErrBadFile
	}
	return &fileError{base: base, msg: fmt.Sprintf(format, args...)}
}
