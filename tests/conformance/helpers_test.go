package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// traceParent is a W3C traceparent the calls carry; traceID is its trace id.
const (
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
)

// callSubject returns toolexec.call.<tenant>.<tool>.<call_id>.
func callSubject(tenant, tool, callID string) string {
	return "toolexec.call." + tenant + "." + tool + "." + callID
}

// answerSubject returns toolexec.event.<tenant>.<kind>.<tool>.<run>.<call>.
func answerSubject(tenant, kind, tool, run, call string) string {
	return "toolexec.event." + tenant + "." + kind + "." + tool + "." + run + "." + call
}

// jstr returns s as a JSON string.
func jstr(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// call describes a structured call event. Its JSON is written by hand (see
// JSON), so that arguments go out byte for byte, hostile or not.
type call struct {
	Tenant, Tool, Run, ID, Source string
	Args                          string // the raw JSON of the arguments
	TraceParent                   string
}

// JSON returns the call in the CloudEvents JSON format: the attributes docs/PROTOCOL.md §4
// lists and data {"arguments": ...}.
func (c call) JSON() []byte {
	var b strings.Builder
	b.WriteString(`{"specversion":"1.0","type":` + jstr(callType))
	b.WriteString(`,"id":` + jstr(c.ID) + `,"source":` + jstr(c.Source))
	b.WriteString(`,"subject":` + jstr(c.Tool) + `,"tenant":` + jstr(c.Tenant) + `,"runid":` + jstr(c.Run))
	if c.TraceParent != "" {
		b.WriteString(`,"traceparent":` + jstr(c.TraceParent))
	}
	b.WriteString(`,"datacontenttype":"application/json","data":{"arguments":` + c.Args + `}}`)
	return []byte(b.String())
}

// Msg returns the call as a structured-mode message on its call subject.
func (c call) Msg() *nats.Msg {
	return &nats.Msg{
		Subject: callSubject(c.Tenant, c.Tool, c.ID),
		Header:  nats.Header{"Content-Type": {structured}},
		Data:    c.JSON(),
	}
}

// newCall returns a well-formed call of tool for tenant, with run r1, a
// call id, and args.
func newCall(tenant, tool, id, args string) call {
	return call{Tenant: tenant, Tool: tool, Run: "r1", ID: id, Source: "/conformance/agent", Args: args}
}

// publish stores m in TOOLEXEC_CALLS_V2 and returns the PubAck.
func publish(t *testing.T, m *nats.Msg, opts ...jetstream.PublishOpt) *jetstream.PubAck {
	t.Helper()
	ack, err := env.js.PublishMsg(ctxT(t), m, opts...)
	if err != nil {
		t.Fatalf("publishing to %s: %v", m.Subject, err)
	}
	if ack.Stream != callStream {
		t.Fatalf("the call was stored in %q, want %s", ack.Stream, callStream)
	}
	return ack
}

// subscribe subscribes to filter and makes sure the server has the interest
// before returning.
func subscribe(t *testing.T, filter string) *nats.Subscription {
	t.Helper()
	sub, err := env.nc.SubscribeSync(filter)
	if err != nil {
		t.Fatalf("subscribe %s: %v", filter, err)
	}
	if err := env.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	return sub
}

// next returns the next message on sub, failing the test after answerWait.
func next(t *testing.T, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsg(answerWait)
	if err != nil {
		t.Fatalf("no answer on %s within %v: %v\nexecutor stderr:\n%s", sub.Subject, answerWait, err, env.exec.stderr)
	}
	return m
}

// quiet fails the test if sub receives anything within d.
func quiet(t *testing.T, sub *nats.Subscription, d time.Duration) {
	t.Helper()
	if m, err := sub.NextMsg(d); err == nil {
		t.Fatalf("unexpected message on %s: %s %s", sub.Subject, m.Subject, m.Data)
	}
}

// answer is an answer event as it came off the wire.
type answer struct {
	Subject string
	Header  nats.Header
	Attrs   map[string]json.RawMessage // the event's top-level members
	Data    map[string]json.RawMessage // its data's members
}

// str returns the string attribute name, or "" when absent; it fails the test
// when the attribute is present but not a string.
func (a answer) str(t *testing.T, name string) string {
	t.Helper()
	raw, ok := a.Attrs[name]
	if !ok {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: attribute %s is %s, not a string", a.Subject, name, raw)
	}
	return s
}

// dataStr returns the string member name of the data, or "" when absent.
func (a answer) dataStr(t *testing.T, name string) string {
	t.Helper()
	raw, ok := a.Data[name]
	if !ok {
		return ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: data member %s is %s, not a string", a.Subject, name, raw)
	}
	return s
}

// ceAttributes are the CloudEvents 1.0 context attributes and data members an
// answer may have besides its extensions.
var ceAttributes = []string{"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "dataschema", "data"}

// answerExtensions are the extensions docs/PROTOCOL.md §5 gives answers (the tracing
// extension's two included).
var answerExtensions = []string{"tenant", "runid", "callid", "idempotencykey", "traceparent", "tracestate"}

// readAnswer parses m as a structured-mode answer event and checks what every
// answer must satisfy: the JSON event format, specversion 1.0, an id and a
// source, only known extensions, JSON data without duplicate members, and the
// Nats-Msg-Id header.
func readAnswer(t *testing.T, m *nats.Msg) answer {
	t.Helper()
	a := answer{Subject: m.Subject, Header: m.Header}
	if ct := m.Header.Get("Content-Type"); ct != structured {
		t.Fatalf("%s: Content-Type %q, want %q (answers are structured unless configured otherwise)", m.Subject, ct, structured)
	}
	if m.Header.Get("Nats-Msg-Id") == "" {
		t.Errorf("%s: the answer has no Nats-Msg-Id", m.Subject)
	}
	attrs, dup, err := objectMembers(m.Data)
	if err != nil || dup != "" {
		t.Fatalf("%s: the answer is not a JSON object without duplicates (dup %q): %v\n%s", m.Subject, dup, err, m.Data)
	}
	a.Attrs = attrs
	for name := range attrs {
		if !slices.Contains(ceAttributes, name) && !slices.Contains(answerExtensions, name) {
			t.Errorf("%s: unexpected attribute %q", m.Subject, name)
		}
	}
	if v := a.str(t, "specversion"); v != "1.0" {
		t.Errorf("%s: specversion %q", m.Subject, v)
	}
	if a.str(t, "id") == "" || a.str(t, "source") == "" {
		t.Errorf("%s: id or source missing", m.Subject)
	}
	if ct := a.str(t, "datacontenttype"); ct != "" && ct != "application/json" {
		t.Errorf("%s: datacontenttype %q", m.Subject, ct)
	}
	data, dup, err := objectMembers(attrs["data"])
	if err != nil || dup != "" {
		t.Fatalf("%s: data is not a JSON object without duplicates (dup %q): %v\n%s", m.Subject, dup, err, m.Data)
	}
	a.Data = data
	return a
}

// want is what a test expects of one answer.
type want struct {
	Tenant, Kind, Tool, Run, Call string
	// Tool, Run and Call are the tokens of the answer subject. For a rejection,
	// an empty Tool or Run means the call had none usable: the subject carries
	// a placeholder token and the event no subject attribute or runid. An empty
	// Call means the call had no usable id: the subject carries a stand-in, which
	// the callid extension, when present, repeats.
	Key         string // the idempotencykey extension; empty: absent
	TraceParent string // the caller's traceparent, to be carried by the answer
	Code        string // failed and rejected
	Outcome     *string
	Reason      string
	BodyEntered *bool
}

// checkAnswer reads m and checks it against w and docs/PROTOCOL.md §5: the subject, the
// type, the extensions, and the data members each kind has, which must also
// validate against the published schema of the kind.
func checkAnswer(t *testing.T, m *nats.Msg, w want) answer {
	t.Helper()
	a := readAnswer(t, m)
	tokens := strings.Split(m.Subject, ".")
	if len(tokens) != 7 || tokens[0] != "toolexec" || tokens[1] != "event" {
		t.Fatalf("answer subject %q is not toolexec.event.<tenant>.<kind>.<tool>.<run_id>.<call_id>", m.Subject)
	}
	wantTool, wantRun, wantCall := w.Tool, w.Run, w.Call
	if w.Kind == "rejected" {
		if wantTool == "" {
			wantTool = tokens[4]
			if !validToken(wantTool) {
				t.Errorf("%s: the placeholder for a missing tool %q is not a token", m.Subject, wantTool)
			}
		}
		if wantRun == "" {
			wantRun = tokens[5]
			if !validToken(wantRun) {
				t.Errorf("%s: the placeholder for a missing run id %q is not a token", m.Subject, wantRun)
			}
		}
		if wantCall == "" {
			wantCall = tokens[6]
			if !validToken(wantCall) {
				t.Errorf("%s: the stand-in call id %q is not a token", m.Subject, wantCall)
			}
		}
	}
	if got, exp := m.Subject, answerSubject(w.Tenant, w.Kind, wantTool, wantRun, wantCall); got != exp {
		t.Errorf("answer subject %q, want %q", got, exp)
	}
	if got := a.str(t, "type"); got != typePrefix+w.Kind {
		t.Errorf("%s: type %q, want %q", m.Subject, got, typePrefix+w.Kind)
	}
	if got := a.str(t, "tenant"); got != w.Tenant {
		t.Errorf("%s: tenant extension %q, want %q", m.Subject, got, w.Tenant)
	}
	checkOptional := func(name, got, exp string, required bool) {
		t.Helper()
		_, present := a.Attrs[name]
		switch {
		case exp != "" && got != exp:
			t.Errorf("%s: %s %q, want %q", m.Subject, name, got, exp)
		case exp == "" && required && !present:
			t.Errorf("%s: %s missing", m.Subject, name)
		}
	}
	checkOptional("runid", a.str(t, "runid"), w.Run, w.Kind != "rejected")
	if w.Run == "" && w.Kind == "rejected" {
		if _, ok := a.Attrs["runid"]; ok {
			t.Errorf("%s: a call without a usable run id has a runid extension", m.Subject)
		}
	}
	if w.Kind == "rejected" && w.Call == "" {
		if got := a.str(t, "callid"); got != "" && got != wantCall {
			t.Errorf("%s: callid %q disagrees with the subject's %q", m.Subject, got, wantCall)
		}
	} else if got := a.str(t, "callid"); got != wantCall {
		t.Errorf("%s: callid %q, want %q", m.Subject, got, wantCall)
	}
	if got := a.str(t, "idempotencykey"); got != w.Key {
		t.Errorf("%s: idempotencykey %q, want %q", m.Subject, got, w.Key)
	}
	if w.TraceParent != "" {
		if got := a.str(t, "traceparent"); !sameTrace(got, w.TraceParent) {
			t.Errorf("%s: traceparent %q, want the trace of %q", m.Subject, got, w.TraceParent)
		}
	}
	// docs/PROTOCOL.md §5 makes an answer's subject attribute optional; when there
	// is one, it names the tool (none for a call without a usable tool).
	if s, ok := a.Attrs["subject"]; ok && a.str(t, "subject") != w.Tool {
		t.Errorf("%s: subject attribute %s, want %q", m.Subject, s, w.Tool)
	}

	// Data: the members docs/PROTOCOL.md §5 lists for the kind, and the kind's schema.
	required := map[string][]string{
		"completed":     {"tool", "outcome"},
		"deduplicated":  {"tool", "outcome"},
		"failed":        {"tool", "error"},
		"rejected":      {"error"},
		"indeterminate": {"tool", "reason", "body_entered"},
	}[w.Kind]
	for _, name := range required {
		if _, ok := a.Data[name]; !ok {
			t.Errorf("%s: data has no %q: %s", m.Subject, name, a.Attrs["data"])
		}
	}
	if got := a.dataStr(t, "tool"); got != w.Tool {
		t.Errorf("%s: data.tool %q, want %q", m.Subject, got, w.Tool)
	}
	if w.Code != "" && a.dataStr(t, "code") != w.Code {
		t.Errorf("%s: data.code %q, want %q (error: %s)", m.Subject, a.dataStr(t, "code"), w.Code, a.dataStr(t, "error"))
	}
	if w.Outcome != nil && a.dataStr(t, "outcome") != *w.Outcome {
		t.Errorf("%s: data.outcome %q, want %q", m.Subject, a.dataStr(t, "outcome"), *w.Outcome)
	}
	if w.Reason != "" && a.dataStr(t, "reason") != w.Reason {
		t.Errorf("%s: data.reason %q, want %q", m.Subject, a.dataStr(t, "reason"), w.Reason)
	}
	if w.BodyEntered != nil {
		var got bool
		if err := json.Unmarshal(a.Data["body_entered"], &got); err != nil || got != *w.BodyEntered {
			t.Errorf("%s: data.body_entered %s, want %v", m.Subject, a.Data["body_entered"], *w.BodyEntered)
		}
	}
	if err := validateData(w.Kind, a.Attrs["data"]); err != nil {
		t.Errorf("%s: data does not match schemas/events/%s.json: %v", m.Subject, w.Kind, err)
	}
	return a
}

// sameTrace reports whether two traceparent values carry the same trace id.
func sameTrace(a, b string) bool {
	pa, pb := strings.Split(a, "-"), strings.Split(b, "-")
	return len(pa) == 4 && len(pb) == 4 && pa[1] == pb[1]
}

// validToken reports whether s matches [A-Za-z0-9_-]{1,128} (docs/PROTOCOL.md §2).
func validToken(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// objectMembers reads data as one JSON object and returns its members and the
// first name that appears twice.
func objectMembers(data []byte) (map[string]json.RawMessage, string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, "", err
	}
	if tok != json.Delim('{') {
		return nil, "", errors.New("not an object")
	}
	out := map[string]json.RawMessage{}
	dup := ""
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, "", err
		}
		name := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, "", err
		}
		if _, seen := out[name]; seen && dup == "" {
			dup = name
		}
		out[name] = raw
	}
	if _, err := dec.Token(); err != nil {
		return nil, "", err
	}
	if _, err := dec.Token(); err == nil {
		return nil, "", errors.New("trailing data")
	}
	return out, dup, nil
}

var (
	schemasOnce sync.Once
	schemasErr  error
	schemaByKey map[string]*jsonschema.Schema
)

// validateData validates an answer's data against schemas/events/<kind>.json as
// published in the repository.
func validateData(kind string, data []byte) error {
	schemasOnce.Do(func() {
		schemaByKey = map[string]*jsonschema.Schema{}
		c := jsonschema.NewCompiler()
		for _, k := range []string{"completed", "deduplicated", "indeterminate", "failed", "rejected"} {
			path, err := filepath.Abs(filepath.Join("..", "..", "schemas", "events", k+".json"))
			if err != nil {
				schemasErr = err
				return
			}
			s, err := c.Compile(path)
			if err != nil {
				schemasErr = err
				return
			}
			schemaByKey[k] = s
		}
	})
	if schemasErr != nil {
		return schemasErr
	}
	s, ok := schemaByKey[kind]
	if !ok {
		return errors.New("no schema for kind " + kind)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// emitterKey runs `emitter key` (docs/PROTOCOL.md §6) and returns the key it prints.
func emitterKey(t *testing.T, tenant, run, tool, args string, keyArgs ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.bin, "emitter"), "key", "--tenant", tenant, "--run", run, "--tool", tool,
		"--args", args, "--key-arguments", strings.Join(keyArgs, ","))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("emitter key: %v\n%s", err, stderr.String())
	}
	key := strings.TrimSuffix(string(out), "\n")
	if len(key) != 64 || strings.Contains(key, "\n") {
		t.Fatalf("emitter key printed %q", out)
	}
	return key
}

// streamSubjects returns the number of messages stored in stream per subject
// matching filter.
func streamSubjects(t *testing.T, stream, filter string) map[string]uint64 {
	t.Helper()
	s, err := env.js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	info, err := s.Info(ctxT(t), jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatalf("stream %s info: %v", stream, err)
	}
	if info.State.Subjects == nil {
		return map[string]uint64{}
	}
	return info.State.Subjects
}

// kvTraces returns the subjects of the idempotency bucket's stream that hold
// anything for tenant: live records, and the markers a deleted or purged one
// leaves.
func kvTraces(t *testing.T, tenant string) map[string]uint64 {
	t.Helper()
	return streamSubjects(t, "KV_"+kvBucket, "$KV."+kvBucket+"."+tenant+".>")
}

// kvKeys returns the live keys of the idempotency bucket under tenant
// (<tenant>.<digest>, docs/PROTOCOL.md §3).
func kvKeys(t *testing.T, tenant string) []string {
	t.Helper()
	kv, err := env.js.KeyValue(ctxT(t), kvBucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", kvBucket, err)
	}
	l, err := kv.ListKeysFiltered(ctxT(t), tenant+".>")
	if err != nil {
		t.Fatalf("listing keys: %v", err)
	}
	var keys []string
	for k := range l.Keys() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func ptr[T any](v T) *T { return &v }

// writeFile writes a file under the test's temp dir and returns its path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
