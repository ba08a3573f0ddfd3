package schemas_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"path"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tesserix/toolexec/schemas"
)

// wantSchemas is every event whose data has a published schema.
var wantSchemas = []string{"call", "completed", "deduplicated", "failed", "indeterminate", "rejected", "resolved"}

func TestEventSchemaNames(t *testing.T) {
	if got := schemas.EventSchemaNames(); !slices.Equal(got, wantSchemas) {
		t.Fatalf("EventSchemaNames() = %v, want %v", got, wantSchemas)
	}
}

func TestFSIsWellBehaved(t *testing.T) {
	want := make([]string, 0, len(wantSchemas))
	for _, n := range wantSchemas {
		want = append(want, schemas.EventSchemaPath(n))
	}
	want = append(want, schemas.Vectors()...)
	if err := fstest.TestFS(schemas.FS(), want...); err != nil {
		t.Fatal(err)
	}
}

func TestEventSchemaMissing(t *testing.T) {
	if _, err := schemas.EventSchema("no-such-kind"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("EventSchema(unknown) error = %v, want fs.ErrNotExist", err)
	}
}

// schemaDoc is the part of a schema file every published schema must have.
type schemaDoc struct {
	Schema      string            `json:"$schema"`
	ID          string            `json:"$id"`
	Title       string            `json:"title"`
	Description string            `json:"description"`
	Type        string            `json:"type"`
	Required    []string          `json:"required"`
	Properties  map[string]any    `json:"properties"`
	AddProps    *bool             `json:"additionalProperties"`
	Examples    []json.RawMessage `json:"examples"`
}

func TestEventSchemasAreComplete(t *testing.T) {
	for _, name := range schemas.EventSchemaNames() {
		t.Run(name, func(t *testing.T) {
			doc := readDoc(t, name)
			if doc.Schema != "https://json-schema.org/draft/2020-12/schema" {
				t.Errorf("$schema = %q, want draft 2020-12", doc.Schema)
			}
			if want := schemas.EventSchemaID(name); doc.ID != want {
				t.Errorf("$id = %q, want %q", doc.ID, want)
			}
			if doc.Title == "" || doc.Description == "" {
				t.Errorf("title %q / description %q: both must be set", doc.Title, doc.Description)
			}
			if doc.Type != "object" {
				t.Errorf("type = %q, want object", doc.Type)
			}
			if len(doc.Required) == 0 {
				t.Error("no required properties")
			}
			for _, r := range doc.Required {
				if _, ok := doc.Properties[r]; !ok {
					t.Errorf("required %q is not among the properties", r)
				}
			}
			if doc.AddProps == nil || *doc.AddProps {
				t.Error("additionalProperties must be false")
			}
			for p, v := range doc.Properties {
				if m, ok := v.(map[string]any); !ok || m["description"] == "" || m["description"] == nil {
					t.Errorf("property %q has no description", p)
				}
			}
			if len(doc.Examples) == 0 {
				t.Error("no examples")
			}
		})
	}
}

// TestEventSchemasCompileAndAcceptTheirExamples compiles every schema with the
// validator the executor uses and checks each schema's own examples against it.
func TestEventSchemasCompileAndAcceptTheirExamples(t *testing.T) {
	c := jsonschema.NewCompiler()
	for _, name := range schemas.EventSchemaNames() {
		b, err := schemas.EventSchema(name)
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := c.AddResource(schemas.EventSchemaID(name), v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for _, name := range schemas.EventSchemaNames() {
		t.Run(name, func(t *testing.T) {
			sch, err := c.Compile(schemas.EventSchemaID(name))
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			for i, ex := range readDoc(t, name).Examples {
				v, err := jsonschema.UnmarshalJSON(bytes.NewReader(ex))
				if err != nil {
					t.Fatal(err)
				}
				if err := sch.Validate(v); err != nil {
					t.Errorf("example %d does not validate: %v", i, err)
				}
			}
		})
	}
}

func TestVectorsParse(t *testing.T) {
	got := schemas.Vectors()
	want, err := fs.Glob(schemas.FS(), schemas.VectorsDir+"/*.json")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Vectors() = %v, want every JSON file in the directory: %v", got, want)
	}
	for _, p := range got {
		t.Run(path.Base(p), func(t *testing.T) {
			b, err := fs.ReadFile(schemas.FS(), p)
			if err != nil {
				t.Fatal(err)
			}
			var doc any
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.UseNumber()
			if err := dec.Decode(&doc); err != nil {
				t.Fatalf("not JSON: %v", err)
			}
			if dec.More() {
				t.Fatal("trailing data after the JSON document")
			}
			if _, ok := doc.(map[string]any); !ok {
				t.Fatalf("top level is %T, want an object", doc)
			}
		})
	}
}

func readDoc(t *testing.T, name string) schemaDoc {
	t.Helper()
	b, err := schemas.EventSchema(name)
	if err != nil {
		t.Fatal(err)
	}
	var doc schemaDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return doc
}
