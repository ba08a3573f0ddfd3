package toolsfile_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/internal/testkit/mcptest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
	"github.com/tesserix/toolexec/tool/toolsfile"
)

const natsFile = `tools:
  - name: rebook
    description: Move a booking.
    idempotency: {kind: idempotent, key_arguments: [pnr]}
    timeout: 20s
    retry: {max_attempts: 2}
    parameters: {type: object, properties: {pnr: {type: string}}, required: [pnr]}
    nats: {}
  - name: refund
    idempotency: {kind: effectful}
    nats:
      subject: toolexec.body.refund-v2
      max_reply_bytes: 4096
  - name: lookup_fare
    http: {url: "http://fares.example/lookup"}
`

// TestParseNATS: a nats tool is declared like any other, with its subject and
// reply bound; it is not an HTTP tool, and the file's other tools stay what
// they are.
func TestParseNATS(t *testing.T) {
	f, err := toolsfile.Parse([]byte(natsFile), "tools.yaml", testEnv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(f.NATSTools) != 2 || len(f.Tools) != 1 || f.Tools[0].Spec.Name != "lookup_fare" || len(f.MCPTools) != 0 {
		t.Fatalf("NATSTools %d, Tools %d, MCPTools %d; want 2, 1 (lookup_fare), 0", len(f.NATSTools), len(f.Tools), len(f.MCPTools))
	}
	rebook, refund := f.NATSTools[0], f.NATSTools[1]
	if rebook.File != "tools.yaml" || rebook.Line != 2 || refund.Line != 9 {
		t.Errorf("positions %s:%d and %d; want tools.yaml:2 and 9", rebook.File, rebook.Line, refund.Line)
	}
	want := tool.Spec{Name: "rebook", Description: "Move a booking.", Timeout: 20 * time.Second, Retry: tool.Retry{MaxAttempts: 2},
		Idempotency: &tool.Policy{Kind: tool.Idempotent, KeyArguments: []string{"pnr"}},
		Parameters:  []byte(`{"type":"object","properties":{"pnr":{"type":"string"}},"required":["pnr"]}`)}
	if !reflect.DeepEqual(rebook.Spec, want) || !reflect.DeepEqual(rebook.Endpoint, natstool.Endpoint{}) {
		t.Errorf("rebook %+v on %+v; want %+v on the defaults", rebook.Spec, rebook.Endpoint, want)
	}
	if p := rebook.Pending(); p.Subject() != "toolexec.body.rebook" {
		t.Errorf("rebook's subject %q", p.Subject())
	}
	if refund.Endpoint.Subject != "toolexec.body.refund-v2" || refund.Endpoint.MaxReplyBytes != 4096 || refund.Pending().Subject() != "toolexec.body.refund-v2" {
		t.Errorf("refund's endpoint %+v", refund.Endpoint)
	}
}

// TestParseNATSErrors: a nats block is read as strictly as the others, each
// error at its line and field.
func TestParseNATSErrors(t *testing.T) {
	const head = "tools:\n  - name: book\n"
	tests := []struct {
		name string
		src  string
		want wantError
		is   error
	}{
		{"empty block", head + "    nats:\n", wantError{3, "book", "nats", []string{"nats: {}"}}, nil},
		{"not a mapping", head + "    nats: toolexec.body.book\n", wantError{3, "book", "nats", []string{"mapping"}}, nil},
		{"unknown field", head + "    nats: {subjet: x.book}\n", wantError{3, "book", "nats.subjet", []string{"unknown field", "subject"}}, nil},
		{"wildcard subject", head + "    nats:\n      subject: toolexec.body.*\n", wantError{4, "book", "nats.subject", []string{"wildcards"}}, tool.ErrInvalidSpec},
		{"empty token", head + "    nats: {subject: toolexec..book}\n", wantError{3, "book", "nats.subject", []string{"empty token"}}, tool.ErrInvalidSpec},
		{"empty subject", head + "    nats: {subject: \"\"}\n", wantError{3, "book", "nats.subject", []string{"leave it out"}}, nil},
		{"zero reply bound", head + "    nats: {max_reply_bytes: 0}\n", wantError{3, "book", "nats.max_reply_bytes", []string{"positive"}}, nil},
		{"reply bound not a number", head + "    nats: {max_reply_bytes: lots}\n", wantError{3, "book", "nats.max_reply_bytes", []string{"integer"}}, nil},
		{"http and nats", head + "    http: {url: \"http://x.example\"}\n    nats: {}\n", wantError{4, "book", "nats", []string{"one body", "http and nats"}}, nil},
		{"mcp and nats", "mcp_servers:\n  - name: s\n    url: http://x.example/mcp\n" + head + "    nats: {}\n    mcp: {server: s}\n",
			wantError{6, "book", "nats", []string{"mcp and nats"}}, nil},
		{"no body", head, wantError{2, "book", "http", []string{"required", "nats"}}, nil},
		{"key argument not a parameter", head + "    parameters: {type: object, properties: {flight: {type: string}}}\n" +
			"    idempotency: {kind: effectful, key_arguments: [date]}\n    nats: {}\n",
			wantError{4, "book", "idempotency.key_arguments", []string{`"date"`}}, tool.ErrUnknownArgument},
		{"declared twice", head + "    nats: {}\n  - name: book\n    http: {url: \"http://x.example\"}\n",
			wantError{4, "book", "name", []string{"declared twice"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := toolsfile.Parse([]byte(tt.src), "tools.yaml", testEnv)
			if err == nil {
				t.Fatalf("no error; file %+v", f)
			}
			if !errors.Is(err, toolsfile.ErrInvalid) || tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v; want ErrInvalid and %v", err, tt.is)
			}
			checkError(t, err, tt.want)
		})
	}
}

// TestLoadNATS: Open hands the nats tools over unbuilt, built by the executor
// on its connection, and builds the others.
func TestLoadNATS(t *testing.T) {
	ts, err := toolsfile.Load(testenv.Context(t, time.Minute), writeFile(t, natsFile), toolsfile.Options{})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	defer ts.Close()
	if tools := ts.Tools(); len(tools) != 1 || tools[0].Name() != "lookup_fare" {
		t.Errorf("Tools() = %v, want lookup_fare alone", tools)
	}
	pending := ts.NATSTools()
	if len(pending) != 2 || pending[0].Spec.Name != "rebook" || pending[1].Spec.Name != "refund" {
		t.Fatalf("NATSTools() = %+v, want rebook and refund", pending)
	}
	if _, err := pending[0].Build(nil); !errors.Is(err, tool.ErrInvalidSpec) {
		t.Errorf("Build without a connection: %v, want it refused", err)
	}
}

// TestLoadNATSDuplicateAcrossImport: an imported tool named like a nats tool
// of the tools list is an error at the import.
func TestLoadNATSDuplicateAcrossImport(t *testing.T) {
	src := "mcp_servers:\n" + stdioServer("up", mcptest.Options{}, "    import: {}\n") + "tools:\n  - name: text\n    nats: {}\n"
	_, err := toolsfile.Load(testenv.Context(t, time.Minute), writeFile(t, src), toolsfile.Options{Logger: testenv.Logger()})
	checkError(t, err, wantError{strings.Count(src[:strings.Index(src, "import:")], "\n") + 1, "", "import", []string{`"text"`, "also declared"}})
	if !errors.Is(err, tool.ErrDuplicateTool) {
		t.Errorf("err does not match tool.ErrDuplicateTool: %v", err)
	}
}
