package mcpgate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/app/tokenfile"
)

// MinTokenLength is the shortest bearer token a tokens file may hold in
// plain text: shorter ones are guessable.
const MinTokenLength = 24

// ErrBadTokens is matched by the errors of ParseTokens and LoadTokens (and so
// is tokenfile.ErrBadFile).
var ErrBadTokens = errors.New("mcpgate: bad tokens file")

// Tokens maps bearer tokens to the tenants they act for. Only their SHA-256
// digests are kept.
type Tokens struct {
	file *tokenfile.File
}

// tokenRules are the tokens file's: "<tenant> <token>", the token hashed or
// long enough in plain text.
var tokenRules = tokenfile.Rules{
	Err:       ErrBadTokens,
	Line:      "<tenant> <token>",
	CheckName: func(tenant string) error { return events.CheckToken("tenant", tenant) },
	MinPlain:  MinTokenLength,
}

// HashToken returns how a tokens file may hold token without revealing it:
// "sha256:" and the hex of its SHA-256 digest (tokenfile.Hash).
func HashToken(token string) string { return tokenfile.Hash(token) }

// LoadTokens reads the tokens file at path; see ParseTokens.
func LoadTokens(path string) (*Tokens, error) {
	f, err := tokenfile.Load(path, tokenRules)
	if err != nil {
		return nil, err
	}
	return &Tokens{file: f}, nil
}

// ParseTokens reads a tokens file (the format of package tokenfile): one
// "<tenant> <token>" per line, where the token is written as HashToken gives
// it ("sha256:<64 hex>", recommended) or in plain text (at least
// MinTokenLength characters). Blank lines and lines starting with # are
// skipped. A bad tenant, a short or malformed token, a token given twice, or a
// file with no token are errors naming the line.
func ParseTokens(r io.Reader, name string) (*Tokens, error) {
	f, err := tokenfile.Parse(r, name, tokenRules)
	if err != nil {
		return nil, err
	}
	return &Tokens{file: f}, nil
}

// Tenant returns the tenant token acts for. It compares token's digest with
// every entry's, in constant time, and looks at all of them whatever matches,
// so that the time it takes says nothing about which entry is close.
func (t *Tokens) Tenant(token string) (tenant string, ok bool) {
	e, ok := t.file.Lookup(token)
	return e.Name, ok
}

// verify is the bearer-token check of the HTTP handler: the token's tenant
// becomes the session's user, so that a session is used by its tenant only.
func (t *Tokens) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	tenant, ok := t.Tenant(token)
	if !ok {
		return nil, fmt.Errorf("%w: unknown bearer token", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: tenant}, nil
}
