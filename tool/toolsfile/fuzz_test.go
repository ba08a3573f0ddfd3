package toolsfile_test

import (
	"errors"
	"testing"

	"github.com/tesserix/toolexec/tool/toolsfile"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic or hang, and its
// answer must keep its promises: declarations that all build, or no declarations
// and an error made only of *toolsfile.Error values naming the file. The seed
// corpus is under testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	env := envOf(map[string]string{"AIRLINE_URL": "http://127.0.0.1:8080", "AIRLINE_TOKEN": "t", "TOKEN": "t"})
	f.Fuzz(func(t *testing.T, data []byte) {
		decls, err := toolsfile.Parse(data, "fuzz.yaml", env)
		if err == nil {
			if len(decls) == 0 {
				t.Fatal("no error and no declarations")
			}
			for _, d := range decls {
				if d.File != "fuzz.yaml" {
					t.Errorf("declaration names file %q", d.File)
				}
				if _, err := d.Build(); err != nil {
					t.Errorf("a declaration Parse accepted does not build: %v", err)
				}
			}
			return
		}
		if decls != nil {
			t.Errorf("declarations returned with an error")
		}
		if !errors.Is(err, toolsfile.ErrInvalid) {
			t.Errorf("error does not match ErrInvalid: %v", err)
		}
		for _, e := range unjoin(err) {
			var fe *toolsfile.Error
			if !errors.As(e, &fe) || fe.File != "fuzz.yaml" {
				t.Errorf("error %v (%T) is not a *toolsfile.Error naming the file", e, e)
			}
		}
	})
}
