package docs_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestConsoleBlocks runs every ```console block of the pages: each command
// after a "$ " prompt, as written, in a folder whose bin/ holds the programs
// make build made; what it prints on standard output must be the lines the
// block shows under it, and it must exit 0. (Commands that need a running
// executor belong in a script.)
func TestConsoleBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds both programs")
	}
	bin := binaries(t)
	ran := 0
	for _, b := range allBlocks(t) {
		if b.Lang != "console" {
			continue
		}
		t.Run(b.ID, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Symlink(bin, filepath.Join(dir, "bin")); err != nil {
				t.Fatal(err)
			}
			cmds := b.commands()
			if len(cmds) == 0 {
				t.Fatalf("%s has no $ command", b)
			}
			for _, c := range cmds {
				cmd := exec.Command("bash", "-c", c.Text)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "HOME="+dir)
				var out, errOut bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errOut
				if err := cmd.Run(); err != nil {
					t.Errorf("$ %s: %v\n%s", c.Text, err, errOut.String())
					continue
				}
				if out.String() != c.Output {
					t.Errorf("$ %s\nprinted:\n%s\nthe block shows:\n%s", c.Text, out.String(), c.Output)
				}
				ran++
			}
		})
	}
	if ran == 0 && !t.Failed() {
		t.Fatal("no console block ran")
	}
}
