package console

import (
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/app/tokenfile"
)

// ErrBadOperators is matched by the errors of [LoadOperators] and
// [ParseOperators].
var ErrBadOperators = errors.New("console: bad operators file")

// AdminScope is the scope field of an operator who sees every tenant.
const AdminScope = "admin"

// tenantsPrefix starts the scope field of an operator who sees some tenants.
const tenantsPrefix = "tenants="

// nameRE is what an operator's name may be: it is a field of the file, so it
// has no spaces.
var nameRE = regexp.MustCompile(`^[\p{L}\p{N}._@-]{1,64}$`)

// operatorRules are the operators file's: "<operator> sha256:<hex> <scope>",
// hashed tokens only.
var operatorRules = tokenfile.Rules{
	Err:  ErrBadOperators,
	Line: "<operator> sha256:<64 hex> admin|tenants=<tenant>[,<tenant>…]",
	CheckName: func(name string) error {
		if !nameRE.MatchString(name) {
			return fmt.Errorf("operator %q: want 1 to 64 letters, digits or ._@-", name)
		}
		return nil
	},
	MinFields: 1,
	MaxFields: 1,
}

// Identity is who a request comes from: an operator of the operators file,
// or whoever holds the shared console token.
type Identity struct {
	// Name is what the resolved audit events carry.
	Name string
	// Admin sees every tenant, and the view across them.
	Admin bool
	// Tenants are the tenants a non-admin operator sees.
	Tenants []string
	// Verified is false for the shared console token: Name is whatever was
	// typed at sign-in.
	Verified bool
}

// Sees reports whether id may see tenant's events and records.
func (id Identity) Sees(tenant string) bool { return id.Admin || slices.Contains(id.Tenants, tenant) }

// Operators are the console's operators, read from an operators file: one
// "<operator> sha256:<64 hex> <scope>" per line, the scope "admin" (every
// tenant, and the view across them) or "tenants=acme,globex". Only the
// tokens' SHA-256 digests are in the file, and in memory.
type Operators struct {
	file *tokenfile.File
	ids  map[int]Identity // by line
}

// LoadOperators reads the operators file at path; see [ParseOperators].
func LoadOperators(path string) (*Operators, error) {
	f, err := tokenfile.Load(path, operatorRules)
	if err != nil {
		return nil, err
	}
	return operatorsOf(f, path)
}

// ParseOperators reads an operators file called name. Blank lines and lines
// starting with # are skipped. A bad name, a token not written as
// "sha256:<64 hex>" (the file never holds a token itself), a token given
// twice, a scope neither "admin" nor "tenants=" and valid tenants, an
// operator named twice, or a file with nobody in it are errors naming the
// line; all match ErrBadOperators.
func ParseOperators(r io.Reader, name string) (*Operators, error) {
	f, err := tokenfile.Parse(r, name, operatorRules)
	if err != nil {
		return nil, err
	}
	return operatorsOf(f, name)
}

func operatorsOf(f *tokenfile.File, name string) (*Operators, error) {
	ops := &Operators{file: f, ids: map[int]Identity{}}
	names := map[string]int{}
	for _, e := range f.Entries() {
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%w: %w: %s:%d: %s", ErrBadOperators, tokenfile.ErrBadFile, name, e.Line, fmt.Sprintf(format, args...))
		}
		if first, dup := names[e.Name]; dup {
			return nil, fail("operator %s is on line %d already", e.Name, first)
		}
		names[e.Name] = e.Line
		id := Identity{Name: e.Name, Verified: true}
		scope := e.Fields[0]
		if scope == AdminScope {
			id.Admin = true
		} else if list, ok := strings.CutPrefix(scope, tenantsPrefix); ok {
			for t := range strings.SplitSeq(list, ",") {
				if err := events.CheckToken("tenant", t); err != nil {
					return nil, fail("%v", err)
				}
				id.Tenants = append(id.Tenants, t)
			}
		} else {
			return nil, fail("scope %q: want %q or %q and tenants, comma-separated", scope, AdminScope, tenantsPrefix)
		}
		ops.ids[e.Line] = id
	}
	return ops, nil
}

// Lookup returns the operator token signs in as, comparing its digest with
// every line's in constant time.
func (o *Operators) Lookup(token string) (Identity, bool) {
	e, ok := o.file.Lookup(token)
	if !ok {
		return Identity{}, false
	}
	return o.ids[e.Line], true
}

// OperatorLine returns the operators file's line for operator, who signs in
// with token: admin, or seeing tenants. It checks what it is given as the
// file's reader would.
func OperatorLine(operator, token string, admin bool, tenants []string) (string, error) {
	scope := AdminScope
	if !admin {
		if len(tenants) == 0 {
			return "", errors.New("console: an operator is an admin or sees some tenants")
		}
		scope = tenantsPrefix + strings.Join(tenants, ",")
	} else if len(tenants) > 0 {
		return "", errors.New("console: an admin sees every tenant: name no tenants")
	}
	line := operator + " " + tokenfile.Hash(token) + " " + scope
	if _, err := ParseOperators(strings.NewReader(line), "the line"); err != nil {
		return "", err
	}
	return line, nil
}
