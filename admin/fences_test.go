package admin_test

import (
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/bus/wire"
	"github.com/tesserix/toolexec/events"
	"github.com/tesserix/toolexec/internal/testkit/testenv"
	"github.com/tesserix/toolexec/kvstore"
	"github.com/tesserix/toolexec/kvstore/memstore"
)

// fenced is a harness with one responder serving a memory store that holds
// one indeterminate key of acme.
type fenced struct {
	*harness
	store kvstore.Store
	svc   *admin.Service
	key   string
}

func newFenced(t *testing.T, cfg admin.Config) *fenced {
	t.Helper()
	h := newHarness(t)
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { store.Close() })
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	svc, err := admin.Serve(h.js, store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return &fenced{harness: h, store: store, svc: svc, key: parkKeys(t, store, "acme", 1)[0]}
}

// request sends a raw request and returns the error member of its reply (nil
// when the request was served).
func (f *fenced) request(t *testing.T, m *nats.Msg) *admin.Error {
	t.Helper()
	reply, err := f.nc.RequestMsg(m, 30*time.Second)
	if err != nil {
		t.Fatalf("request on %s: %v", m.Subject, err)
	}
	var resp struct {
		Error *admin.Error `json:"error"`
	}
	if err := json.Unmarshal(reply.Data, &resp); err != nil {
		t.Fatalf("reply on %s is not JSON: %q", m.Subject, reply.Data)
	}
	return resp.Error
}

// untouched fails the test unless acme's key is still there, indeterminate.
func (f *fenced) untouched(t *testing.T) {
	t.Helper()
	rec, err := f.store.Get(ctxT(t), "acme", f.key)
	if err != nil || rec.State != kvstore.StateIndeterminate {
		t.Fatalf("acme's key is %+v, %v; want it untouched (indeterminate)", rec, err)
	}
}

// answerEvent returns an answer of acme's as the events stream stores it: the
// CloudEvent a consumer delivers, with a tenant member like a request's.
func answerEvent(t *testing.T) []byte {
	t.Helper()
	data, err := wire.AnswerJSON(events.Answer{
		Kind: events.KindCompleted, Tenant: "acme", Tool: "book", RunID: "run-1", CallID: "call-1",
		Outcome: "PNR-1", Key: digest("acme-0"), Time: time.Now().UTC(),
	}, admin.DefaultSource)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestStrictRequests: a request with a member its type does not have, or with
// anything after its JSON value, is a bad request and changes nothing; a
// CloudEvent delivered to an admin subject (as a consumer pointed there by a
// tenant would) is one of those.
func TestStrictRequests(t *testing.T) {
	f := newFenced(t, admin.Config{})
	key := `"` + digest("acme-0") + `"`
	tests := []struct {
		name, subject, body string
	}{
		{"a CloudEvent to forget", admin.ForgetSubject, string(answerEvent(t))},
		{"a CloudEvent to resolve", admin.ResolveSubject, string(answerEvent(t))},
		{"unknown member", admin.ForgetSubject, `{"tenant":"acme","all":true}`},
		{"another request's member", admin.ForgetSubject, `{"tenant":"acme","key":` + key + `}`},
		{"resolve with a stray member", admin.ResolveSubject, `{"tenant":"acme","key":` + key + `,"action":"release","why":"x"}`},
		{"a second value", admin.ForgetSubject, `{"tenant":"acme"} {"tenant":"acme"}`},
		{"trailing bytes", admin.ForgetSubject, `{"tenant":"acme"}x`},
		{"trailing bracket", admin.InspectSubject, `{"tenant":"acme","key":` + key + `}]`},
		{"an array", admin.ForgetSubject, `[{"tenant":"acme"}]`},
		{"empty", admin.ForgetSubject, ``},
		{"a string", admin.ListSubject, `"acme"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := f.request(t, &nats.Msg{Subject: tt.subject, Data: []byte(tt.body)})
			if e == nil || e.Code != admin.CodeInvalid {
				t.Fatalf("reply error %v, want %s", e, admin.CodeInvalid)
			}
			f.untouched(t)
		})
	}

	// A well-formed request, even with white space around it, is served.
	e := f.request(t, &nats.Msg{Subject: admin.InspectSubject, Data: []byte(" {\"tenant\":\"acme\",\"key\":" + key + "}\n")})
	if e != nil {
		t.Fatalf("a well-formed inspect was refused: %v", e)
	}
}

// TestAdminAccount: with Config.Account set, only a request whose
// Nats-Request-Info header names that account is served. In one account, as
// here, the header reaches the service as the client wrote it, which lets this
// test play the server's part; tests/deploy shows that the server writes it
// where a request crosses an import.
func TestAdminAccount(t *testing.T) {
	var logs testenv.LogBuffer
	f := newFenced(t, admin.Config{Account: "ADMIN", Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	forget := func(info string) *nats.Msg {
		m := nats.NewMsg(admin.ForgetSubject)
		m.Data = []byte(`{"tenant":"acme"}`)
		if info != "" {
			m.Header.Set("Nats-Request-Info", info)
		}
		return m
	}
	refused := []struct{ name, info string }{
		{"no header", ""},
		{"another account", `{"acc":"acme","rtt":1000}`},
		{"no account named", `{"user":"admin"}`},
		{"the account in another case", `{"acc":"admin"}`},
		{"not JSON", `ADMIN`},
		{"the name elsewhere", `{"svc":"ADMIN","acc":"TOOLEXEC"}`},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			e := f.request(t, forget(tt.info))
			if e == nil || e.Code != admin.CodeForbidden || !errors.Is(e, admin.ErrForbidden) {
				t.Fatalf("reply error %v, want %s", e, admin.CodeForbidden)
			}
			f.untouched(t)
		})
	}
	// The admin client sends no header of its own: from inside the account it
	// is refused too, with an error callers can branch on.
	if _, err := f.client.Inspect(ctxT(t), "acme", f.key); !errors.Is(err, admin.ErrForbidden) {
		t.Errorf("Inspect without the header = %v, want ErrForbidden", err)
	}
	if n := strings.Count(logs.String(), "request refused"); n != 1 {
		t.Errorf("%d refusals were logged in a row, want 1 line:\n%s", n, logs.String())
	}

	// The service's own methods, called in process (the console's), are not
	// requests and are not checked.
	if rec, err := f.svc.Resolve(ctxT(t), admin.ResolveRequest{Tenant: "acme", Key: f.key, Action: events.ActionRelease}); err != nil || rec == nil {
		t.Fatalf("in-process Resolve = %+v, %v", rec, err)
	}

	// From the admin account: served.
	f.key = parkKeys(t, f.store, "acme", 1)[0]
	if e := f.request(t, forget(`{"acc":"ADMIN","rtt":1000}`)); e != nil {
		t.Fatalf("a forget from ADMIN was refused: %v", e)
	}
	if _, err := f.store.Get(ctxT(t), "acme", f.key); !errors.Is(err, kvstore.ErrNotFound) {
		t.Errorf("after a forget from ADMIN acme's key reads %v, want ErrNotFound", err)
	}
}

// TestNoAdminAccount: without Config.Account, requests are served whatever
// their header says, as on a server with one account.
func TestNoAdminAccount(t *testing.T) {
	f := newFenced(t, admin.Config{})
	m := nats.NewMsg(admin.InspectSubject)
	m.Data = []byte(`{"tenant":"acme","key":"` + f.key + `"}`)
	m.Header.Set("Nats-Request-Info", `{"acc":"acme"}`)
	if e := f.request(t, m); e != nil {
		t.Fatalf("inspect refused: %v", e)
	}
	if _, err := f.client.Inspect(ctxT(t), "acme", f.key); err != nil {
		t.Fatalf("Inspect: %v", err)
	}
}
