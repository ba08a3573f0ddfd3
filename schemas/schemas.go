package schemas

import (
	"embed"
	"io/fs"
	"path"
	"sort"
	"strings"
)

// BaseURI prefixes every embedded schema's path to form its $id: the schema for
// completed answers, events/completed.json, has the $id BaseURI+"events/completed.json".
const BaseURI = "https://tesserix.io/schemas/toolexec/"

// Directories of the embedded tree.
const (
	// EventsDir holds one JSON Schema per event type.
	EventsDir = "events"
	// VectorsDir holds the published key vectors.
	VectorsDir = "vectors"
)

// CallSchema is the name of the schema for a call's data (events/call.json).
const CallSchema = "call"

// files holds the whole published tree. The vectors directory is written by the
// key-derivation work; it is embedded as a directory so that every file it holds is
// published without this declaration changing.
//
//go:embed events/*.json vectors
var files embed.FS

// FS returns the embedded tree, rooted so that paths read "events/completed.json"
// and "vectors/keys.json". It is read-only and safe for concurrent use.
func FS() fs.FS { return files }

// EventSchemaPath returns the path within [FS] of the schema named name (for example
// "completed" or [CallSchema]). It does not check that the schema exists.
func EventSchemaPath(name string) string { return EventsDir + "/" + name + ".json" }

// EventSchemaID returns the $id of the schema named name.
func EventSchemaID(name string) string { return BaseURI + EventSchemaPath(name) }

// EventSchemaNames lists the embedded event schemas by name (the file name without
// ".json"), sorted: "call", "completed", "deduplicated", ...
func EventSchemaNames() []string {
	return names(EventsDir)
}

// EventSchema returns the bytes of the schema named name, or an error wrapping
// fs.ErrNotExist when there is none.
func EventSchema(name string) ([]byte, error) {
	return fs.ReadFile(files, EventSchemaPath(name))
}

// Vectors lists the paths within [FS] of the published key-vector files
// ("vectors/keys.json", ...), sorted. Files in the directory that do not end in
// ".json" are not vectors and are left out.
func Vectors() []string {
	ns := names(VectorsDir)
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = VectorsDir + "/" + n + ".json"
	}
	return out
}

// names returns the base names, without ".json", of the JSON files directly in dir.
func names(dir string) []string {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil // the directory is embedded, so this cannot happen
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || path.Ext(e.Name()) != ".json" {
			continue
		}
		out = append(out, strings.TrimSuffix(e.Name(), ".json"))
	}
	sort.Strings(out)
	return out
}
