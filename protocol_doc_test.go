package toolexec_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

// TestProtocolDoc keeps docs/PROTOCOL.md honest where that is cheap: every
// subject and stream the wire and admin packages define, every answer kind,
// reason, rejection and failure code, resolution action, admin, history and
// catalog error code, and the CloudEvents names, appear in it (as `code`).
func TestProtocolDoc(t *testing.T) {
	b, err := os.ReadFile("docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	want := func(what, s string) {
		t.Helper()
		if !strings.Contains(doc, "`"+s) {
			t.Errorf("docs/PROTOCOL.md does not name %s %q", what, s)
		}
	}
	for _, k := range events.Kinds() {
		want("the answer kind", string(k))
	}
	want("the answers' event type", wire.TypePrefix+"<kind>")
	for _, r := range events.Reasons() {
		want("the reason", string(r))
	}
	for _, c := range events.RejectionCodes() {
		want("the rejection code", string(c))
	}
	for _, c := range events.FailureCodes() {
		want("the failure code", string(c))
	}
	for _, a := range []events.Action{events.ActionComplete, events.ActionRelease} {
		want("the action", string(a))
	}
	for _, c := range []string{admin.CodeInvalid, admin.CodeNotFound, admin.CodeNotIndeterminate, admin.CodeTooLarge,
		admin.CodeUnavailable, admin.CodeAuditFailed, admin.CodeUnsupported, admin.CodeForbidden, admin.CodeInternal,
		bus.HistoryBadRequest, bus.HistoryForbidden, bus.HistoryUnavailable, bus.CatalogBadRequest, bus.CatalogTooLarge} {
		want("the error code", c)
	}
	for _, n := range []string{wire.CallType, wire.ExtTenant, wire.ExtRunID, wire.ExtCallID, wire.ExtIdempotencyKey,
		wire.StructuredJSON, bus.DefaultDurable, wire.Placeholder} {
		want("the name", n)
	}
	// Every string constant of the subjects' files: streams, prefixes, subjects.
	for _, file := range []string{"bus/wire/subject.go", "admin/messages.go"} {
		for _, s := range stringConsts(t, file) {
			if strings.HasPrefix(s, "toolexec.") || strings.HasPrefix(s, "TOOLEXEC_") {
				want("the subject or stream", s)
			}
		}
	}
}

// stringConsts returns the string literals of file's constant declarations.
func stringConsts(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			for _, v := range spec.(*ast.ValueSpec).Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					s, err := strconv.Unquote(lit.Value)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, s)
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no string constants in %s", file)
	}
	return out
}
