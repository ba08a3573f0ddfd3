// Package keyvectors reads the idempotency-key vectors (idemkey/testdata and
// the published schemas/vectors/keys.json) for the tests that derive them:
// the key derivation's own, the emitter's key command's, and the release
// check's.
package keyvectors

import (
	"encoding/json"
	"os"
	"testing"
)

// File is the shape of a vectors file.
type File struct {
	Spec    string   `json:"spec"`
	Vectors []Vector `json:"vectors"`
}

// Vector is one derivation and what it must give: exactly one of Key (with
// Canonical) and Error, an idemkey error code.
type Vector struct {
	Name          string   `json:"name"`
	Tenant        string   `json:"tenant"`
	RunID         string   `json:"run_id"`
	Tool          string   `json:"tool"`
	ArgumentsJSON string   `json:"arguments_json"`
	KeyArguments  []string `json:"key_arguments"`
	Canonical     string   `json:"canonical,omitempty"`
	Key           string   `json:"key,omitempty"`
	Error         string   `json:"error,omitempty"`
	Note          string   `json:"note,omitempty"`
}

// Read reads the vectors file at path, failing t if it cannot be read or
// parsed, or holds no vector.
func Read(t testing.TB, path string) File {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read vectors: %v", err)
	}
	return Parse(t, path, b)
}

// Parse parses data, a vectors file named what in failures, failing t if it
// is not one or holds no vector.
func Parse(t testing.TB, what string, data []byte) File {
	t.Helper()
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("parse %s: %v", what, err)
	}
	if len(f.Vectors) == 0 {
		t.Fatalf("%s holds no vectors", what)
	}
	return f
}
