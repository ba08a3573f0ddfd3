package wire_test

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/tool"
)

// A request or reply of a service, and the codec it travels with: the
// catalog and history services (package bus) encode with
// github.com/go-json-experiment/json, the admin service and the interaction
// relay with encoding/json, each as the service's own code calls it.
type serviceMsg struct {
	name  string // the golden's name
	value any    // a pointer to the value written
	codec codec
}

type codec struct {
	marshal func(v any) ([]byte, error)
	// strict reads data into v, refusing a member v does not have.
	strict func(data []byte, v any) error
}

var (
	v2Codec = codec{
		// Deterministic orders a map's members (a stored event's headers),
		// so that -update writes the same file twice; the services write them
		// in any order.
		marshal: func(v any) ([]byte, error) { return jsonv2.Marshal(v, jsonv2.Deterministic(true)) },
		strict: func(data []byte, v any) error {
			return jsonv2.Unmarshal(data, v, jsonv2.RejectUnknownMembers(true))
		},
	}
	stdCodec = codec{
		marshal: stdjson.Marshal,
		strict: func(data []byte, v any) error {
			dec := stdjson.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				return err
			}
			if _, err := dec.Token(); !errors.Is(err, io.EOF) {
				return errors.New("data after the value")
			}
			return nil
		},
	}
)

// checkServiceMsgs holds each message to its golden both ways: the code
// writes the golden (as parsed JSON), and the code's type reads the golden,
// every member of it, and writes it back unchanged.
func checkServiceMsgs(t *testing.T, msgs []serviceMsg) {
	t.Helper()
	for _, sm := range msgs {
		t.Run(sm.name, func(t *testing.T) {
			got, err := sm.codec.marshal(sm.value)
			if err != nil {
				t.Fatal(err)
			}
			checkJSON(t, sm.name, got)
			if *update {
				return
			}
			golden := readGolden(t, sm.name)
			// A fresh value of the same type, read from the golden.
			fresh := newOfSameType(sm.value)
			if err := sm.codec.strict(golden, fresh); err != nil {
				t.Fatalf("the code no longer reads golden %s: %v\n%s", sm.name, err, ruleText())
			}
			again, err := sm.codec.marshal(fresh)
			if err != nil {
				t.Fatal(err)
			}
			if changes := jsonChanges(golden, again); len(changes) > 0 {
				t.Errorf("the code reads golden %s otherwise than it is written:\n  %v\n%s", sm.name, changes, ruleText())
			}
		})
	}
}

// TestCatalogGoldens: the catalog's requests, a page of declarations as
// bus.DeclOf makes them, and an error reply.
func TestCatalogGoldens(t *testing.T) {
	book, err := tool.New(tool.Spec{
		Name:        toolName,
		Description: "Take seats on a flight.",
		Idempotency: &tool.Policy{Kind: tool.Effectful, KeyArguments: keyArguments, CheckArguments: []string{"seats"}},
		Timeout:     30 * time.Second,
		Parameters: stdjson.RawMessage(`{"type": "object", "properties": {"flight": {"type": "string"},
			"seats": {"type": "integer", "maximum": 9}, "request_id": {"type": "string"}}, "required": ["flight", "seats"]}`),
	}, noBody)
	if err != nil {
		t.Fatal(err)
	}
	fare, err := tool.New(tool.Spec{
		Name:        "lookup_fare",
		Description: "Read a flight's fare.",
		Idempotency: &tool.Policy{Kind: tool.ReadOnly, KeyArguments: []string{}},
	}, noBody)
	if err != nil {
		t.Fatal(err)
	}
	unavailable := bus.DeclOf(fare)
	unavailable.Unavailable = true
	checkServiceMsgs(t, []serviceMsg{
		{"catalog/request.json", &bus.CatalogRequest{}, v2Codec},
		{"catalog/request-next.json", &bus.CatalogRequest{After: toolName}, v2Codec},
		{"catalog/response.json", &bus.CatalogResponse{Tools: []bus.ToolDecl{bus.DeclOf(book), unavailable}}, v2Codec},
		{"catalog/error.json", &bus.CatalogResponse{Tools: []bus.ToolDecl{},
			Error: &bus.CatalogError{Code: bus.CatalogBadRequest, Message: "the request is not the JSON expected"}}, v2Codec},
	})
}

// newOfSameType returns a pointer to a new zero value of the type v points
// to.
func newOfSameType(v any) any { return reflect.New(reflect.TypeOf(v).Elem()).Interface() }

func noBody(context.Context, tool.Context, stdjson.RawMessage) (string, error) { return "", nil }

// TestHistoryGoldens: a history request, a page holding the golden completed
// answer as TOOLEXEC_EVENTS stores it, and an error reply.
func TestHistoryGoldens(t *testing.T) {
	var stored []byte
	var header map[string][]string
	if *update {
		m, err := wire.AnswerMsg(goldenAnswers(t)[0].answer, executorSource, wire.Structured)
		if err != nil {
			t.Fatal(err)
		}
		stored, header = m.Data, m.Header
	} else {
		m := readMsg(t, msgName("answers", "completed", wire.Structured))
		stored, header = m.Data, m.Header
	}
	checkServiceMsgs(t, []serviceMsg{
		{"history/request.json", &bus.HistoryRequest{
			Filter: wire.AnswerFilter(tenant, toolName, "*", callID), AfterSeq: 41, Limit: 10,
		}, v2Codec},
		{"history/request-since.json", &bus.HistoryRequest{Since: callTime}, v2Codec},
		{"history/response.json", &bus.HistoryResponse{
			Events: []bus.HistoryEvent{{
				Seq: 42, Subject: wire.EventSubject(tenant, events.KindCompleted, toolName, runID, callID),
				Time: answerTime.Add(time.Millisecond), Header: header, Data: stored,
			}, {
				Seq: 43, Subject: wire.EventSubject(tenant, events.KindCompleted, toolName, runID, "call_large"),
				Time: answerTime.Add(2 * time.Millisecond), Omitted: true,
			}},
			More: true, LastSeq: 57,
		}, v2Codec},
		{"history/error.json", &bus.HistoryResponse{Error: &bus.HistoryError{
			Code: bus.HistoryForbidden, Message: `filter "toolexec.event.globex.>" is not within toolexec.event.acme.`,
		}}, v2Codec},
	})
}

// TestAdminGoldens: the request and the reply of each admin subject, and an
// error reply, the records made by admin.NewRecordInfo.
func TestAdminGoldens(t *testing.T) {
	k := key(t)
	created := answerTime.Add(-time.Second)
	indeterminate := kvstore.Record{
		Tenant: tenant, Key: k, State: kvstore.StateIndeterminate, Reason: string(events.ReasonBodyFailed), BodyEntered: true,
		CheckDigest: "4c0b2a7e3d1f", Tool: toolName, RunID: runID, CallID: callID,
		Holder: "ex-1", Lease: 15 * time.Second, LeaseUntil: created.Add(15 * time.Second), Revision: 7,
		CreatedAt: created, UpdatedAt: answerTime, ExpiresAt: created.Add(24 * time.Hour),
	}
	claimed := indeterminate
	claimed.State, claimed.Reason, claimed.BodyEntered, claimed.LeaseExpired = kvstore.StateClaimed, "", false, true
	completed := indeterminate
	completed.State, completed.Reason, completed.BodyEntered, completed.Outcome = kvstore.StateCompleted, "", false, outcome
	completed.Revision, completed.UpdatedAt = 8, resolveTime
	checkServiceMsgs(t, []serviceMsg{
		{"admin/forget.request.json", &admin.ForgetRequest{Tenant: tenant}, stdCodec},
		{"admin/forget.response.json", &admin.ForgetResponse{Tenant: tenant, Records: 12}, stdCodec},
		{"admin/inspect.request.json", &admin.InspectRequest{Tenant: tenant, Key: k}, stdCodec},
		{"admin/inspect.response.json", &admin.InspectResponse{Record: admin.NewRecordInfo(indeterminate)}, stdCodec},
		{"admin/list.request.json", &admin.ListRequest{Tenant: tenant, State: kvstore.StateIndeterminate, Limit: 50}, stdCodec},
		{"admin/list.response.json", &admin.ListResponse{
			Records: []*admin.RecordInfo{admin.NewRecordInfo(claimed), admin.NewRecordInfo(indeterminate)},
			More:    true, Now: resolveTime,
		}, stdCodec},
		{"admin/resolve.request.json", &admin.ResolveRequest{
			Tenant: tenant, Key: k, Action: events.ActionComplete, Outcome: outcome, Operator: "ana",
		}, stdCodec},
		{"admin/resolve.response.json", &admin.ResolveResponse{Record: admin.NewRecordInfo(completed)}, stdCodec},
		{"admin/error.json", &admin.InspectResponse{Error: &admin.Error{
			Code: admin.CodeNotFound, Message: "kvstore: no record of the key",
		}}, stdCodec},
	})
}

// TestInteractionGoldens: what the executor asks a call's caller, the
// caller's take and answers, and a refused one (an accepted take or answer
// gets an empty reply).
func TestInteractionGoldens(t *testing.T) {
	const ix = "ix_9e107d9d372bb6826bd81d3542a419d6"
	checkServiceMsgs(t, []serviceMsg{
		{"interact/request.json", &wire.Ask{JSONRPC: "2.0", ID: ix, Method: wire.MethodElicit,
			Params: stdjson.RawMessage(`{"message":"Book seat 12A?","requestedSchema":{"type":"object"}}`)}, stdCodec},
		{"interact/take.json", &wire.Respond{ID: ix, Take: true}, stdCodec},
		{"interact/answer.json", &wire.Respond{JSONRPC: "2.0", ID: ix,
			Result: stdjson.RawMessage(`{"action":"accept","content":{}}`)}, stdCodec},
		{"interact/answer-error.json", &wire.Respond{JSONRPC: "2.0", ID: ix,
			Error: &wire.RPCError{Code: -32600, Message: "the user left", Data: stdjson.RawMessage(`{"why":"timeout"}`)}}, stdCodec},
		{"interact/reply-taken.json", &wire.RespondReply{Error: &wire.RespondError{
			Code: wire.RespondTaken, Message: "another caller took the request",
		}}, stdCodec},
	})
}
