package mcpgate

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"

	"github.com/tesserix/toolexec/events"
)

// MinTokenLength is the shortest bearer token a tokens file may hold in
// plain text: shorter ones are guessable.
const MinTokenLength = 24

// hashedPrefix marks a token written as its SHA-256 digest.
const hashedPrefix = "sha256:"

// ErrBadTokens is matched by the errors of ParseTokens and LoadTokens.
var ErrBadTokens = errors.New("mcpgate: bad tokens file")

// Tokens maps bearer tokens to the tenants they act for. Only their SHA-256
// digests are kept.
type Tokens struct {
	entries []tokenEntry
}

type tokenEntry struct {
	sum    [sha256.Size]byte
	tenant string
}

// HashToken returns how a tokens file may hold token without revealing it:
// "sha256:" and the hex of its SHA-256 digest.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hashedPrefix + hex.EncodeToString(sum[:])
}

// LoadTokens reads the tokens file at path; see ParseTokens.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadTokens, err)
	}
	defer f.Close()
	return ParseTokens(f, path)
}

// ParseTokens reads a tokens file: one "<tenant> <token>" per line, where the
// token is written as HashToken gives it ("sha256:<64 hex>", recommended) or
// in plain text (at least MinTokenLength characters). Blank lines and lines
// starting with # are skipped. A bad tenant, a short or malformed token, a
// token given twice, or a file with no token are errors naming the line.
func ParseTokens(r io.Reader, name string) (*Tokens, error) {
	t := &Tokens{}
	seen := map[[sha256.Size]byte]int{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%w: %s:%d: want \"<tenant> <token>\"", ErrBadTokens, name, line)
		}
		tenant, token := fields[0], fields[1]
		if err := events.CheckToken("tenant", tenant); err != nil {
			return nil, fmt.Errorf("%w: %s:%d: %v", ErrBadTokens, name, line, err)
		}
		var e tokenEntry
		e.tenant = tenant
		if hexSum, ok := strings.CutPrefix(token, hashedPrefix); ok {
			b, err := hex.DecodeString(hexSum)
			if err != nil || len(b) != sha256.Size {
				return nil, fmt.Errorf("%w: %s:%d: a hashed token is %s and 64 hex digits", ErrBadTokens, name, line, hashedPrefix)
			}
			copy(e.sum[:], b)
		} else {
			if len(token) < MinTokenLength {
				return nil, fmt.Errorf("%w: %s:%d: the token is shorter than %d characters", ErrBadTokens, name, line, MinTokenLength)
			}
			e.sum = sha256.Sum256([]byte(token))
		}
		if first, dup := seen[e.sum]; dup {
			return nil, fmt.Errorf("%w: %s:%d: the same token as line %d", ErrBadTokens, name, line, first)
		}
		seen[e.sum] = line
		t.entries = append(t.entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadTokens, name, err)
	}
	if len(t.entries) == 0 {
		return nil, fmt.Errorf("%w: %s holds no token", ErrBadTokens, name)
	}
	return t, nil
}

// Tenant returns the tenant token acts for. It compares token's digest with
// every entry's, in constant time, and looks at all of them whatever matches,
// so that the time it takes says nothing about which entry is close.
func (t *Tokens) Tenant(token string) (tenant string, ok bool) {
	sum := sha256.Sum256([]byte(token))
	for _, e := range t.entries {
		if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
			tenant, ok = e.tenant, true
		}
	}
	return tenant, ok
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
