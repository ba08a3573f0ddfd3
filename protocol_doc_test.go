package toolexec_test

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/nats-io/nats.go/micro"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/protodoc"
	"github.com/tesserix/toolexec/schemas"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
	"github.com/tesserix/toolexec/worker"
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

// protocolDoc is the page the tests below hold to the code.
const protocolDoc = "docs/PROTOCOL.md"

// TestProtocolDocAnswers holds the answer kinds of docs/PROTOCOL.md §5 to the
// code. The kind table has one row per kind of events.Kinds(), and each row's
// data cell names exactly the properties of the kind's schema
// (schemas/events/<kind>.json); a member whose note says when it is there is
// one the schema does not require, and the others are ones it does. The reason
// table names exactly events.Reasons(), and the rejection and failure code
// subsections exactly events.RejectionCodes() and events.FailureCodes().
func TestProtocolDocAnswers(t *testing.T) {
	sec := protodoc.Read(t, protocolDoc).Section(t, 5)

	kinds := protodoc.FindTable(t, sec, "kind", "means", "data", "emitter exit status")
	var rows []string
	for _, row := range kinds.Rows {
		if len(row) != len(kinds.Header) {
			t.Fatalf("§5: the kind table's row %q has %d cells, want %d", row, len(row), len(kinds.Header))
		}
		kind := oneName(t, "§5: the kind cell", row[0])
		rows = append(rows, kind)
		props, required := schemaMembers(t, kind)
		var named, always []string
		for _, m := range protodoc.Members(row[kinds.Column(t, "data")]) {
			named = append(named, m.Name)
			if !saysWhen(m.Note) {
				always = append(always, m.Name)
			}
		}
		sameSet(t, "§5: the members of the data of "+kind, named, "the properties of schemas/events/"+kind+".json", props)
		sameSet(t, "§5: the members of the data of "+kind+" without a note saying when", always,
			"the properties schemas/events/"+kind+".json requires", required)
	}
	sameSet(t, "§5: the kinds of the kind table", rows, "events.Kinds()", strs(events.Kinds()))

	reasons := protodoc.FindTable(t, sec, "reason", "what happened", "what a caller does")
	var named []string
	for _, row := range reasons.Rows {
		named = append(named, oneName(t, "§5: the reason cell", row[0]))
	}
	sameSet(t, "§5: the reasons of the reason table", named, "events.Reasons()", strs(events.Reasons()))

	sameSet(t, "§5: the rejection codes", protodoc.Names(protodoc.Subsection(t, sec, "Rejection codes (`rejected`)")),
		"events.RejectionCodes()", strs(events.RejectionCodes()))
	sameSet(t, "§5: the failure codes", protodoc.Names(protodoc.Subsection(t, sec, "Failure codes (`failed`)")),
		"events.FailureCodes()", strs(events.FailureCodes()))
}

// saysWhen reports whether text, a member's note or an attribute's value,
// says when the member or attribute is there: it has the word "when".
func saysWhen(note string) bool { return whenWord.MatchString(note) }

var whenWord = regexp.MustCompile(`\bwhen\b`)

// schemaMembers returns the properties of the embedded schema of kind, and
// those it requires.
func schemaMembers(t *testing.T, kind string) (props, required []string) {
	t.Helper()
	b, err := schemas.EventSchema(kind)
	if err != nil {
		t.Fatalf("schemas/events/%s.json: %v", kind, err)
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("schemas/events/%s.json: %v", kind, err)
	}
	return slices.Collect(maps.Keys(s.Properties)), s.Required
}

// oneName returns the one member cell names, failing the test otherwise.
func oneName(t *testing.T, what, cell string) string {
	t.Helper()
	names := protodoc.Names(cell)
	if len(names) != 1 {
		t.Fatalf("%s %q names %q, want one name in backticks", what, cell, names)
	}
	return names[0]
}

// sameSet fails the test unless got, what the page says, and want, what the
// code says (source), hold the same strings, and reports those only one side
// has.
func sameSet(t *testing.T, what string, got []string, source string, want []string) {
	t.Helper()
	missing, extra := setDiff(want, got), setDiff(got, want)
	if len(missing) > 0 || len(extra) > 0 {
		t.Errorf("%s differ from %s: the page lacks %q and has %q besides", what, source, missing, extra)
	}
}

// setDiff returns the strings of a that b lacks, sorted and without repeats.
func setDiff(a, b []string) []string {
	var out []string
	for _, s := range a {
		if !slices.Contains(b, s) && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return sorted(out)
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

// strs returns the strings of a slice of a string type.
func strs[S ~string](s []S) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = string(v)
	}
	return out
}

// TestProtocolDocAttributes holds the attribute tables of docs/PROTOCOL.md §4
// (a call) and §5 (an answer) to the events wire.CallEvent and
// wire.AnswerEvent make: each table names exactly the attributes, extensions
// and data member of an event with every field set. Of §4's, those a call
// without a time or a trace lacks say that they are optional; of §5's, those
// that the least answer an executor makes lacks (a rejection of a call that
// named no usable tool or run, stamped with its time, as every answer is, and
// with a stand-in call id) are exactly those that say when they are there. An
// attribute whose value the table gives first, in backticks, has that value
// (the answer's type with <kind> in its kind's place).
func TestProtocolDocAttributes(t *testing.T) {
	doc := protodoc.Read(t, protocolDoc)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

	t.Run("§4 call", func(t *testing.T) {
		call := events.Call{Tenant: "acme", RunID: "run_1", CallID: "call_1", Tool: "book", Source: "/agents/a",
			Arguments: json.RawMessage(`{"flight":"BA117"}`)}
		least := callAttributes(t, call)
		call.Time, call.TraceParent, call.TraceState = now, traceParent, "vendor=1"
		full := callAttributes(t, call)

		rows := attributeRows(t, doc.Section(t, 4))
		sameSet(t, "§4: the attributes of the call table", slices.Collect(maps.Keys(rows)),
			"wire.CallEvent's event with every field set", slices.Collect(maps.Keys(full)))
		for name := range full {
			if _, ok := least[name]; !ok && rows[name] != nil && !strings.Contains(rows[name].value, "optional") {
				t.Errorf("§4: %s, which a call without a time or a trace lacks, is not said to be optional: %q", name, rows[name].value)
			}
		}
		checkValues(t, "§4", rows, full, "")
	})

	t.Run("§5 answer", func(t *testing.T) {
		answer := events.Answer{Kind: events.KindCompleted, Tenant: "acme", RunID: "run_1", CallID: "call_1", Tool: "book",
			Key: strings.Repeat("ab", 32), Outcome: "PNR-1", TraceParent: traceParent, TraceState: "vendor=1", Time: now}
		full := answerAttributes(t, answer)
		least := answerAttributes(t, events.Answer{Kind: events.KindRejected, Tenant: "acme",
			CallID: bus.StandInCallID(1), Code: events.CodeBadToken, Error: "no usable tool", Time: now})

		rows := attributeRows(t, doc.Section(t, 5))
		sameSet(t, "§5: the attributes of the answer table", slices.Collect(maps.Keys(rows)),
			"wire.AnswerEvent's event with every field set", slices.Collect(maps.Keys(full)))
		var when []string
		for name, r := range rows {
			if saysWhen(r.value) {
				when = append(when, name)
			}
		}
		sameSet(t, "§5: the attributes whose value says when they are there", when,
			"the attributes the least answer lacks", setDiff(slices.Collect(maps.Keys(full)), slices.Collect(maps.Keys(least))))
		checkValues(t, "§5", rows, full, string(answer.Kind))
	})
}

// attributeRow is one attribute of a table headed | attribute | value |.
type attributeRow struct {
	value string // the value cell
}

// attributeRows reads the table headed | attribute | value | of sec: each
// attribute a row names in its first cell, and "data" for the row of the
// event's data, whose first cell is that word.
func attributeRows(t *testing.T, sec string) map[string]*attributeRow {
	t.Helper()
	tb := protodoc.FindTable(t, sec, "attribute", "value")
	rows := map[string]*attributeRow{}
	for _, row := range tb.Rows {
		if len(row) != 2 {
			t.Fatalf("the attribute table's row %q has %d cells, want 2", row, len(row))
		}
		names := protodoc.Names(row[0])
		if row[0] == "data" {
			names = []string{"data"}
		}
		if len(names) == 0 {
			t.Fatalf("the attribute table's row %q names no attribute", row)
		}
		for _, n := range names {
			if rows[n] != nil {
				t.Errorf("the attribute table names %s twice", n)
			}
			rows[n] = &attributeRow{value: row[1]}
		}
	}
	return rows
}

// checkValues checks that each attribute but the data whose value cell starts
// with a value in backticks has that value in attrs, with kind in the place of
// "<kind>".
func checkValues(t *testing.T, sec string, rows map[string]*attributeRow, attrs map[string]json.RawMessage, kind string) {
	t.Helper()
	n := 0
	for name, r := range rows {
		if name == "data" || !strings.HasPrefix(r.value, "`") {
			continue
		}
		n++
		want := strings.ReplaceAll(protodoc.CodeSpans(r.value)[0], "<kind>", kind)
		var got string
		if err := json.Unmarshal(attrs[name], &got); err != nil || got != want {
			t.Errorf("%s: %s is %s, the page says %q", sec, name, attrs[name], want)
		}
	}
	if n == 0 {
		t.Errorf("%s: the attribute table gives no value in backticks", sec)
	}
}

// callAttributes returns the members of wire.CallEvent's event for c in the
// JSON event format: its context attributes, its extensions and its data.
func callAttributes(t *testing.T, c events.Call) map[string]json.RawMessage {
	t.Helper()
	e, err := wire.CallEvent(c)
	if err != nil {
		t.Fatal(err)
	}
	return eventAttributes(t, e)
}

// answerAttributes returns the members of wire.AnswerEvent's event for a, as
// callAttributes does for a call.
func answerAttributes(t *testing.T, a events.Answer) map[string]json.RawMessage {
	t.Helper()
	e, err := wire.AnswerEvent(a, bus.DefaultAnswerSource)
	if err != nil {
		t.Fatal(err)
	}
	return eventAttributes(t, e)
}

// eventAttributes returns the members of e in the JSON event format.
func eventAttributes(t *testing.T, e event.Event) map[string]json.RawMessage {
	t.Helper()
	b, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestProtocolDocSubjects holds the subjects of docs/PROTOCOL.md §3 and §7 to
// package wire's and admin's: the subject column of §3's table gives exactly
// the subjects their functions build for placeholder tokens (<tenant>, ...),
// and its streams are wire's; the admin row's note names the last tokens of
// the admin subjects; §7's answer filter is wire.AnswerFilter for any run.
func TestProtocolDocSubjects(t *testing.T) {
	doc := protodoc.Read(t, protocolDoc)
	tb := protodoc.FindTable(t, doc.Section(t, 3), "what", "subject", "kept by")
	var subjects, streams, adminNames []string
	for _, row := range tb.Rows {
		if len(row) != len(tb.Header) {
			t.Fatalf("§3: the row %q has %d cells, want %d", row, len(row), len(tb.Header))
		}
		ms := protodoc.Members(row[tb.Column(t, "subject")])
		if len(ms) != 1 {
			t.Fatalf("§3: the subject cell of %q names %d subjects, want 1", row[0], len(ms))
		}
		subjects = append(subjects, ms[0].Name)
		if ms[0].Name == admin.Subjects {
			adminNames = protodoc.CodeSpans(ms[0].Note)
		}
		streams = append(streams, protodoc.Names(row[tb.Column(t, "kept by")])...)
	}
	sameSet(t, "§3: the subjects", subjects, "package wire's and admin's", []string{
		wire.CallSubject("<tenant>", "<tool>", "<call_id>"),
		wire.EventSubject("<tenant>", "<kind>", "<tool>", "<run_id>", "<call_id>"),
		wire.AnswerFilter("<tenant>", "<tool>", "<run_id>", "<call_id>"),
		wire.KindSubjects("<kind>"),
		wire.HistorySubject("<tenant>"),
		wire.CatalogSubject("<tenant>"),
		admin.Subjects,
		wire.BodySubject("<tool>"),
		wire.WorkerInfoSubject,
	})
	sameSet(t, "§3: the streams", streams, "package wire's", []string{wire.CallStream, wire.EventStream})
	var last []string
	for _, s := range []string{admin.ForgetSubject, admin.InspectSubject, admin.ListSubject, admin.ResolveSubject, wire.AdminHistorySubject} {
		last = append(last, s[strings.LastIndexByte(s, '.')+1:])
	}
	sameSet(t, "§3: the admin subjects' last tokens", adminNames, "the admin subjects", last)

	if spans := protodoc.CodeSpans(doc.Section(t, 7)); len(spans) == 0 || spans[0] != wire.AnswerFilter("<tenant>", "<tool>", "*", "<call_id>") {
		t.Errorf("§7 starts with the filter %q, want wire.AnswerFilter for any run, %q", spans[:min(1, len(spans))],
			wire.AnswerFilter("<tenant>", "<tool>", "*", "<call_id>"))
	}
}

// TestProtocolDocMessages holds the JSON messages of docs/PROTOCOL.md §7
// (history), §8 (catalog) and §9 (administration) to the Go types that carry
// them: each object's row names exactly the json names of its type's fields,
// and the members of a declaration that §8 names before "where they apply" are
// exactly those bus.ToolDecl always writes. §9's table has a row for each
// admin subject of package admin, naming its request's and its reply's
// members.
func TestProtocolDocMessages(t *testing.T) {
	doc := protodoc.Read(t, protocolDoc)
	// objects checks the table of sec against types and returns its members
	// cells by object.
	objects := func(t *testing.T, sec int, types map[string]reflect.Type) map[string]string {
		t.Helper()
		tb := protodoc.FindTable(t, doc.Section(t, sec), "object", "members")
		cells := map[string]string{}
		for _, row := range tb.Rows {
			if len(row) != 2 {
				t.Fatalf("§%d: the row %q has %d cells, want 2", sec, row, len(row))
			}
			object, _, _ := strings.Cut(row[0], ",")
			cells[object] = row[1]
			typ, ok := types[object]
			if !ok {
				continue
			}
			sameSet(t, fmt.Sprintf("§%d: the members of the %s", sec, object), protodoc.Names(row[1]),
				"the json names of "+typ.String(), jsonNames(typ, false))
			if before, _, ok := strings.Cut(row[1], "where they apply"); ok {
				sameSet(t, fmt.Sprintf("§%d: the members of the %s before \"where they apply\"", sec, object), protodoc.Names(before),
					"the fields of "+typ.String()+" that are never left out", jsonNames(typ, true))
			}
		}
		sameSet(t, fmt.Sprintf("§%d: the objects", sec), slices.Collect(maps.Keys(cells)), "this test's", slices.Collect(maps.Keys(types)))
		return cells
	}
	t.Run("§7 history", func(t *testing.T) {
		objects(t, 7, map[string]reflect.Type{
			"request": reflect.TypeFor[bus.HistoryRequest](), "reply": reflect.TypeFor[bus.HistoryResponse](),
			"event": reflect.TypeFor[bus.HistoryEvent](), "error": reflect.TypeFor[bus.HistoryError](),
		})
	})
	t.Run("§8 catalog", func(t *testing.T) {
		cells := objects(t, 8, map[string]reflect.Type{
			"request": reflect.TypeFor[bus.CatalogRequest](), "reply": reflect.TypeFor[bus.CatalogResponse](),
			"declaration": reflect.TypeFor[bus.ToolDecl](), "error": reflect.TypeFor[bus.CatalogError](),
		})
		if !strings.Contains(cells["declaration"], "where they apply") {
			t.Errorf("§8: the declaration does not say which members it has where they apply: %q", cells["declaration"])
		}
	})
	t.Run("§9 admin", func(t *testing.T) {
		types := map[string][2]reflect.Type{
			admin.InspectSubject: {reflect.TypeFor[admin.InspectRequest](), reflect.TypeFor[admin.InspectResponse]()},
			admin.ListSubject:    {reflect.TypeFor[admin.ListRequest](), reflect.TypeFor[admin.ListResponse]()},
			admin.ResolveSubject: {reflect.TypeFor[admin.ResolveRequest](), reflect.TypeFor[admin.ResolveResponse]()},
			admin.ForgetSubject:  {reflect.TypeFor[admin.ForgetRequest](), reflect.TypeFor[admin.ForgetResponse]()},
		}
		tb := protodoc.FindTable(t, doc.Section(t, 9), "subject", "request", "reply")
		var subjects []string
		for _, row := range tb.Rows {
			if len(row) != 3 {
				t.Fatalf("§9: the row %q has %d cells, want 3", row, len(row))
			}
			subject := oneName(t, "§9: the subject cell", row[0])
			subjects = append(subjects, subject)
			typ, ok := types[subject]
			if !ok {
				continue
			}
			for i, what := range []string{"request", "reply"} {
				sameSet(t, "§9: the members of the "+what+" on "+subject, protodoc.Names(row[1+i]),
					"the json names of "+typ[i].String(), jsonNames(typ[i], false))
			}
		}
		sameSet(t, "§9: the subjects", subjects, "package admin's", slices.Collect(maps.Keys(types)))
	})
}

// jsonNames returns the names typ's fields have in JSON; with always, only
// those of fields never left out (no omitempty or omitzero).
func jsonNames(typ reflect.Type, always bool) []string {
	var out []string
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		omitted := slices.ContainsFunc(strings.Split(opts, ","), func(o string) bool { return o == "omitempty" || o == "omitzero" })
		if !always || !omitted {
			out = append(out, name)
		}
	}
	return out
}

// TestProtocolDocBodies holds docs/PROTOCOL.md §12 to the packages that speak
// it: its header table names exactly the headers of a body's request
// (package natstool's), and it names the subjects, the service, the queue
// group, the metadata key, the error headers and the codes a worker replies
// with as packages wire, natstool and worker spell them.
func TestProtocolDocBodies(t *testing.T) {
	sec := protodoc.Read(t, protocolDoc).Section(t, 12)
	tb := protodoc.FindTable(t, sec, "header", "value")
	var named []string
	for _, row := range tb.Rows {
		named = append(named, oneName(t, "§12: the header cell", row[0]))
	}
	sameSet(t, "§12: the request's headers", named, "package natstool's", []string{
		tool.HeaderIdempotencyKey, tool.HeaderTenant, tool.HeaderRunID, tool.HeaderCallID,
		tool.HeaderTool, tool.HeaderAttempt, tool.HeaderTraceParent,
	})
	for _, name := range []string{wire.BodySubject("<tool>"), wire.BodyQueue, wire.WorkerService, wire.DeclarationMetadata,
		micro.ErrorCodeHeader, micro.ErrorHeader, natstool.CodeNoEffect, worker.CodeToolError} {
		if !slices.Contains(protodoc.CodeSpans(sec), name) {
			t.Errorf("§12 does not name %q", name)
		}
	}
}

// TestProtocolDocInteractions holds docs/PROTOCOL.md §13 to package wire: its
// subject table names exactly the subjects wire builds, its object table the
// json names of the messages (the take and the answer being the two forms of
// wire.Respond, the reply's error wire.RespondError), and it names the
// header, the capabilities, the methods, the reply codes and the notes'
// kinds and event types as wire spells them.
func TestProtocolDocInteractions(t *testing.T) {
	sec := protodoc.Read(t, protocolDoc).Section(t, 13)
	subjects := protodoc.FindTable(t, sec, "what", "subject", "who")
	var named []string
	for _, row := range subjects.Rows {
		named = append(named, oneName(t, "§13: the subject cell", row[subjects.Column(t, "subject")]))
	}
	sameSet(t, "§13: the subjects", named, "package wire's", []string{
		wire.InteractSubject("<tenant>", "<tool>", "<call_id>"),
		wire.RespondSubject("<tenant>", "<tool>", "<call_id>"),
		strings.Replace(wire.NoteSubject("<kind>", "<tenant>", "<tool>", "<run_id>", "<call_id>", 0), ".0", ".<seq>", 1),
	})
	msgs := protodoc.FindTable(t, sec, "object", "members")
	cells := map[string][]string{}
	for _, row := range msgs.Rows {
		cells[row[0]] = protodoc.Names(row[1])
	}
	respond := jsonNames(reflect.TypeFor[wire.Respond](), false)
	want := map[string][]string{
		"request": jsonNames(reflect.TypeFor[wire.Ask](), false),
		"take":    {"id", "take"},
		"answer":  slices.DeleteFunc(slices.Clone(respond), func(s string) bool { return s == "take" }),
		"reply":   append(jsonNames(reflect.TypeFor[wire.RespondReply](), false), jsonNames(reflect.TypeFor[wire.RespondError](), false)...),
	}
	for object, names := range want {
		sameSet(t, "§13: the members of the "+object, cells[object], "package wire's", names)
	}
	for _, name := range []string{wire.InteractionsHeader, wire.DeadlineHeader, wire.CanElicit, wire.CanSample,
		wire.MethodElicit, wire.MethodSample, wire.RespondTaken, wire.RespondBadRequest, wire.NoteProgress, wire.NoteLog,
		wire.NoteTypePrefix + wire.NoteProgress, wire.NoteTypePrefix + wire.NoteLog,
		wire.NoteFilter("<tenant>", "<tool>", "<call_id>")} {
		if !slices.Contains(protodoc.CodeSpans(sec), name) {
			t.Errorf("§13 does not name %q", name)
		}
	}
}
