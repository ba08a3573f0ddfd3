package kvstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tesserix/toolexec/kvstore"
)

var (
	okDigest = strings.Repeat("0", 64)
	okReq    = kvstore.ClaimRequest{Tenant: "acme", Key: okDigest, Holder: "w1", Lease: time.Minute}
	okLease  = kvstore.Lease{Tenant: "acme", Key: okDigest, Holder: "w1", Token: "t"}
	okSeen   = kvstore.Record{Tenant: "acme", Key: okDigest, State: kvstore.StateClaimed, Holder: "w0", Revision: 1}
)

// TestChecks: each of the contract's checks accepts the valid forms and refuses
// the others with an error wrapping ErrInvalid whose message names the field.
func TestChecks(t *testing.T) {
	withReq := func(f func(*kvstore.ClaimRequest)) kvstore.ClaimRequest { r := okReq; f(&r); return r }
	withLease := func(f func(*kvstore.Lease)) kvstore.Lease { l := okLease; f(&l); return l }
	tests := []struct {
		name     string
		give     func() error
		wantText string // empty: the check passes
	}{
		{"tenant", func() error { return kvstore.CheckTenant("A-z_09") }, ""},
		{"tenant of 128", func() error { return kvstore.CheckTenant(strings.Repeat("a", 128)) }, ""},
		{"empty tenant", func() error { return kvstore.CheckTenant("") }, "tenant"},
		{"tenant of 129", func() error { return kvstore.CheckTenant(strings.Repeat("a", 129)) }, "tenant"},
		{"tenant with a dot", func() error { return kvstore.CheckTenant("a.b") }, "tenant"},
		{"tenant with a brace", func() error { return kvstore.CheckTenant("a{b") }, "tenant"},
		{"tenant with a NUL", func() error { return kvstore.CheckTenant("a\x00b") }, "tenant"},
		{"key", func() error { return kvstore.CheckKey("acme", strings.Repeat("f", 64)) }, ""},
		{"key with a bad tenant", func() error { return kvstore.CheckKey("=clock", okDigest) }, "tenant"},
		{"short digest", func() error { return kvstore.CheckKey("acme", okDigest[:63]) }, "key"},
		{"upper-case digest", func() error { return kvstore.CheckKey("acme", strings.Repeat("F", 64)) }, "key"},
		{"empty digest", func() error { return kvstore.CheckKey("acme", "") }, "key"},
		{"lease duration", func() error { return kvstore.CheckLeaseDuration(time.Nanosecond) }, ""},
		{"zero lease duration", func() error { return kvstore.CheckLeaseDuration(0) }, "lease"},
		{"negative lease duration", func() error { return kvstore.CheckLeaseDuration(-time.Second) }, "lease"},
		{"claim", func() error { return okReq.Validate() }, ""},
		{"claim without text fields", func() error {
			return kvstore.ClaimRequest{Tenant: "acme", Key: okDigest, Holder: "w", Lease: time.Second}.Validate()
		}, ""},
		{"claim with a bad tenant", func() error { return withReq(func(r *kvstore.ClaimRequest) { r.Tenant = "a b" }).Validate() }, "tenant"},
		{"claim with a bad digest", func() error { return withReq(func(r *kvstore.ClaimRequest) { r.Key = "zz" }).Validate() }, "key"},
		{"claim without holder", func() error { return withReq(func(r *kvstore.ClaimRequest) { r.Holder = "" }).Validate() }, "holder"},
		{"claim with a zero lease", func() error { return withReq(func(r *kvstore.ClaimRequest) { r.Lease = 0 }).Validate() }, "lease"},
		{"take over", func() error { return okReq.ValidateTakeOver(okSeen) }, ""},
		{"take over of a bad seen", func() error {
			seen := okSeen
			seen.Key = "zz"
			return okReq.ValidateTakeOver(seen)
		}, "key"},
		{"take over naming no key", func() error {
			return withReq(func(r *kvstore.ClaimRequest) { r.Tenant, r.Key = "", "" }).ValidateTakeOver(okSeen)
		}, "tenant"},
		{"take over of another key", func() error {
			return withReq(func(r *kvstore.ClaimRequest) { r.Key = strings.Repeat("1", 64) }).ValidateTakeOver(okSeen)
		}, "record seen"},
		{"take over of another tenant", func() error {
			return withReq(func(r *kvstore.ClaimRequest) { r.Tenant = "other" }).ValidateTakeOver(okSeen)
		}, "record seen"},
		{"take over without holder", func() error {
			return withReq(func(r *kvstore.ClaimRequest) { r.Holder = "" }).ValidateTakeOver(okSeen)
		}, "holder"},
		{"take over with a zero lease", func() error {
			return withReq(func(r *kvstore.ClaimRequest) { r.Lease = 0 }).ValidateTakeOver(okSeen)
		}, "lease"},
		{"lease", func() error { return okLease.Validate() }, ""},
		{"zero lease", func() error { return kvstore.Lease{}.Validate() }, "tenant"},
		{"lease with a bad tenant", func() error { return withLease(func(l *kvstore.Lease) { l.Tenant = "a b" }).Validate() }, "tenant"},
		{"lease with a bad digest", func() error { return withLease(func(l *kvstore.Lease) { l.Key = "" }).Validate() }, "key"},
		{"lease without holder", func() error { return withLease(func(l *kvstore.Lease) { l.Holder = "" }).Validate() }, "holder"},
		{"lease without token", func() error { return withLease(func(l *kvstore.Lease) { l.Token = "" }).Validate() }, "token"},
		{"state claimed", func() error { return kvstore.StateClaimed.Validate() }, ""},
		{"state completed", func() error { return kvstore.StateCompleted.Validate() }, ""},
		{"state indeterminate", func() error { return kvstore.StateIndeterminate.Validate() }, ""},
		{"empty state", func() error { return kvstore.State("").Validate() }, "state"},
		{"unknown state", func() error { return kvstore.State("gone").Validate() }, "state"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.give()
			if tt.wantText == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, kvstore.ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not name %q", err, tt.wantText)
			}
		})
	}
}
