package bus

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCapError(t *testing.T) {
	short := "short"
	if got := capError(short); got != short {
		t.Errorf("capError(short) = %q", got)
	}
	long := strings.Repeat("é", MaxErrorBytes) // two bytes each
	got := capError(long)
	if len(got) > MaxErrorBytes || !strings.HasSuffix(got, cutMark) || !utf8.ValidString(got) {
		t.Errorf("capError(long): %d bytes, valid %t, suffix %t", len(got), utf8.ValidString(got), strings.HasSuffix(got, cutMark))
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		n    int
		want string
	}{
		{1, "50ms"}, {2, "100ms"}, {3, "200ms"}, {8, "5s"}, {100, "5s"},
	}
	for _, tt := range tests {
		if got := backoff(tt.n).String(); got != tt.want {
			t.Errorf("backoff(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}

func TestSplitCallSubject(t *testing.T) {
	tests := []struct {
		give         string
		tenant, tool string
		ok           bool
	}{
		{"toolexec.call.acme.book", "acme", "book", true},
		{"toolexec.call.acme", "acme", "", true},
		{"toolexec.call.acme.book.x", "acme", "book.x", true},
		{"toolexec.event.acme.book", "", "", false},
	}
	for _, tt := range tests {
		tenant, tool, ok := splitCallSubject(tt.give)
		if tenant != tt.tenant || tool != tt.tool || ok != tt.ok {
			t.Errorf("splitCallSubject(%q) = %q, %q, %t", tt.give, tenant, tool, ok)
		}
	}
}
