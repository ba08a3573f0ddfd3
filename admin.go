package toolexec

import (
	"github.com/nats-io/nats.go"

	"github.com/tesserix/toolexec/admin"
)

// AdminClient sends the operators' requests to the executors: List, Inspect,
// Resolve, Forget (see package admin). An effectful call whose outcome nobody
// knows leaves its key indeterminate until someone finds out from the
// downstream system what happened and resolves it: completed with the outcome
// (every duplicate is then answered with it) or released (the next call runs
// the tool). Connect it with admin credentials: the admin subjects are for
// operators, never for tenants (deploy/accounts.conf exports them to its ADMIN
// account only, and executors started with --admin-account refuse requests
// from anywhere else with admin.ErrForbidden).
type AdminClient = admin.Client

// NewAdminClient returns an admin client on nc. It returns an error matching
// admin.ErrInvalidConfig for a nil connection.
func NewAdminClient(nc *nats.Conn) (*AdminClient, error) { return admin.NewClient(nc) }
