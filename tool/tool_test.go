package tool_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/idemkey"
	"github.com/tesserix/toolexec/tool"
)

func ok(context.Context, tool.Context, json.RawMessage) (string, error) { return "ok", nil }

const schema = `{"type":"object","properties":{"flight":{"type":"string"},"seats":{"type":"integer"},"request_id":{"type":"string"}},"required":["flight"]}`

func TestNewRefusesBadDeclarations(t *testing.T) {
	tests := []struct {
		name     string
		spec     tool.Spec
		wantArg  string // the argument the error must name, if any
		wantText string
	}{
		{name: "key argument not a parameter", spec: tool.Spec{Name: "book", Parameters: json.RawMessage(schema),
			Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight", "date"}}}, wantArg: "date", wantText: "key_arguments"},
		{name: "check argument not a parameter", spec: tool.Spec{Name: "book", Parameters: json.RawMessage(schema),
			Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}, CheckArguments: []string{"seat"}}}, wantArg: "seat", wantText: "check_arguments"},
		{name: "key argument twice", spec: tool.Spec{Name: "book", Parameters: json.RawMessage(schema),
			Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight", "flight"}}}, wantArg: "flight", wantText: "twice"},
		{name: "key argument with no properties", spec: tool.Spec{Name: "book",
			Idempotency: &tool.Policy{Kind: tool.Idempotent, KeyArguments: []string{"flight"}}}, wantArg: "flight"},
		{name: "unknown kind", spec: tool.Spec{Name: "book", Parameters: json.RawMessage(schema),
			Idempotency: &tool.Policy{Kind: "sometimes"}}, wantText: "sometimes"},
		{name: "bad name", spec: tool.Spec{Name: "book.seat"}, wantText: "name"},
		{name: "empty name", spec: tool.Spec{}, wantText: "name"},
		{name: "schema not JSON", spec: tool.Spec{Name: "book", Parameters: json.RawMessage(`{"type":`)}, wantText: "not JSON"},
		{name: "schema not an object schema", spec: tool.Spec{Name: "book", Parameters: json.RawMessage(`{"type":"array"}`)}, wantText: "object"},
		{name: "schema does not compile", spec: tool.Spec{Name: "book", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"type":"nonsense"}}}`)}, wantText: "compile"},
		{name: "schema loads a file", spec: tool.Spec{Name: "book", Parameters: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"file:///etc/passwd"}}}`)}, wantText: "compile"},
		{name: "negative timeout", spec: tool.Spec{Name: "book", Timeout: -time.Second}, wantText: "timeout"},
		{name: "negative retry", spec: tool.Spec{Name: "book", Retry: tool.Retry{MaxBackoff: -1}}, wantText: "retry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tool.New(tt.spec, ok)
			if !errors.Is(err, tool.ErrInvalidSpec) {
				t.Fatalf("err = %v; want ErrInvalidSpec", err)
			}
			if tt.wantArg != "" {
				var se *tool.SpecError
				if !errors.As(err, &se) || se.Argument != tt.wantArg || !errors.Is(err, tool.ErrUnknownArgument) && !strings.Contains(err.Error(), "twice") {
					t.Fatalf("err = %v; want a SpecError naming %q", err, tt.wantArg)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("%q", tt.wantArg)) {
					t.Errorf("message %q does not name %q", err, tt.wantArg)
				}
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("message %q does not mention %q", err, tt.wantText)
			}
		})
	}
	if _, err := tool.New(tool.Spec{Name: "book"}, nil); !errors.Is(err, tool.ErrInvalidSpec) {
		t.Errorf("nil body: err = %v", err)
	}
}

func TestPolicyKeyArgumentsNilVersusEmpty(t *testing.T) {
	for _, give := range [][]string{nil, {}} {
		tl, err := tool.New(tool.Spec{Name: "book", Parameters: json.RawMessage(schema),
			Idempotency: &tool.Policy{Kind: tool.Idempotent, KeyArguments: give}}, ok)
		if err != nil {
			t.Fatal(err)
		}
		got := tl.Policy().KeyArguments
		if (got == nil) != (give == nil) {
			t.Errorf("KeyArguments %#v came back as %#v", give, got)
		}
		if spec := tl.Spec(); (spec.Idempotency.KeyArguments == nil) != (give == nil) {
			t.Errorf("Spec() KeyArguments %#v came back as %#v", give, spec.Idempotency.KeyArguments)
		}
	}
}

func TestDeclarationIsCopied(t *testing.T) {
	keys := []string{"flight"}
	tl, err := tool.New(tool.Spec{Name: "book", Parameters: json.RawMessage(schema),
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: keys}}, ok)
	if err != nil {
		t.Fatal(err)
	}
	keys[0] = "seats"
	if got := tl.Policy().KeyArguments[0]; got != "flight" {
		t.Fatalf("caller's slice changed the declaration: %q", got)
	}
	if got := tl.Parameters(); strings.Join(got, ",") != "flight,request_id,seats" {
		t.Fatalf("Parameters() = %v", got)
	}
}

func TestValidate(t *testing.T) {
	tl, err := tool.New(tool.Spec{Name: "book", Parameters: json.RawMessage(schema)}, ok)
	if err != nil {
		t.Fatal(err)
	}
	if err := tl.Validate(json.RawMessage(`{"flight":"BA117","seats":2}`)); err != nil {
		t.Fatalf("valid arguments refused: %v", err)
	}
	for _, bad := range []string{`{"seats":2}`, `{"flight":117}`, `{"flight":"A","seats":1.5}`, `[]`} {
		err := tl.Validate(json.RawMessage(bad))
		var ae *tool.ArgumentsError
		if !errors.As(err, &ae) || ae.Tool != "book" {
			t.Errorf("Validate(%s) = %v; want *ArgumentsError", bad, err)
		}
	}
}

// TestValidateValueAgrees holds the dispatcher's path (the value idemkey.ParseValue
// decodes in its one pass, checked by ValidateValue) to Validate's verdicts on the
// raw JSON, for spellings where the two could part: names and strings that NFC
// would change, numbers the canonical form rewrites, nesting, escapes.
func TestValidateValueAgrees(t *testing.T) {
	strict := `{"type":"object","properties":{` +
		`"caf\u00e9":{"type":"string","maxLength":4},` +
		`"n":{"type":"integer","maximum":12345678901234567890},` +
		`"f":{"type":"number","multipleOf":0.5},` +
		`"list":{"type":"array","items":{"type":"object","required":["x"]}},` +
		`"s":{"type":"string","pattern":"^a\nb$"}},` +
		`"additionalProperties":false}`
	tl, err := tool.New(tool.Spec{Name: "t", Parameters: json.RawMessage(strict)}, ok)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := map[bool]int{}
	for _, args := range []string{
		`{"caf\u00e9":"caf\u00e9"}`,
		`{"caf\u00e9":"cafe\u0301"}`, // NFD value: 5 code points, over maxLength
		`{"cafe\u0301":"x"}`,         // NFD name: not the declared property
		`{"n":12345678901234567890}`, // at the maximum, beyond float64's exact integers
		`{"n":12345678901234567891}`, // one over
		`{"n":1.0e1}`,                // an integer spelled as a fraction with an exponent
		`{"f":1.50e0}`, `{"f":1.25}`,
		`{"list":[{"x":null},{"x":[]}]}`, `{"list":[{"x":1},{}]}`,
		`{"s":"a\nb"}`, `{"s":"a\u000ab"}`, `{"s":"a\\nb"}`,
		`{}`, `{"other":1}`,
	} {
		want := tl.Validate(json.RawMessage(args))
		_, value, err := idemkey.ParseValue([]byte(args))
		if err != nil {
			t.Fatalf("ParseValue(%s): %v", args, err)
		}
		got := tl.ValidateValue(value)
		if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
			t.Errorf("%s: ValidateValue = %v, Validate = %v", args, got, want)
		}
		verdicts[want == nil]++
	}
	if verdicts[true] < 5 || verdicts[false] < 5 {
		t.Fatalf("accepted %d, refused %d: the table should hold both", verdicts[true], verdicts[false])
	}
}

type bookArgs struct {
	Flight    string `json:"flight"`
	Seats     int    `json:"seats,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

func TestTyped(t *testing.T) {
	var got bookArgs
	tl, err := tool.Typed(tool.Spec{Name: "book", Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"flight"}, CheckArguments: []string{"seats"}}},
		func(_ context.Context, tc tool.Context, a bookArgs) (string, error) {
			got = a
			return "booked " + a.Flight, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if p := strings.Join(tl.Parameters(), ","); p != "flight,request_id,seats" {
		t.Fatalf("parameters from the struct = %s", p)
	}
	if err := tl.Validate(json.RawMessage(`{"seats":2}`)); err == nil {
		t.Error("missing required flight accepted")
	}
	if err := tl.Validate(json.RawMessage(`{"flight":"A","gate":"B"}`)); err == nil {
		t.Error("unknown member accepted")
	}
	out, err := tl.Call(context.Background(), tool.Context{Tool: "book"}, json.RawMessage(`{"flight":"BA117","seats":2}`))
	if err != nil || out != "booked BA117" || got.Seats != 2 {
		t.Fatalf("Call = %q, %v, args %+v", out, err, got)
	}

	_, err = tool.Typed(tool.Spec{Name: "book", Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: []string{"Flight"}}},
		func(context.Context, tool.Context, bookArgs) (string, error) { return "", nil })
	if !errors.Is(err, tool.ErrUnknownArgument) || !strings.Contains(err.Error(), `"Flight"`) {
		t.Fatalf("Go field name accepted as key argument: %v", err)
	}
	_, err = tool.Typed(tool.Spec{Name: "count"}, func(context.Context, tool.Context, int) (string, error) { return "", nil })
	if !errors.Is(err, tool.ErrInvalidSpec) {
		t.Fatalf("non-struct arguments accepted: %v", err)
	}
}

func TestBackoff(t *testing.T) {
	r := tool.Retry{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, Multiplier: 2}
	tests := []struct {
		n        int
		jitter   float64
		want     time.Duration
		wantNote string
	}{
		{1, 0, 50 * time.Millisecond, "lower half bound"},
		{1, 0.999999, 100 * time.Millisecond, "upper bound"},
		{2, 0, 100 * time.Millisecond, "doubles"},
		{3, 0, 200 * time.Millisecond, "doubles again"},
		{10, 0, 500 * time.Millisecond, "capped"},
		{1000, 1, time.Second, "huge exponent capped"},
	}
	for _, tt := range tests {
		got := r.Backoff(tt.n, tt.jitter)
		if d := got - tt.want; d < -time.Microsecond || d > time.Microsecond {
			t.Errorf("Backoff(%d, %v) = %v, want %v (%s)", tt.n, tt.jitter, got, tt.want, tt.wantNote)
		}
	}
	if got := (tool.Retry{}).Backoff(1, 1); got != 100*time.Millisecond {
		t.Errorf("zero Retry backoff = %v, want the 100ms default", got)
	}
	if (tool.Retry{}).Attempts() != 1 || (tool.Retry{MaxAttempts: 4}).Attempts() != 4 {
		t.Error("Attempts defaults wrong")
	}
}

func TestKinds(t *testing.T) {
	for _, tt := range []struct {
		s                     string
		deduplicated, retried bool
	}{{"read_only", false, true}, {"idempotent", true, true}, {"effectful", true, false}} {
		k, err := tool.ParseKind(tt.s)
		if err != nil || string(k) != tt.s || k.Deduplicated() != tt.deduplicated || k.Retried() != tt.retried {
			t.Errorf("ParseKind(%s) = %v, %v (dedup %v, retried %v)", tt.s, k, err, k.Deduplicated(), k.Retried())
		}
	}
	if _, err := tool.ParseKind("READ_ONLY"); err == nil {
		t.Error("ParseKind accepted a misspelled kind")
	}
}

func TestNoEffect(t *testing.T) {
	base := errors.New("connection refused")
	err := fmt.Errorf("calling downstream: %w", tool.NoEffect(base))
	if !tool.IsNoEffect(err) || !errors.Is(err, base) {
		t.Fatalf("wrapped no-effect error lost: %v", err)
	}
	if tool.IsNoEffect(base) || tool.NoEffect(nil) != nil {
		t.Fatal("NoEffect misclassifies")
	}
}

func TestRegistry(t *testing.T) {
	a, _ := tool.New(tool.Spec{Name: "a"}, ok)
	b, _ := tool.New(tool.Spec{Name: "b"}, ok)
	r, err := tool.NewRegistry(b, a)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.Names(), ","); got != "a,b" {
		t.Fatalf("Names = %s", got)
	}
	if err := r.Register(a); !errors.Is(err, tool.ErrDuplicateTool) {
		t.Fatalf("duplicate registered: %v", err)
	}
	if _, ok := r.Lookup("c"); ok {
		t.Fatal("found a tool never registered")
	}
	var zero tool.Registry
	if err := zero.Register(a); err != nil {
		t.Fatalf("zero registry: %v", err)
	}
}

// TestRegistryChangesAtRunTime: tools put, replaced and removed while the
// registry serves, and a name withheld while in conflict, are seen by every
// reader at once, and each change moves the version.
// TestRegistryUnavailable: an unavailable tool stays listed but is not
// found for a call, and Get says why; a conflict on the name wins.
func TestRegistryUnavailable(t *testing.T) {
	a, _ := tool.New(tool.Spec{Name: "a"}, ok)
	r, err := tool.NewRegistry(a)
	if err != nil {
		t.Fatal(err)
	}
	version := r.Version()
	r.SetUnavailable("a", "mcp server x is down")
	if r.Version() == version {
		t.Error("SetUnavailable did not move the version")
	}
	version = r.Version()
	r.SetUnavailable("a", "mcp server x is down")
	if r.Version() != version {
		t.Error("setting the same reason again moved the version")
	}
	_, err = r.Get("a")
	var ue *tool.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, tool.ErrUnavailable) || ue.Tool != "a" || !strings.Contains(err.Error(), "x is down") {
		t.Errorf("Get of an unavailable tool: %v", err)
	}
	if msg, ok := r.Unavailable("a"); !ok || msg != "mcp server x is down" {
		t.Errorf("Unavailable(a) = %q, %v", msg, ok)
	}
	if _, found := r.Lookup("a"); found || strings.Join(r.Names(), ",") != "a" || len(r.Tools()) != 1 {
		t.Errorf("an unavailable tool: Lookup %v (want false), Names %v (want listed)", found, r.Names())
	}
	r.SetConflict("a", "two workers differ")
	if _, err := r.Get("a"); !errors.Is(err, tool.ErrToolConflict) {
		t.Errorf("Get of an unavailable tool in conflict: %v, want the conflict", err)
	}
	r.ClearConflict("a")
	version = r.Version()
	if !r.ClearUnavailable("a") || r.ClearUnavailable("a") || r.Version() == version {
		t.Error("ClearUnavailable does not report the mark it cleared, once, and move the version")
	}
	if got, err := r.Get("a"); err != nil || got != a {
		t.Errorf("Get after ClearUnavailable: %v, %v", got, err)
	}
	// Marking an unregistered name leaves it unknown.
	r.SetUnavailable("b", "down")
	if _, err := r.Get("b"); !errors.Is(err, tool.ErrUnknownTool) {
		t.Errorf("Get(b) = %v, want unknown", err)
	}
}

func TestRegistryChangesAtRunTime(t *testing.T) {
	a1, _ := tool.New(tool.Spec{Name: "a", Description: "first"}, ok)
	a2, _ := tool.New(tool.Spec{Name: "a", Description: "second"}, ok)
	b, _ := tool.New(tool.Spec{Name: "b"}, ok)
	r, err := tool.NewRegistry(b)
	if err != nil {
		t.Fatal(err)
	}
	served := func() string { return strings.Join(r.Names(), ",") }
	version := r.Version()
	moved := func(what string) {
		t.Helper()
		if v := r.Version(); v == version {
			t.Errorf("%s: the version stayed %d", what, v)
		} else {
			version = v
		}
	}

	if _, err := r.Get("a"); !errors.Is(err, tool.ErrUnknownTool) || errors.Is(err, tool.ErrToolConflict) {
		t.Fatalf("Get of a tool never registered: %v, want ErrUnknownTool", err)
	}
	if old, err := r.Put(a1); old != nil || err != nil {
		t.Fatalf("Put(a1) = %v, %v; want nothing replaced", old, err)
	}
	moved("Put")
	if old, _ := r.Put(a2); old != a1 {
		t.Fatalf("Put(a2) replaced %v, want a1", old)
	}
	moved("Put replacing")
	if got, err := r.Get("a"); err != nil || got != a2 {
		t.Fatalf("Get(a) = %v, %v; want the replacement", got, err)
	}

	r.SetConflict("a", "worker w1 and worker w2 differ in description")
	moved("SetConflict")
	r.SetConflict("a", "worker w1 and worker w2 differ in description")
	if v := r.Version(); v != version {
		t.Errorf("setting the same conflict again moved the version")
	}
	_, err = r.Get("a")
	var ce *tool.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, tool.ErrToolConflict) || errors.Is(err, tool.ErrUnknownTool) ||
		ce.Tool != "a" || !strings.Contains(err.Error(), "differ in description") {
		t.Fatalf("Get of a tool in conflict: %v, want a *ConflictError saying what differs", err)
	}
	if _, found := r.Lookup("a"); found || served() != "b" || len(r.Tools()) != 1 {
		t.Errorf("a tool in conflict is still served: Lookup %v, Names %s", found, served())
	}
	// A name may be in conflict with no tool registered under it.
	r.SetConflict("c", "two workers differ")
	moved("SetConflict of an unregistered name")
	if _, err := r.Get("c"); !errors.Is(err, tool.ErrToolConflict) {
		t.Errorf("Get(c) = %v, want a conflict", err)
	}
	if cs := r.Conflicts(); len(cs) != 2 || cs[0].Tool != "a" || cs[1].Tool != "c" {
		t.Errorf("Conflicts() = %v, want a and c, sorted", cs)
	}

	if !r.ClearConflict("a") || r.ClearConflict("a") {
		t.Error("ClearConflict does not report the conflict it ended, once")
	}
	moved("ClearConflict")
	if served() != "a,b" {
		t.Errorf("after the conflict ended, Names = %s; want a,b", served())
	}
	if !r.Remove("a") || r.Remove("a") {
		t.Error("Remove does not report the tool it removed, once")
	}
	moved("Remove")
	if _, err := r.Get("a"); !errors.Is(err, tool.ErrUnknownTool) {
		t.Errorf("Get of a removed tool: %v", err)
	}
	if _, err := r.Get("c"); !errors.Is(err, tool.ErrToolConflict) {
		t.Errorf("Remove of another name ended c's conflict: %v", err)
	}
}

func TestTimeoutAndRetry(t *testing.T) {
	spec := tool.Spec{Name: "slow", Timeout: 3 * time.Second, Retry: tool.Retry{MaxAttempts: 4, InitialBackoff: time.Second}}
	tl, err := tool.New(spec, func(context.Context, tool.Context, json.RawMessage) (string, error) { return "", nil })
	if err != nil {
		t.Fatal(err)
	}
	if tl.Timeout() != spec.Timeout || tl.Retry() != spec.Retry {
		t.Errorf("Timeout() = %v, Retry() = %+v; want %v and %+v", tl.Timeout(), tl.Retry(), spec.Timeout, spec.Retry)
	}
}

// TestContextHeaders: a context goes out as the headers a remote body
// receives, only those with a value, and comes back whole; a traceparent that
// cannot travel as a header value is left out.
func TestContextHeaders(t *testing.T) {
	c := tool.Context{IdempotencyKey: "k", Tenant: "acme", RunID: "r1", CallID: "c1", Tool: "book", Attempt: 2,
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	got := map[string]string{}
	for _, kv := range c.Headers() {
		got[kv[0]] = kv[1]
	}
	want := map[string]string{"Idempotency-Key": "k", "Toolexec-Tenant": "acme", "Toolexec-Run-Id": "r1",
		"Toolexec-Call-Id": "c1", "Toolexec-Tool": "book", "Toolexec-Attempt": "2", "traceparent": c.TraceParent}
	if !maps.Equal(got, want) {
		t.Errorf("Headers() = %v, want %v", got, want)
	}
	if back := tool.ContextFromHeaders(func(n string) string { return got[n] }); back != c {
		t.Errorf("ContextFromHeaders(Headers()) = %+v, want %+v", back, c)
	}
	bare := tool.Context{Tenant: "acme", TraceParent: "00-a\tb"}
	if h := bare.Headers(); len(h) != 1 || h[0] != [2]string{"Toolexec-Tenant", "acme"} {
		t.Errorf("Headers() of a context without key, attempt or a usable traceparent = %v", h)
	}
	if c := tool.ContextFromHeaders(func(n string) string {
		if n == "Toolexec-Attempt" {
			return "x"
		}
		return ""
	}); c.Attempt != 0 {
		t.Errorf("an attempt that is no number read as %d", c.Attempt)
	}
}
