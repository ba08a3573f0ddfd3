package idemkey_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"

	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/idemkey/canonical"
	"github.com/tesserix/toolexec/internal/testkit/keyvectors"
)

// vectorFile and vector are the vectors files' shapes.
type (
	vectorFile = keyvectors.File
	vector     = keyvectors.Vector
)

// checkVector derives v's key both ways (Derive, and Parse then Key) and compares
// the result with what v expects.
func checkVector(t *testing.T, v vector) {
	t.Helper()
	if (v.Error == "") == (v.Key == "") {
		t.Fatalf("vector %q must have exactly one of key and error", v.Name)
	}
	key, err := idemkey.Derive(v.Tenant, v.RunID, v.Tool, []byte(v.ArgumentsJSON), v.KeyArguments)

	var key2 idemkey.Key
	args, err2 := idemkey.Parse([]byte(v.ArgumentsJSON))
	if err2 == nil {
		key2, err2 = args.Key(v.Tenant, v.RunID, v.Tool, v.KeyArguments)
	}
	if idemkey.Code(err) != idemkey.Code(err2) || key.Hex != key2.Hex || !bytes.Equal(key.Canonical, key2.Canonical) {
		t.Errorf("Derive = %v, %v; Parse+Key = %v, %v", key, err, key2, err2)
	}

	if v.Error != "" {
		if err == nil {
			t.Fatalf("Derive = %s (%s), want error %s", key.Hex, key.Canonical, v.Error)
		}
		if got := idemkey.Code(err); got != v.Error {
			t.Fatalf("Code(%v) = %q, want %q", err, got, v.Error)
		}
		if key.Hex != "" || key.Canonical != nil {
			t.Errorf("Derive returned %v with its error", key)
		}
		return
	}
	if err != nil {
		t.Fatalf("Derive error %v (code %s), want key %s", err, idemkey.Code(err), v.Key)
	}
	if string(key.Canonical) != v.Canonical {
		t.Errorf("canonical\n got %s\nwant %s", key.Canonical, v.Canonical)
	}
	if key.Hex != v.Key {
		t.Errorf("key %s, want %s", key.Hex, v.Key)
	}
	// The key is the SHA-256 of the canonical form, which is its own canonical form.
	sum := sha256.Sum256([]byte(v.Canonical))
	if hex.EncodeToString(sum[:]) != v.Key {
		t.Errorf("vector %q: key is not the SHA-256 of its canonical form", v.Name)
	}
	again, err := canonical.Canonicalize(key.Canonical)
	if err != nil || !bytes.Equal(again, key.Canonical) {
		t.Errorf("envelope is not canonical: %q, %v", again, err)
	}
}

// TestSharedVectors reproduces every vector of the contract's independently computed
// set (a byte-for-byte copy of shared/vectors/keys.json).
func TestSharedVectors(t *testing.T) {
	t.Parallel()
	f := keyvectors.Read(t, "testdata/keys.json")
	for _, v := range f.Vectors {
		t.Run(v.Name, func(t *testing.T) {
			t.Parallel()
			checkVector(t, v)
		})
	}
}

func TestCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{errors.New("other"), ""},
		{idemkey.ErrUnderivable, idemkey.CodeUnderivable},
		{idemkey.ErrNotObject, idemkey.CodeNotObject},
		{&canonical.Error{Code: canonical.CodeTooDeep}, canonical.CodeTooDeep},
	}
	for _, tt := range tests {
		if got := idemkey.Code(tt.err); got != tt.want {
			t.Errorf("Code(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
