package toolsfile_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/toolsfile"
)

// envOf returns a lookup function over m.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

var testEnv = envOf(map[string]string{"AIRLINE_URL": "http://127.0.0.1:8080", "TOKEN": "s3cret", "EMPTY": ""})

// parse parses src as "tools.yaml" with testEnv, failing the test on error.
func parse(t *testing.T, src string) []toolsfile.Declaration {
	t.Helper()
	f, err := toolsfile.Parse([]byte(src), "tools.yaml", testEnv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(f.MCPTools) > 0 || len(f.Servers) > 0 {
		t.Fatalf("Parse found MCP tools or servers in %q", src)
	}
	return f.Tools
}

// sameJSON reports whether a and b hold equal JSON values.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("not JSON: %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

const full = `tools:
  - name: book
    description: Take a seat.
    idempotency:
      kind: effectful
      key_arguments: [flight]
      check_arguments: [seats]
    timeout: 30s
    retry: {max_attempts: 3, initial_backoff: 200ms, max_backoff: 10s, multiplier: 1.5}
    parameters:
      type: object
      properties:
        flight: {type: string}
        seats: {type: integer}
        request_id: {type: string}
      required: [flight]
    http:
      url: ${AIRLINE_URL}/book
      method: put
      headers: {Authorization: "Bearer ${TOKEN}", X-Version: 2, X-Empty: "${EMPTY}", X-Cost: "$$5 ${TOKEN}$"}
      max_response_bytes: 4096
  - name: lookup_fare
    http: {url: "http://fares.example/lookup"}
`

func TestParseFullDeclaration(t *testing.T) {
	decls := parse(t, full)
	if len(decls) != 2 {
		t.Fatalf("%d declarations; want 2", len(decls))
	}
	d := decls[0]
	if d.File != "tools.yaml" || d.Line != 2 {
		t.Errorf("position %s:%d; want tools.yaml:2", d.File, d.Line)
	}
	s := d.Spec
	if s.Name != "book" || s.Description != "Take a seat." || s.Timeout != 30*time.Second {
		t.Errorf("spec %+v", s)
	}
	wantPolicy := &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}, CheckArguments: []string{"seats"}}
	if !reflect.DeepEqual(s.Idempotency, wantPolicy) {
		t.Errorf("policy %+v; want %+v", s.Idempotency, wantPolicy)
	}
	wantRetry := tool.Retry{MaxAttempts: 3, InitialBackoff: 200 * time.Millisecond, MaxBackoff: 10 * time.Second, Multiplier: 1.5}
	if s.Retry != wantRetry {
		t.Errorf("retry %+v; want %+v", s.Retry, wantRetry)
	}
	wantParams := `{"type":"object","properties":{"flight":{"type":"string"},"seats":{"type":"integer"},"request_id":{"type":"string"}},"required":["flight"]}`
	if string(s.Parameters) != wantParams {
		t.Errorf("parameters\n got %s\nwant %s", s.Parameters, wantParams)
	}
	ep := d.Endpoint
	if ep.URL != "http://127.0.0.1:8080/book" || ep.Method != "put" || ep.MaxResponseBytes != 4096 {
		t.Errorf("endpoint %+v", ep)
	}
	wantHeaders := map[string]string{"Authorization": "Bearer s3cret", "X-Version": "2", "X-Empty": "", "X-Cost": "$5 s3cret$"}
	if !reflect.DeepEqual(ep.Headers, wantHeaders) {
		t.Errorf("headers %q; want %q", ep.Headers, wantHeaders)
	}
	tl, err := d.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := tl.Parameters(); !reflect.DeepEqual(got, []string{"flight", "request_id", "seats"}) {
		t.Errorf("parameters %v", got)
	}

	// The second tool declares no policy, no timeout, no retry and no schema.
	s = decls[1].Spec
	if s.Idempotency != nil || s.Timeout != 0 || s.Retry != (tool.Retry{}) || s.Parameters != nil || decls[1].Line != 22 {
		t.Errorf("minimal tool: %+v at line %d", s, decls[1].Line)
	}
}

func TestKeyArgumentsOmittedVersusEmpty(t *testing.T) {
	const head = "tools:\n  - name: book\n    http: {url: \"http://x.example\"}\n    parameters: {type: object, properties: {flight: {type: string}}}\n    idempotency:\n      kind: idempotent\n"
	tests := []struct {
		name    string
		extra   string
		wantNil bool
	}{
		{"omitted: every argument", "", true},
		{"flow []: none", "      key_arguments: []\n", false},
		{"block empty list: none", "      key_arguments: !!seq []\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := parse(t, head+tt.extra)[0]
			got := d.Spec.Idempotency.KeyArguments
			if (got == nil) != tt.wantNil || len(got) != 0 {
				t.Fatalf("KeyArguments = %#v; want nil: %v", got, tt.wantNil)
			}
			tl, err := d.Build()
			if err != nil {
				t.Fatal(err)
			}
			if (tl.Policy().KeyArguments == nil) != tt.wantNil {
				t.Errorf("built tool's KeyArguments = %#v", tl.Policy().KeyArguments)
			}
		})
	}
}

func TestAliasesAreResolved(t *testing.T) {
	src := `tools:
  - name: book
    retry: &fast {max_attempts: 5, initial_backoff: 10ms}
    parameters: &params
      type: object
      properties: {flight: &str {type: string}, to: *str}
    http: {url: "http://x.example/book"}
  - name: rebook
    retry: *fast
    parameters: *params
    http: {url: "http://x.example/rebook"}
`
	decls := parse(t, src)
	if decls[1].Spec.Retry != decls[0].Spec.Retry || decls[1].Spec.Retry.MaxAttempts != 5 {
		t.Errorf("retry through an alias: %+v", decls[1].Spec.Retry)
	}
	want := `{"type":"object","properties":{"flight":{"type":"string"},"to":{"type":"string"}}}`
	if string(decls[1].Spec.Parameters) != want {
		t.Errorf("parameters through an alias: %s", decls[1].Spec.Parameters)
	}
}

func TestParametersConversion(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"exact big integer", "{type: object, maximum: 9007199254740993}", `{"type":"object","maximum":9007199254740993}`},
		{"decimal copied as written", "{type: object, x-n: 2.50, x-e: 1e3}", `{"type":"object","x-n":2.50,"x-e":1e3}`},
		{"hex converted", "{type: object, x-n: 0x1F}", `{"type":"object","x-n":31}`},
		{"quoted number stays a string", `{type: object, x-s: "123"}`, `{"type":"object","x-s":"123"}`},
		{"booleans and null", "{type: object, additionalProperties: false, x-n: null, x-t: true}", `{"type":"object","additionalProperties":false,"x-n":null,"x-t":true}`},
		{"timestamp kept as text", "{type: object, x-d: 2024-01-31}", `{"type":"object","x-d":"2024-01-31"}`},
		{"no HTML escaping", `{type: object, x-p: "<a&b>"}`, `{"type":"object","x-p":"<a&b>"}`},
		{"numeric key becomes a string", "{type: object, properties: {1: {type: string}}}", `{"type":"object","properties":{"1":{"type":"string"}}}`},
		{"nested lists", "{type: object, x-l: [[1, a], []]}", `{"type":"object","x-l":[[1,"a"],[]]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := parse(t, "tools:\n  - name: t\n    http: {url: \"http://x.example\"}\n    parameters: "+tt.yaml+"\n")[0]
			if string(d.Spec.Parameters) != tt.want {
				t.Errorf("got  %s\nwant %s", d.Spec.Parameters, tt.want)
			}
			if !sameJSON(t, d.Spec.Parameters, []byte(tt.want)) {
				t.Errorf("not the same JSON value")
			}
		})
	}
}

// wantError checks that err holds an *Error at file:line for tool, on field, whose
// message contains each of texts.
type wantError struct {
	line  int
	tool  string // "" to skip
	field string
	texts []string
}

func TestParseErrors(t *testing.T) {
	const ok = "    http: {url: \"http://x.example\"}\n"
	const params = "    parameters: {type: object, properties: {flight: {type: string}, seats: {type: integer}}}\n"
	tests := []struct {
		name string
		src  string
		want wantError
		is   error // an extra error the result must match
	}{
		{"empty file", "", wantError{1, "", "", []string{"empty"}}, nil},
		{"only a comment", "# nothing\n", wantError{1, "", "", []string{"empty"}}, nil},
		{"not YAML", "tools:\n  - name: [\n", wantError{2, "", "", []string{"not valid YAML"}}, nil},
		{"top level a list", "- a\n", wantError{1, "", "", []string{"mapping"}}, nil},
		{"unknown top-level field", "tools: []\nversion: 2\n", wantError{2, "", "version", []string{"unknown field"}}, nil},
		{"no tools field", "{}\n", wantError{1, "", "tools", []string{"required"}}, nil},
		{"tools not a list", "tools: {book: 1}\n", wantError{1, "", "tools", []string{"list"}}, nil},
		{"no tools", "tools: []\n", wantError{1, "", "tools", []string{"no tools"}}, nil},
		{"second document", "tools:\n  - name: a\n" + ok + "---\ntools: []\n", wantError{4, "", "", []string{"more than one"}}, nil},
		{"tool not a mapping", "tools:\n  - book\n", wantError{2, "", "", []string{"tools[0]", "mapping"}}, nil},
		{"unknown tool field", "tools:\n  - name: book\n    tiemout: 3s\n" + ok, wantError{3, "book", "tiemout", []string{"unknown field", "timeout"}}, nil},
		{"field twice", "tools:\n  - name: book\n    timeout: 3s\n    timeout: 4s\n" + ok, wantError{4, "book", "timeout", []string{"twice", "line 3"}}, nil},
		{"missing name", "tools:\n  - description: x\n" + ok, wantError{2, "", "name", []string{"tools[0]", "required"}}, nil},
		{"bad name", "tools:\n  - name: book.seat\n" + ok, wantError{2, "book.seat", "name", []string{"[A-Za-z0-9_-]"}}, tool.ErrInvalidSpec},
		{"duplicate tool", "tools:\n  - name: book\n" + ok + "  - name: book\n" + ok, wantError{4, "book", "name", []string{"declared twice", "line 2"}}, nil},
		{"missing http", "tools:\n  - name: book\n", wantError{2, "book", "http", []string{"required", "HTTP"}}, nil},
		{"missing url", "tools:\n  - name: book\n    http: {method: POST}\n", wantError{3, "book", "http.url", []string{"required"}}, nil},
		{"unknown http field", "tools:\n  - name: book\n    http:\n      url: http://x.example\n      body: x\n", wantError{5, "book", "http.body", []string{"unknown field"}}, nil},
		{"unset variable", "tools:\n  - name: book\n    http:\n      url: ${NOPE}/book\n", wantError{4, "book", "http.url", []string{"${NOPE}", "not set"}}, nil},
		{"headers outside http", "tools:\n  - name: book\n" + ok + "    headers: {}\n", wantError{4, "book", "headers", []string{"unknown field"}}, nil},
		{"unset header variable", "tools:\n  - name: book\n    http:\n      url: http://x.example\n      headers:\n        Authorization: Bearer ${NO_TOKEN}\n", wantError{6, "book", "http.headers.Authorization", []string{"${NO_TOKEN}"}}, nil},
		{"bad reference", "tools:\n  - name: book\n    http: {url: \"http://x.example/${1X}\"}\n", wantError{3, "book", "http.url", []string{"${1X}"}}, nil},
		{"unterminated reference", "tools:\n  - name: book\n    http: {url: \"http://x.example/${X\"}\n", wantError{3, "book", "http.url", []string{"unterminated"}}, nil},
		{"GET", "tools:\n  - name: book\n    http:\n      url: http://x.example\n      method: GET\n", wantError{5, "book", "http.method", []string{"POST"}}, tool.ErrInvalidSpec},
		{"reserved header", "tools:\n  - name: book\n    http:\n      url: http://x.example\n      headers: {Idempotency-Key: k}\n", wantError{5, "book", "http.headers", []string{"Idempotency-Key"}}, tool.ErrInvalidSpec},
		{"not an http URL", "tools:\n  - name: book\n    http:\n      url: ftp://x.example\n", wantError{4, "book", "http.url", []string{"http"}}, tool.ErrInvalidSpec},
		{"headers a list", "tools:\n  - name: book\n    http:\n      url: http://x.example\n      headers: [a]\n", wantError{5, "book", "http.headers", []string{"mapping"}}, nil},
		{"zero response cap", "tools:\n  - name: book\n    http:\n      url: http://x.example\n      max_response_bytes: 0\n", wantError{5, "book", "http.max_response_bytes", []string{"positive"}}, nil},
		{"bad kind", "tools:\n  - name: book\n" + ok + "    idempotency:\n      kind: sometimes\n", wantError{5, "book", "idempotency.kind", []string{"sometimes"}}, nil},
		{"missing kind", "tools:\n  - name: book\n" + ok + "    idempotency:\n      key_arguments: []\n", wantError{4, "book", "idempotency.kind", []string{"required"}}, nil},
		{"empty idempotency", "tools:\n  - name: book\n" + ok + "    idempotency:\n", wantError{4, "book", "idempotency", []string{"leave the block out"}}, nil},
		{"unknown idempotency field", "tools:\n  - name: book\n" + ok + "    idempotency: {kind: effectful, key_args: [flight]}\n", wantError{4, "book", "idempotency.key_args", []string{"unknown field"}}, nil},
		{"null key_arguments", "tools:\n  - name: book\n" + ok + params + "    idempotency:\n      kind: effectful\n      key_arguments:\n", wantError{7, "book", "idempotency.key_arguments", []string{"null", "[]"}}, nil},
		{"key_arguments a string", "tools:\n  - name: book\n" + ok + params + "    idempotency: {kind: effectful, key_arguments: flight}\n", wantError{5, "book", "idempotency.key_arguments", []string{"list"}}, nil},
		{"key argument not a parameter", "tools:\n  - name: book\n" + ok + params + "    idempotency:\n      kind: effectful\n      key_arguments:\n        - flight\n        - date\n",
			wantError{9, "book", "idempotency.key_arguments", []string{`"date"`, "not a parameter"}}, tool.ErrUnknownArgument},
		{"check argument not a parameter", "tools:\n  - name: book\n" + ok + params + "    idempotency: {kind: effectful, key_arguments: [flight], check_arguments: [seat]}\n",
			wantError{5, "book", "idempotency.check_arguments", []string{`"seat"`}}, tool.ErrUnknownArgument},
		{"key argument without parameters", "tools:\n  - name: book\n" + ok + "    idempotency: {kind: idempotent, key_arguments: [flight]}\n",
			wantError{4, "book", "idempotency.key_arguments", []string{`"flight"`}}, tool.ErrUnknownArgument},
		{"timeout without unit", "tools:\n  - name: book\n" + ok + "    timeout: 30\n", wantError{4, "book", "timeout", []string{`"30"`, "duration"}}, nil},
		{"negative timeout", "tools:\n  - name: book\n" + ok + "    timeout: -1s\n", wantError{4, "book", "timeout", []string{"negative"}}, tool.ErrInvalidSpec},
		{"zero attempts", "tools:\n  - name: book\n" + ok + "    retry: {max_attempts: 0}\n", wantError{4, "book", "retry.max_attempts", []string{"at least 1"}}, nil},
		{"attempts not a number", "tools:\n  - name: book\n" + ok + "    retry: {max_attempts: three}\n", wantError{4, "book", "retry.max_attempts", []string{"integer"}}, nil},
		{"attempts out of range", "tools:\n  - name: book\n" + ok + "    retry: {max_attempts: 99999999999999999999}\n", wantError{4, "book", "retry.max_attempts", []string{}}, nil},
		{"shrinking multiplier", "tools:\n  - name: book\n" + ok + "    retry: {multiplier: 0.5}\n", wantError{4, "book", "retry.multiplier", []string{"at least 1"}}, nil},
		{"zero backoff", "tools:\n  - name: book\n" + ok + "    retry: {initial_backoff: 0s}\n", wantError{4, "book", "retry.initial_backoff", []string{"positive"}}, nil},
		{"unknown retry field", "tools:\n  - name: book\n" + ok + "    retry: {attempts: 2}\n", wantError{4, "book", "retry.attempts", []string{"unknown field"}}, nil},
		{"parameters not an object schema", "tools:\n  - name: book\n" + ok + "    parameters: {type: array}\n", wantError{4, "book", "parameters", []string{"object"}}, tool.ErrInvalidSpec},
		{"parameters a list", "tools:\n  - name: book\n" + ok + "    parameters: [1]\n", wantError{4, "book", "parameters", []string{"object"}}, tool.ErrInvalidSpec},
		{"parameters infinity", "tools:\n  - name: book\n" + ok + "    parameters:\n      type: object\n      maximum: .inf\n", wantError{6, "book", "parameters", []string{".inf"}}, nil},
		{"parameters merge key", "tools:\n  - name: book\n" + ok + "    parameters:\n      type: object\n      <<: {a: 1}\n", wantError{6, "book", "parameters", []string{"merge"}}, nil},
		{"parameters custom tag", "tools:\n  - name: book\n" + ok + "    parameters: {type: object, x: !secret abc}\n", wantError{4, "book", "parameters", []string{"!secret"}}, nil},
		{"parameters alias cycle", "tools:\n  - name: book\n" + ok + "    parameters: &p\n      type: object\n      x: *p\n", wantError{6, "book", "parameters", []string{"contains it"}}, nil},
		{"parameters alias bomb", "tools:\n  - name: book\n" + ok + "    parameters:\n      type: object\n" + aliasBomb, wantError{0, "book", "parameters", []string{"too large"}}, nil},
		{"parameters too deep", "tools:\n  - name: book\n" + ok + "    parameters: {type: object, x: " + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "}\n", wantError{4, "book", "parameters", []string{"deeper"}}, nil},
		{"parameters duplicate key", "tools:\n  - name: book\n" + ok + "    parameters: {type: object, 1: a, \"1\": b}\n", wantError{4, "book", "parameters", []string{"twice"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := toolsfile.Parse([]byte(tt.src), "tools.yaml", testEnv)
			if err == nil {
				t.Fatalf("no error; file %+v", f)
			}
			if f != nil {
				t.Errorf("a file returned with the error")
			}
			if !errors.Is(err, toolsfile.ErrInvalid) {
				t.Errorf("err does not match ErrInvalid: %v", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err does not match %v: %v", tt.is, err)
			}
			checkError(t, err, tt.want)
		})
	}
}

// aliasBomb expands to 10^9 nodes if aliases are followed without a budget.
var aliasBomb = func() string {
	var b strings.Builder
	b.WriteString("      x0: &a0 [a, a, a, a, a, a, a, a, a, a]\n")
	for i := 1; i <= 9; i++ {
		fmt.Fprintf(&b, "      x%d: &a%d [", i, i)
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*a%d", i-1)
		}
		b.WriteString("]\n")
	}
	return b.String()
}()

// checkError finds, among the joined errors in err, one matching want, in a
// file named tools.yaml.
func checkError(t *testing.T, err error, want wantError) {
	t.Helper()
	var all []string
	for _, e := range unjoin(err) {
		var fe *toolsfile.Error
		if !errors.As(e, &fe) {
			t.Errorf("joined error %v (%T) is not a *toolsfile.Error", e, e)
			continue
		}
		all = append(all, fe.Error())
		if filepath.Base(fe.File) != "tools.yaml" || want.line != 0 && fe.Line != want.line || fe.Field != want.field || want.tool != "" && fe.Tool != want.tool {
			continue
		}
		msg := fe.Error()
		prefix := fe.File + ":" + strconv.Itoa(fe.Line) + ": "
		if fe.Line < 1 || !strings.HasPrefix(msg, prefix) {
			t.Errorf("message %q does not start with %q", msg, prefix)
		}
		if want.tool != "" && !strings.Contains(msg, `tool "`+want.tool+`"`) {
			t.Errorf("message %q does not name tool %q", msg, want.tool)
		}
		for _, s := range want.texts {
			if !strings.Contains(msg, s) {
				t.Errorf("message %q does not contain %q", msg, s)
			}
		}
		return
	}
	t.Errorf("no error at line %d on tool %q field %q among:\n  %s", want.line, want.tool, want.field, strings.Join(all, "\n  "))
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func TestParseReportsEveryError(t *testing.T) {
	src := `tools:
  - name: book
    timeout: soon
    idempotency: {kind: effectful, key_arguments: [flight]}
    http: {url: "${MISSING}/book"}
  - name: lookup
    tiemout: 3s
  - name: book
    http: {url: "http://x.example", headers: {A: "${ALSO_MISSING}"}}
  - name: rebook
    parameters: {type: object, properties: {flight: {type: string}}}
    idempotency: {kind: effectful, key_arguments: [date]}
    http: {url: "${MISSING}/rebook", method: GET}
`
	_, err := toolsfile.Parse([]byte(src), "tools.yaml", testEnv)
	errs := unjoin(err)
	wants := []wantError{
		{3, "book", "timeout", []string{"soon"}},
		{5, "book", "http.url", []string{"${MISSING}"}},
		{6, "lookup", "http", []string{"required"}},
		{7, "lookup", "tiemout", []string{"unknown"}},
		{8, "book", "name", []string{"declared twice", "line 2"}},
		{9, "book", "http.headers.A", []string{"${ALSO_MISSING}"}},
		// The declaration is sound apart from its key argument, the endpoint apart
		// from its variable: both problems are reported.
		{12, "rebook", "idempotency.key_arguments", []string{`"date"`}},
		{13, "rebook", "http.url", []string{"${MISSING}"}},
	}
	if len(errs) != len(wants) {
		t.Errorf("%d errors; want %d:\n%v", len(errs), len(wants), err)
	}
	for _, w := range wants {
		checkError(t, err, w)
	}
	var last int
	for _, e := range errs {
		var fe *toolsfile.Error
		if errors.As(e, &fe) {
			if fe.Line < last {
				t.Errorf("errors out of line order: %d after %d", fe.Line, last)
			}
			last = fe.Line
		}
	}
	// The key argument of the first tool is not checked: its timeout is wrong, so
	// its declaration is not whole. Nor is the method of the last: its URL is.
}

func TestSecretsStayOutOfErrors(t *testing.T) {
	env := envOf(map[string]string{"TOKEN": "hunter2\r\nX-Injected: 1", "HOST": "hunter3 bad"})
	src := "tools:\n  - name: book\n    http:\n      url: http://${HOST}/book\n      headers: {Authorization: Bearer ${TOKEN}}\n"
	_, err := toolsfile.Parse([]byte(src), "tools.yaml", env)
	if err == nil {
		t.Fatal("no error")
	}
	if strings.Contains(err.Error(), "hunter") {
		t.Errorf("error repeats an expanded secret: %v", err)
	}
}

func TestNilEnvUsesProcessEnvironment(t *testing.T) {
	t.Setenv("TOOLSFILE_TEST_URL", "http://from-env.example")
	f, err := toolsfile.Parse([]byte("tools:\n  - name: a\n    http: {url: \"${TOOLSFILE_TEST_URL}/a\"}\n"), "f.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Tools[0].Endpoint.URL; got != "http://from-env.example/a" {
		t.Errorf("URL = %q", got)
	}
}
