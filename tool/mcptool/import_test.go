package mcptool_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tesserix/toolexec/internal/testkit/mcptest"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/mcptool"
)

func TestAnnotationPolicy(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		name  string
		ann   *mcp.ToolAnnotations
		trust bool
		want  tool.Kind
	}{
		{"no annotations, untrusted", nil, false, tool.Effectful},
		{"no annotations, trusted", nil, true, tool.Effectful},
		{"read-only, untrusted", &mcp.ToolAnnotations{ReadOnlyHint: true}, false, tool.Effectful},
		{"read-only, trusted", &mcp.ToolAnnotations{ReadOnlyHint: true}, true, tool.ReadOnly},
		{"read-only and destructive, trusted", &mcp.ToolAnnotations{ReadOnlyHint: true, DestructiveHint: &yes}, true, tool.ReadOnly},
		{"idempotent, not destructive, untrusted", &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no}, false, tool.Effectful},
		{"idempotent, not destructive, trusted", &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &no}, true, tool.Idempotent},
		{"idempotent, destructive unsaid, trusted", &mcp.ToolAnnotations{IdempotentHint: true}, true, tool.Effectful},
		{"idempotent and destructive, trusted", &mcp.ToolAnnotations{IdempotentHint: true, DestructiveHint: &yes}, true, tool.Effectful},
		{"not destructive only, trusted", &mcp.ToolAnnotations{DestructiveHint: &no}, true, tool.Effectful},
		{"open world only, trusted", &mcp.ToolAnnotations{OpenWorldHint: &no}, true, tool.Effectful},
		{"empty annotations, trusted", &mcp.ToolAnnotations{}, true, tool.Effectful},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mcptool.AnnotationPolicy(tt.ann, tt.trust)
			if p == nil || p.Kind != tt.want || p.KeyArguments != nil || p.CheckArguments != nil {
				t.Errorf("policy %+v; want kind %s, every argument a key argument", p, tt.want)
			}
		})
	}
}

// kindsOf maps the tools' names to their kinds.
func kindsOf(tools []*tool.Tool) map[string]tool.Kind {
	out := map[string]tool.Kind{}
	for _, tl := range tools {
		out[tl.Name()] = tl.Policy().Kind
	}
	return out
}

// TestImport: every tool the upstream lists (over several pages) comes in,
// Effectful unless annotations are trusted, with its description and schema;
// prefix, exclusions and overrides apply.
func TestImport(t *testing.T) {
	f := open(t, "stdio", mcptest.Options{PageSize: 2}, mcptool.Config{})
	ctx := testenv.Context(t, time.Minute)

	all, err := f.u.Import(ctx, mcptool.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(all))
	for i, tl := range all {
		names[i] = tl.Name()
		if tl.Policy().Kind != tool.Effectful || tl.Policy().KeyArguments != nil {
			t.Errorf("%s imported as %+v; want effectful on every argument", tl.Name(), tl.Policy())
		}
	}
	if want := mcptest.Tools(); !sameSet(names, want) {
		t.Errorf("imported %v; want %v", names, want)
	}

	trusted, err := f.u.Import(ctx, mcptool.ImportOptions{TrustAnnotations: true})
	if err != nil {
		t.Fatal(err)
	}
	got := kindsOf(trusted)
	for name, kind := range mcptest.Annotated {
		if string(got[name]) != kind {
			t.Errorf("trusted import: %s is %s; want %s", name, got[name], kind)
		}
	}

	some, err := f.u.Import(ctx, mcptool.ImportOptions{
		Prefix: "up_", TrustAnnotations: true,
		Exclude: []string{"hang", "needs_input"},
		Tools: map[string]mcptool.Override{
			"effect": {
				Description: "Writes one line.",
				Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"entity"}},
				Timeout:     5 * time.Second, Retry: tool.Retry{MaxAttempts: 2},
			},
			"ro": {Idempotency: &tool.Policy{Kind: tool.Idempotent}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*tool.Tool{}
	for _, tl := range some {
		byName[tl.Name()] = tl
	}
	if len(some) != len(all)-2 || byName["up_hang"] != nil || byName["up_needs_input"] != nil || byName["up_meta"] == nil {
		t.Errorf("with prefix and exclusions: %v", kindsOf(some))
	}
	eff := byName["up_effect"].Spec()
	if eff.Description != "Writes one line." || eff.Timeout != 5*time.Second || eff.Retry.MaxAttempts != 2 ||
		!reflect.DeepEqual(eff.Idempotency, &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"entity"}}) {
		t.Errorf("overridden effect: %+v", eff)
	}
	if p := byName["up_effect"].Parameters(); !reflect.DeepEqual(p, []string{"entity", "note"}) {
		t.Errorf("effect's parameters %v; want the upstream schema's", p)
	}
	if byName["up_ro"].Policy().Kind != tool.Idempotent || byName["up_idem"].Policy().Kind != tool.Idempotent {
		t.Errorf("an override or the annotations were not applied: %v", kindsOf(some))
	}
	if d := byName["up_meta"].Spec().Description; d != "the test server's meta" {
		t.Errorf("description %q; want the upstream's", d)
	}

	// An imported tool calls the upstream tool of its name, without prefix.
	out, err := byName["up_effect"].Call(ctx, callCtx, []byte(`{"entity":"e"}`))
	if err != nil || out != "done" {
		t.Errorf("calling up_effect: %q, %v", out, err)
	}
	if eff := mcptest.Effects(t, f.effects); len(eff) != 1 || eff[0].Tool != "effect" {
		t.Errorf("effects %+v", eff)
	}
	// The schema is the upstream's: the executor validates against it.
	if err := byName["up_effect"].Validate([]byte(`{"note":"no entity"}`)); err == nil {
		t.Errorf("arguments without the required entity pass the imported schema")
	}
}

func sameSet(a, b []string) bool {
	m := map[string]int{}
	for _, s := range a {
		m[s]++
	}
	for _, s := range b {
		m[s]--
	}
	for _, n := range m {
		if n != 0 {
			return false
		}
	}
	return len(a) == len(b)
}

// TestImportErrors: every problem is reported, each naming its tool.
func TestImportErrors(t *testing.T) {
	f := open(t, "stdio", mcptest.Options{BadName: true}, mcptool.Config{})
	ctx := testenv.Context(t, time.Minute)
	tests := []struct {
		name string
		opts mcptool.ImportOptions
		tool string
		is   error
		text string
	}{
		{"name not a token", mcptool.ImportOptions{}, "bad.name", mcptool.ErrBadName, "exclude it"},
		{"prefix makes a bad name", mcptool.ImportOptions{Prefix: "a.", Exclude: []string{"bad.name"}}, "meta", mcptool.ErrBadName, `"a.meta"`},
		{"prefix makes a name too long", mcptool.ImportOptions{Prefix: strings.Repeat("p", 126), Exclude: []string{"bad.name"}}, "effect", mcptool.ErrBadName, "effect"},
		{"exclude names no tool", mcptool.ImportOptions{Exclude: []string{"bad.name", "nope"}}, "nope", mcptool.ErrUnknownTool, "exclude"},
		{"override names no tool", mcptool.ImportOptions{Exclude: []string{"bad.name"}, Tools: map[string]mcptool.Override{"nope": {}}}, "nope", mcptool.ErrUnknownTool, "override"},
		{"excluded and overridden", mcptool.ImportOptions{Exclude: []string{"bad.name"}, Tools: map[string]mcptool.Override{"bad.name": {}}}, "bad.name", nil, "both"},
		{"key argument not a parameter", mcptool.ImportOptions{Exclude: []string{"bad.name"}, Tools: map[string]mcptool.Override{
			"effect": {Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"entity", "date"}}},
		}}, "effect", tool.ErrUnknownArgument, `"date"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools, err := f.u.Import(ctx, tt.opts)
			if tools != nil {
				t.Errorf("tools returned with an error")
			}
			var found bool
			for _, e := range unjoin(err) {
				var ie *mcptool.ImportError
				if errors.As(e, &ie) && ie.Tool == tt.tool && ie.Upstream == "test" && (tt.is == nil || errors.Is(e, tt.is)) &&
					strings.Contains(e.Error(), tt.text) {
					found = true
				}
			}
			if !found {
				t.Errorf("Import: %v; want an ImportError on %q matching %v, saying %q", err, tt.tool, tt.is, tt.text)
			}
		})
	}
	tools, err := f.u.Import(ctx, mcptool.ImportOptions{Exclude: []string{"bad.name"}})
	if err != nil || len(tools) != len(mcptest.Tools()) {
		t.Errorf("with the bad name excluded: %d tools, %v", len(tools), err)
	}
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// TestListTools: the listing follows pagination and carries what an import
// needs.
func TestListTools(t *testing.T) {
	f := open(t, "http-legacy", mcptest.Options{PageSize: 1}, mcptool.Config{})
	list, err := f.u.ListTools(testenv.Context(t, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range list {
		names = append(names, r.Name)
		if r.Name == "idem" && (r.Annotations == nil || !r.Annotations.IdempotentHint) {
			t.Errorf("idem's annotations %+v", r.Annotations)
		}
		if r.Name == "effect" && !strings.Contains(string(r.InputSchema), `"entity"`) {
			t.Errorf("effect's schema %s", r.InputSchema)
		}
	}
	if !sameSet(names, mcptest.Tools()) {
		t.Errorf("listed %v; want %v", names, mcptest.Tools())
	}
}
