package toolsfile_test

import (
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/tool/toolsfile"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic or hang, and its
// answer must keep its promises: declarations that all build (MCP tools naming
// declared servers, servers whose configuration is valid), or no file and an
// error made only of *toolsfile.Error values naming the file. The seed
// corpus is under testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(full))
	f.Add([]byte(mcpFile))
	f.Add([]byte(natsFile))
	env := envOf(map[string]string{"AIRLINE_URL": "http://127.0.0.1:8080", "AIRLINE_TOKEN": "t", "TOKEN": "t",
		"SERVER_JS": "/opt/s.js", "MEMORY_FILE": "/tmp/m.json"})
	f.Fuzz(func(t *testing.T, data []byte) {
		f, err := toolsfile.Parse(data, "fuzz.yaml", env)
		if err == nil {
			imports := false
			servers := map[string]bool{}
			for _, s := range f.Servers {
				imports = imports || s.Import != nil
				servers[s.Config.Name] = true
				if err := s.Config.Validate(); err != nil {
					t.Errorf("a server Parse accepted is refused: %v", err)
				}
			}
			if len(f.Tools)+len(f.MCPTools)+len(f.NATSTools) == 0 && !imports {
				t.Fatal("no error and no tools")
			}
			for _, d := range f.NATSTools {
				if d.File != "fuzz.yaml" {
					t.Errorf("declaration names file %q", d.File)
				}
				if _, err := d.Pending().Build(&nats.Conn{}); err != nil {
					t.Errorf("a nats declaration Parse accepted does not build: %v", err)
				}
			}
			for _, d := range f.Tools {
				if d.File != "fuzz.yaml" {
					t.Errorf("declaration names file %q", d.File)
				}
				if _, err := d.Build(); err != nil {
					t.Errorf("a declaration Parse accepted does not build: %v", err)
				}
			}
			for _, m := range f.MCPTools {
				if !servers[m.Server] || m.Tool == "" {
					t.Errorf("an MCP tool Parse accepted names server %q, tool %q", m.Server, m.Tool)
				}
			}
			return
		}
		if f != nil {
			t.Errorf("a file returned with an error")
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
