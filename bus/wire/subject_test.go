package wire_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
)

func TestSubjects(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"call", wire.CallSubject("acme", "book", "call-7"), "toolexec.call.acme.book.call-7"},
		{"event", wire.EventSubject("acme", events.KindCompleted, "book", "run_1", "call-7"), "toolexec.event.acme.completed.book.run_1.call-7"},
		{"answer filter", wire.AnswerFilter("acme", "book", "run_1", "call-7"), "toolexec.event.acme.*.book.run_1.call-7"},
		{"tenant calls", wire.TenantCallSubjects("acme"), "toolexec.call.acme.>"},
		{"tenant events", wire.TenantEventSubjects("acme"), "toolexec.event.acme.>"},
		{"auditor indeterminate", wire.KindSubjects(events.KindIndeterminate), "toolexec.event.*.indeterminate.>"},
		{"auditor deduplicated", wire.KindSubjects(events.KindDeduplicated), "toolexec.event.*.deduplicated.>"},
		{"call stream filter", wire.CallSubjects, "toolexec.call.*.*.*"},
		{"legacy call stream filter", wire.LegacyCallSubjects, "toolexec.call.*.*"},
		{"event stream filter", wire.EventSubjects, "toolexec.event.>"},
		{"history", wire.HistorySubject("acme"), "toolexec.history.acme"},
		{"history served", wire.HistorySubjects, "toolexec.history.*"},
		{"call stream", wire.CallStream, "TOOLEXEC_CALLS_V2"},
		{"legacy call stream", wire.LegacyCallStream, "TOOLEXEC_CALLS"},
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
		name      string
		give      string
		want      wire.CallSubjectParts
		wantToken string // the field a *TokenError names, if a token is at fault
	}{
		{name: "ok", give: "toolexec.call.acme.book.c-1", want: wire.CallSubjectParts{Tenant: "acme", Tool: "book", CallID: "c-1"}},
		{name: "ok version 1", give: "toolexec.call.acme.book", want: wire.CallSubjectParts{Tenant: "acme", Tool: "book"}},
		{name: "ok all classes", give: "toolexec.call.A_b-9.Tool_1-x.Z_0-z", want: wire.CallSubjectParts{Tenant: "A_b-9", Tool: "Tool_1-x", CallID: "Z_0-z"}},
		{name: "ok max length", give: "toolexec.call." + strings.Repeat("t", 128) + ".book." + strings.Repeat("c", 128),
			want: wire.CallSubjectParts{Tenant: strings.Repeat("t", 128), Tool: "book", CallID: strings.Repeat("c", 128)}},
		{name: "empty", give: ""},
		{name: "wrong prefix", give: "toolexec.event.acme.book.c-1"},
		{name: "prefix case", give: "Toolexec.call.acme.book.c-1"},
		{name: "prefix only", give: "toolexec.call."},
		{name: "too few tokens", give: "toolexec.call.acme"},
		{name: "too many tokens", give: "toolexec.call.acme.book.c-1.extra"},
		{name: "empty tenant", give: "toolexec.call..book.c-1", wantToken: "tenant"},
		{name: "empty tool", give: "toolexec.call.acme..c-1", wantToken: "tool"},
		{name: "empty call id", give: "toolexec.call.acme.book.", wantToken: "callid"},
		{name: "wildcard tenant", give: "toolexec.call.*.book.c-1", wantToken: "tenant"},
		{name: "wildcard tool", give: "toolexec.call.acme.*.c-1", wantToken: "tool"},
		{name: "wildcard call id", give: "toolexec.call.acme.book.>", wantToken: "callid"},
		{name: "bad byte in call id", give: "toolexec.call.acme.book.c 1", wantToken: "callid"},
		{name: "tenant too long", give: "toolexec.call." + strings.Repeat("t", 129) + ".book.c-1", wantToken: "tenant"},
		{name: "call id too long", give: "toolexec.call.acme.book." + strings.Repeat("c", 129), wantToken: "callid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := wire.ParseCallSubject(tt.give)
			if tt.want.Tenant != "" {
				if err != nil || got != tt.want {
					t.Fatalf("ParseCallSubject(%q) = %+v, %v; want %+v", tt.give, got, err, tt.want)
				}
				if got.CallID != "" {
					if back := wire.CallSubject(got.Tenant, got.Tool, got.CallID); back != tt.give {
						t.Errorf("CallSubject(parsed) = %q, want %q", back, tt.give)
					}
				}
				return
			}
			if !errors.Is(err, wire.ErrBadSubject) {
				t.Fatalf("ParseCallSubject(%q) = %+v, %v; want ErrBadSubject", tt.give, got, err)
			}
			if got != (wire.CallSubjectParts{}) {
				t.Errorf("ParseCallSubject(%q) returned %+v with its error", tt.give, got)
			}
			var te *events.TokenError
			if gotToken := errors.As(err, &te); gotToken != (tt.wantToken != "") || (gotToken && te.Field != tt.wantToken) {
				t.Errorf("error %v: token error %+v, want one naming %q", err, te, tt.wantToken)
			}
		})
	}
}

func TestIsRepeat(t *testing.T) {
	tests := []struct {
		h    nats.Header
		want bool
	}{
		{nil, false},
		{nats.Header{wire.RepeatHeader: {"true"}}, true},
		{nats.Header{"toolexec-repeat": {"TRUE"}}, true},
		{nats.Header{wire.RepeatHeader: {"false"}}, false},
		{nats.Header{wire.RepeatHeader: {"1"}}, false},
		{nats.Header{wire.RepeatHeader: {"true", "true"}}, false},
	}
	for _, tt := range tests {
		if got := wire.IsRepeat(tt.h); got != tt.want {
			t.Errorf("IsRepeat(%v) = %v, want %v", tt.h, got, tt.want)
		}
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
