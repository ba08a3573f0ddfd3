package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

func TestSubjects(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"call", wire.CallSubject("acme", "book"), "toolexec.call.acme.book"},
		{"event", wire.EventSubject("acme", events.KindCompleted, "book", "run_1", "call-7"), "toolexec.event.acme.completed.book.run_1.call-7"},
		{"answer filter", wire.AnswerFilter("acme", "book", "run_1", "call-7"), "toolexec.event.acme.*.book.run_1.call-7"},
		{"tenant calls", wire.TenantCallSubjects("acme"), "toolexec.call.acme.>"},
		{"tenant events", wire.TenantEventSubjects("acme"), "toolexec.event.acme.>"},
		{"auditor indeterminate", wire.KindSubjects(events.KindIndeterminate), "toolexec.event.*.indeterminate.>"},
		{"auditor deduplicated", wire.KindSubjects(events.KindDeduplicated), "toolexec.event.*.deduplicated.>"},
		{"call stream filter", wire.CallSubjects, "toolexec.call.>"},
		{"event stream filter", wire.EventSubjects, "toolexec.event.>"},
		{"history", wire.HistorySubject("acme"), "toolexec.history.acme"},
		{"history served", wire.HistorySubjects, "toolexec.history.*"},
		{"call stream", wire.CallStream, "TOOLEXEC_CALLS"},
		{"event stream", wire.EventStream, "TOOLEXEC_EVENTS"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, tt.got, tt.want)
		}
	}
}

func TestParseCallSubject(t *testing.T) {
	tests := []struct {
		name       string
		give       string
		wantTenant string
		wantTool   string
		wantToken  string // the field a *TokenError names, if a token is at fault
	}{
		{name: "ok", give: "toolexec.call.acme.book", wantTenant: "acme", wantTool: "book"},
		{name: "ok all classes", give: "toolexec.call.A_b-9.Tool_1-x", wantTenant: "A_b-9", wantTool: "Tool_1-x"},
		{name: "ok max length", give: "toolexec.call." + strings.Repeat("t", 128) + ".book", wantTenant: strings.Repeat("t", 128), wantTool: "book"},
		{name: "empty", give: ""},
		{name: "wrong prefix", give: "toolexec.event.acme.book"},
		{name: "prefix case", give: "Toolexec.call.acme.book"},
		{name: "prefix only", give: "toolexec.call."},
		{name: "too few tokens", give: "toolexec.call.acme"},
		{name: "too many tokens", give: "toolexec.call.acme.book.extra"},
		{name: "empty tenant", give: "toolexec.call..book", wantToken: "tenant"},
		{name: "empty tool", give: "toolexec.call.acme.", wantToken: "tool"},
		{name: "wildcard tenant", give: "toolexec.call.*.book", wantToken: "tenant"},
		{name: "wildcard tool", give: "toolexec.call.acme.>", wantToken: "tool"},
		{name: "bad byte in tool", give: "toolexec.call.acme.bo ok", wantToken: "tool"},
		{name: "tenant too long", give: "toolexec.call." + strings.Repeat("t", 129) + ".book", wantToken: "tenant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant, tool, err := wire.ParseCallSubject(tt.give)
			if tt.wantTenant != "" {
				if err != nil || tenant != tt.wantTenant || tool != tt.wantTool {
					t.Fatalf("ParseCallSubject(%q) = %q, %q, %v; want %q, %q", tt.give, tenant, tool, err, tt.wantTenant, tt.wantTool)
				}
				if back := wire.CallSubject(tenant, tool); back != tt.give {
					t.Errorf("CallSubject(parsed) = %q, want %q", back, tt.give)
				}
				return
			}
			if !errors.Is(err, wire.ErrBadSubject) {
				t.Fatalf("ParseCallSubject(%q) = %q, %q, %v; want ErrBadSubject", tt.give, tenant, tool, err)
			}
			if tenant != "" || tool != "" {
				t.Errorf("ParseCallSubject(%q) returned %q, %q with its error", tt.give, tenant, tool)
			}
			var te *events.TokenError
			if gotToken := errors.As(err, &te); gotToken != (tt.wantToken != "") || (gotToken && te.Field != tt.wantToken) {
				t.Errorf("error %v: token error %+v, want one naming %q", err, te, tt.wantToken)
			}
		})
	}
}

func TestParseEventSubject(t *testing.T) {
	ok := wire.EventAddress{Tenant: "acme", Kind: events.KindIndeterminate, Tool: "book", RunID: "run_1", CallID: "c-1"}
	tests := []struct {
		name string
		give string
		want *wire.EventAddress
	}{
		{"ok", "toolexec.event.acme.indeterminate.book.run_1.c-1", &ok},
		{"placeholders", "toolexec.event.acme.rejected._._.c-1", &wire.EventAddress{Tenant: "acme", Kind: events.KindRejected, Tool: "_", RunID: "_", CallID: "c-1"}},
		{"wrong prefix", "toolexec.call.acme.indeterminate.book.run_1.c-1", nil},
		{"too few", "toolexec.event.acme.indeterminate.book.run_1", nil},
		{"too many", "toolexec.event.acme.indeterminate.book.run_1.c-1.x", nil},
		{"unknown kind", "toolexec.event.acme.done.book.run_1.c-1", nil},
		{"call is not a kind", "toolexec.event.acme.call.book.run_1.c-1", nil},
		{"wildcard kind", "toolexec.event.acme.*.book.run_1.c-1", nil},
		{"wildcard call", "toolexec.event.acme.completed.book.run_1.*", nil},
		{"empty run", "toolexec.event.acme.completed.book..c-1", nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wire.ParseEventSubject(tt.give)
			if tt.want == nil {
				if !errors.Is(err, wire.ErrBadSubject) {
					t.Fatalf("ParseEventSubject(%q) = %+v, %v; want ErrBadSubject", tt.give, got, err)
				}
				return
			}
			if err != nil || got != *tt.want {
				t.Fatalf("ParseEventSubject(%q) = %+v, %v; want %+v", tt.give, got, err, *tt.want)
			}
			if got.Subject() != tt.give {
				t.Errorf("Subject() = %q, want %q", got.Subject(), tt.give)
			}
		})
	}
}
