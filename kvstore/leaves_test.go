package kvstore_test

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// TestBackendsAreLeaves: a store backend imports, of this module, only the
// contract (package kvstore). Whatever else it needs comes from its driver
// or the standard library, so that a store can be read, and lifted into
// another program, on its own.
func TestBackendsAreLeaves(t *testing.T) {
	const module = "github.com/tesserix/toolexec"
	for _, dir := range []string{"memstore", "natsstore", "pgstore", "redisstore"} {
		pkg, err := build.ImportDir(filepath.Join(".", dir), 0)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, module+"/") && imp != module+"/kvstore" {
				t.Errorf("kvstore/%s imports %s: a backend imports only the contract and its driver", dir, imp)
			}
		}
	}
}
