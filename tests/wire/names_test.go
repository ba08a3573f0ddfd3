package wire_test

import (
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/natsstore"
	"github.com/tesserix/toolexec/schemas"
	"github.com/tesserix/toolexec/tool"
	"github.com/tesserix/toolexec/tool/natstool"
	"github.com/tesserix/toolexec/worker"
)

// natsMsg returns a message without headers.
func natsMsg(subject string, data []byte) *nats.Msg {
	return &nats.Msg{Subject: subject, Header: nats.Header{}, Data: data}
}

// TestSchemaGoldens: the JSON Schemas the executors embed, and validate
// events against, are the goldens' copies byte for byte, and no schema came
// or went.
func TestSchemaGoldens(t *testing.T) {
	names := schemas.EventSchemaNames()
	for _, name := range names {
		b, err := schemas.EventSchema(name)
		if err != nil {
			t.Fatal(err)
		}
		checkBytes(t, "schemas/"+schemas.EventSchemaPath(name), b, func(want, got []byte) []string {
			return jsonChanges(want, got)
		})
	}
}

// TestSubjectGoldens: the subjects and subject filters of every message the
// executors publish or answer, written for the golden call.
func TestSubjectGoldens(t *testing.T) {
	kinds := map[string]string{}
	for _, k := range events.Kinds() {
		kinds[string(k)] = wire.KindSubjects(k)
	}
	subjects := map[string]any{
		"call":                  wire.CallSubject(tenant, toolName, callID),
		"call_stream_subjects":  wire.CallSubjects,
		"legacy_call_subjects":  wire.LegacyCallSubjects,
		"tenant_calls":          wire.TenantCallSubjects(tenant),
		"answer":                wire.EventSubject(tenant, events.KindCompleted, toolName, runID, callID),
		"answer_filter":         wire.AnswerFilter(tenant, toolName, runID, callID),
		"event_stream_subjects": wire.EventSubjects,
		"tenant_events":         wire.TenantEventSubjects(tenant),
		"kind_subjects":         kinds,
		"placeholder":           wire.Placeholder,
		"note":                  wire.NoteSubject(wire.NoteProgress, tenant, toolName, runID, callID, 1),
		"note_filter":           wire.NoteFilter(tenant, toolName, callID),
		"history":               wire.HistorySubject(tenant),
		"history_subjects":      wire.HistorySubjects,
		"admin_history":         wire.AdminHistorySubject,
		"catalog":               wire.CatalogSubject(tenant),
		"catalog_subjects":      wire.CatalogSubjects,
		"admin": map[string]string{
			"forget": admin.ForgetSubject, "inspect": admin.InspectSubject, "resolve": admin.ResolveSubject,
			"list": admin.ListSubject, "history": wire.AdminHistorySubject, "all": admin.Subjects,
		},
		"interact":          wire.InteractSubject(tenant, toolName, callID),
		"interact_subjects": wire.InteractSubjects,
		"respond":           wire.RespondSubject(tenant, toolName, callID),
		"respond_subjects":  wire.RespondSubjects,
		"body":              wire.BodySubject(toolName),
		"body_subjects":     wire.BodySubjects,
		"body_queue":        wire.BodyQueue,
		"worker_service":    wire.WorkerService,
		"worker_info":       wire.WorkerInfoSubject,
		"queues": map[string]string{
			"catalog": bus.DefaultCatalogQueue, "history": bus.DefaultHistoryQueue, "admin": admin.DefaultQueue,
		},
	}
	checkJSON(t, "subjects.json", marshalJSON(t, subjects))
}

// TestStreamGoldens: the streams, the shared consumer and the KV bucket the
// executors create with their defaults, as the JetStream API receives their
// configuration.
func TestStreamGoldens(t *testing.T) {
	var cfg bus.StreamsConfig
	streams := map[string]any{
		"calls":  cfg.CallStreamConfig(),
		"events": cfg.EventStreamConfig(),
		"legacy_calls": map[string]any{
			"name": wire.LegacyCallStream, "subjects": []string{wire.LegacyCallSubjects},
		},
		"consumer": map[string]any{
			"stream": wire.CallStream, "config": bus.ConsumerConfig{}.JetStreamConfig(),
		},
		"kv_bucket": natsstore.DefaultBucket,
	}
	checkJSON(t, "streams.json", marshalJSON(t, streams))
}

// TestHeaderGoldens: the names (and fixed values) of the NATS headers calls,
// answers, interactions and the bodies' requests and replies carry.
func TestHeaderGoldens(t *testing.T) {
	headers := map[string]any{
		"content_type":            wire.ContentType,
		"structured_content_type": wire.StructuredJSON,
		"attribute_prefix":        wire.HeaderPrefix,
		"msg_id":                  jetstream.MsgIDHeader,
		"expected_stream":         jetstream.ExpectedStreamHeader,
		"repeat":                  wire.RepeatHeader,
		"traceparent":             wire.TraceParentHeader,
		"interactions":            wire.InteractionsHeader,
		"interactions_values":     []string{wire.CanElicit, wire.CanSample},
		"interaction_deadline":    wire.DeadlineHeader,
		"body_request": []string{
			tool.HeaderIdempotencyKey, tool.HeaderTenant, tool.HeaderRunID, tool.HeaderCallID,
			tool.HeaderTool, tool.HeaderAttempt, tool.HeaderTraceParent,
		},
		"body_error":           micro.ErrorHeader,
		"body_error_code":      micro.ErrorCodeHeader,
		"body_error_codes":     []string{natstool.CodeNoEffect, worker.CodeToolError},
		"declaration_metadata": wire.DeclarationMetadata,
	}
	checkJSON(t, "headers.json", marshalJSON(t, headers))
}

// TestVocabularyGoldens: the CloudEvents types and extensions, and every
// kind, reason, code and action an answer or a reply may hold.
func TestVocabularyGoldens(t *testing.T) {
	types := map[string]string{"call": wire.CallType}
	for _, k := range events.Kinds() {
		types[string(k)] = wire.EventType(k)
	}
	for _, k := range []string{wire.NoteProgress, wire.NoteLog} {
		types[k] = wire.NoteTypePrefix + k
	}
	rejections, failures := events.RejectionCodes(), events.FailureCodes()
	slices.Sort(rejections)
	slices.Sort(failures)
	vocabulary := map[string]any{
		"types":             types,
		"extensions":        []string{wire.ExtTenant, wire.ExtRunID, wire.ExtCallID, wire.ExtIdempotencyKey},
		"answer_kinds":      events.AnswerKinds(),
		"kinds":             events.Kinds(),
		"reasons":           events.Reasons(),
		"rejection_codes":   rejections,
		"failure_codes":     failures,
		"actions":           []events.Action{events.ActionComplete, events.ActionRelease},
		"note_kinds":        []string{wire.NoteProgress, wire.NoteLog},
		"max_token_len":     events.MaxTokenLen,
		"record_states":     []kvstore.State{kvstore.StateClaimed, kvstore.StateCompleted, kvstore.StateIndeterminate},
		"admin_error_codes": adminCodes(),
		"history_error_codes": []string{
			bus.HistoryBadRequest, bus.HistoryForbidden, bus.HistoryUnavailable,
		},
		"catalog_error_codes": []string{bus.CatalogBadRequest, bus.CatalogTooLarge},
		"respond_error_codes": []string{wire.RespondTaken, wire.RespondBadRequest},
		"methods":             []string{wire.MethodElicit, wire.MethodSample},
	}
	checkJSON(t, "vocabulary.json", marshalJSON(t, vocabulary))
}

func adminCodes() []string {
	return []string{
		admin.CodeInvalid, admin.CodeNotFound, admin.CodeNotIndeterminate, admin.CodeTooLarge, admin.CodeUnavailable,
		admin.CodeAuditFailed, admin.CodeUnsupported, admin.CodeForbidden, admin.CodeInternal,
	}
}
