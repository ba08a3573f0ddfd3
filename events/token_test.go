package events_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tesserix/toolexec/events"
)

func TestValidToken(t *testing.T) {
	tests := []struct {
		name string
		give string
		want bool
	}{
		{"letters", "acme", true},
		{"all classes", "Run_1-a", true},
		{"digits only", "0123456789", true},
		{"single char", "x", true},
		{"underscore", "_", true},
		{"dash", "-", true},
		{"max length", strings.Repeat("a", 128), true},
		{"empty", "", false},
		{"too long", strings.Repeat("a", 129), false},
		{"dot", "a.b", false},
		{"star", "*", false},
		{"gt", ">", false},
		{"space", "a b", false},
		{"tab", "a\tb", false},
		{"slash", "a/b", false},
		{"colon", "a:b", false},
		{"non ascii", "café", false},
		{"nul", "a\x00", false},
		{"high byte", "\xff", false},
		{"plus", "a+b", false},
		{"tilde", "~", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := events.ValidToken(tt.give); got != tt.want {
				t.Errorf("ValidToken(%q) = %v, want %v", tt.give, got, tt.want)
			}
			err := events.CheckToken("tenant", tt.give)
			if (err == nil) != tt.want {
				t.Fatalf("CheckToken(%q) = %v, want error: %v", tt.give, err, !tt.want)
			}
			if err == nil {
				return
			}
			if !errors.Is(err, events.ErrInvalidToken) {
				t.Errorf("errors.Is(%v, ErrInvalidToken) = false", err)
			}
			var te *events.TokenError
			if !errors.As(err, &te) {
				t.Fatalf("errors.As(%v, *TokenError) = false", err)
			}
			if te.Field != "tenant" || te.Value != tt.give {
				t.Errorf("TokenError = %+v, want field tenant, value %q", te, tt.give)
			}
			if !strings.Contains(err.Error(), "tenant") {
				t.Errorf("error %q does not name the field", err)
			}
		})
	}
}

func TestTokenErrorMessageIsBounded(t *testing.T) {
	long := strings.Repeat("é", 10_000) // multi-byte, to check the cut lands on a rune boundary
	err := events.CheckToken("tool", long)
	if err == nil {
		t.Fatal("CheckToken accepted a 20,000-byte token")
	}
	msg := err.Error()
	if len(msg) > 300 {
		t.Errorf("message is %d bytes long; want it bounded: %.100s...", len(msg), msg)
	}
	if !strings.Contains(msg, "20000 bytes") {
		t.Errorf("message %q does not say how long the value was", msg)
	}
	if strings.Contains(msg, `\x`) {
		t.Errorf("message %q cut a rune in half", msg)
	}
}
