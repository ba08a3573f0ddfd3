package nodetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// MemoryServer is @modelcontextprotocol/server-memory as a stdio command for a
// test to spawn: a knowledge graph whose tools (create_entities and others)
// write it to File, a JSON Lines file, on every change.
//
// Note for tests that count effects: server-memory skips entities and
// relations whose names it already holds, so the file alone cannot show that a
// call ran twice; the second create_entities of one name answers with an
// empty list of entities.
type MemoryServer struct {
	// Argv runs the server: the machine's node and the package's entry point.
	Argv []string
	// Env holds the variables the server needs besides the usual environment
	// (MEMORY_FILE_PATH=File), as NAME=value.
	Env []string
	// File is where the server keeps its graph, in a directory of the test's
	// own; it does not exist until the first change.
	File string
}

// Memory returns server-memory with its graph in a new temporary directory,
// after checking that node and the package at its pinned version are there;
// see the package documentation for what happens when one is not.
func Memory(t testing.TB) *MemoryServer {
	t.Helper()
	node := Node(t)
	entry := filepath.Join(Package(t, MemoryPackage), "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		missing(t, fixHarness, "%s has no dist/index.js (%v)", MemoryPackage, err)
	}
	file := filepath.Join(t.TempDir(), "memory.jsonl")
	return &MemoryServer{
		Argv: []string{node, entry},
		Env:  []string{"MEMORY_FILE_PATH=" + file},
		File: file,
	}
}

// Command returns the server as a command with this process's environment
// plus Env, killed when ctx ends.
func (m *MemoryServer) Command(ctx context.Context) *exec.Cmd {
	cmd := exec.CommandContext(ctx, m.Argv[0], m.Argv[1:]...)
	cmd.Env = append(os.Environ(), m.Env...)
	cmd.WaitDelay = waitDelay
	return cmd
}

// Entity is one entity of the graph as server-memory stores it.
type Entity struct {
	Name         string   `json:"name"`
	EntityType   string   `json:"entityType"`
	Observations []string `json:"observations"`
}

// Entities reads the entities File holds, in file order; none when the file
// does not exist yet.
func (m *MemoryServer) Entities() ([]Entity, error) {
	b, err := os.ReadFile(m.File)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entity
	for i, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var item struct {
			Type string `json:"type"`
			Entity
		}
		if err := json.Unmarshal([]byte(line), &item); err != nil {
			return nil, fmt.Errorf("nodetest: %s line %d: %w", m.File, i+1, err)
		}
		if item.Type == "entity" {
			out = append(out, item.Entity)
		}
	}
	return out, nil
}
