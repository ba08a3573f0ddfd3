package toolexec

import (
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/admin"
	"github.com/tesserix/toolexec/events"
)

// The operators' verbs. An effectful call whose outcome nobody knows leaves its
// key indeterminate until someone finds out from the downstream system what
// happened and resolves it: completed with the outcome (every duplicate is then
// answered with it) or released (the next call runs the tool).
type (
	// AdminClient sends the admin requests — List, Inspect, Resolve, Forget —
	// to the executors. Connect it with admin credentials: the admin subjects
	// are for operators, never for tenants (deploy/accounts.conf exports them
	// to its ADMIN account only, and executors started with --admin-account
	// refuse requests from anywhere else with admin.ErrForbidden).
	AdminClient = admin.Client
	// ResolveRequest settles one indeterminate key; see AdminClient.Resolve.
	ResolveRequest = admin.ResolveRequest
	// ListRequest asks for a tenant's records in one state; see
	// AdminClient.List.
	ListRequest = admin.ListRequest
	// ListResponse is a page of records; see AdminClient.List.
	ListResponse = admin.ListResponse
	// RecordInfo is one idempotency record as an operator sees it: never the
	// arguments.
	RecordInfo = admin.RecordInfo
)

// NewAdminClient returns an admin client on nc.
func NewAdminClient(nc *nats.Conn) (*AdminClient, error) { return admin.NewClient(nc) }

// What a resolution does with an indeterminate key (ResolveRequest.Action).
const (
	// ResolveComplete records the outcome the operator found: every duplicate is
	// answered with it.
	ResolveComplete = events.ActionComplete
	// ResolveRelease drops the record: the effect did not land, and the next
	// call runs the tool.
	ResolveRelease = events.ActionRelease
)
