package accountcheck_test

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/internal/accountcheck"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
)

func header(info string) nats.Header {
	h := nats.Header{}
	if info != "" {
		h.Set(accountcheck.Header, info)
	}
	return h
}

// TestCheck: with an account, only a header naming it exactly is admitted;
// without one, everything is. Each refusal is a *RefusedError naming where the
// request came from.
func TestCheck(t *testing.T) {
	tests := []struct {
		name, account, info string
		wantFrom            string // the refusal's From; unused when admitted
		admitted            bool
	}{
		{"from the account", "ADMIN", `{"acc":"ADMIN","rtt":1000}`, "", true},
		{"no header", "ADMIN", "", "", false},
		{"another account", "ADMIN", `{"acc":"acme"}`, "acme", false},
		{"no account named", "ADMIN", `{"user":"admin"}`, "", false},
		{"the account in another case", "ADMIN", `{"acc":"admin"}`, "admin", false},
		{"not JSON", "ADMIN", `ADMIN`, "", false},
		{"the name elsewhere", "ADMIN", `{"svc":"ADMIN","acc":"TOOLEXEC"}`, "TOOLEXEC", false},
		{"an account padded", "ADMIN", `{"acc":" ADMIN"}`, " ADMIN", false},
		{"the account named twice", "ADMIN", `{"acc":"acme","acc":"ADMIN"}`, "", false},
		{"the account not a string", "ADMIN", `{"acc":["ADMIN"]}`, "", false},
		{"no account configured, no header", "", "", "", true},
		{"no account configured, another account", "", `{"acc":"acme"}`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := accountcheck.New(tt.account, "test", slog.New(slog.DiscardHandler))
			err := c.Check("toolexec.admin.x", header(tt.info))
			if tt.admitted {
				if err != nil {
					t.Fatalf("Check = %v, want admitted", err)
				}
				return
			}
			var re *accountcheck.RefusedError
			if !errors.As(err, &re) || !errors.Is(err, accountcheck.ErrRefused) {
				t.Fatalf("Check = %v, want a *RefusedError matching ErrRefused", err)
			}
			if re.From != tt.wantFrom || re.Want != tt.account {
				t.Errorf("refusal %+v, want from %q, want %q", re, tt.wantFrom, tt.account)
			}
		})
	}
}

// TestCheckLogs: refusals are logged under the service's name, sparingly;
// admitted requests are not logged.
func TestCheckLogs(t *testing.T) {
	var logs testenv.LogBuffer
	c := accountcheck.New("ADMIN", "history", slog.New(slog.NewTextHandler(&logs, nil)))
	if err := c.Check("toolexec.admin.history", header(`{"acc":"ADMIN"}`)); err != nil {
		t.Fatal(err)
	}
	if logs.String() != "" {
		t.Fatalf("an admitted request was logged: %s", logs.String())
	}
	for range 3 {
		if err := c.Check("toolexec.admin.history", header(`{"acc":"acme"}`)); err == nil {
			t.Fatal("a request from acme was admitted")
		}
	}
	if n := strings.Count(logs.String(), "history: request refused"); n != 1 {
		t.Errorf("%d lines for three refusals in a row, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "subject=toolexec.admin.history account=acme") {
		t.Errorf("the line does not name the subject and the account: %s", logs.String())
	}
}
